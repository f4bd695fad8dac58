package server

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTokenIsCreatedOnceOwnerOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tok, path, created, err := LoadToken(dir, "")
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, filepath.Join(dir, TokenFile), path)
	assert.Regexp(t, `^[0-9a-f]{64}$`, tok)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	again, _, created, err := LoadToken(dir, "")
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, tok, again, "the next start reuses it")

	other, _, _, err := LoadToken(t.TempDir(), "")
	require.NoError(t, err)
	assert.NotEqual(t, tok, other, "tokens are random")
}

func TestTokenFileReadableByOthersIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, path, _, err := LoadToken(dir, "")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(path, 0o644))
	_, _, _, err = LoadToken(dir, "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "chmod 600")
}

func TestGivenTokenWinsAndMustBeLongEnough(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tok, path, created, err := LoadToken(dir, "a-token-given-by-flag")
	require.NoError(t, err)
	assert.Equal(t, "a-token-given-by-flag", tok)
	assert.Empty(t, path)
	assert.False(t, created)
	_, err = os.Stat(filepath.Join(dir, TokenFile))
	assert.True(t, os.IsNotExist(err), "a given token is not written")

	for _, bad := range []string{"short", "has a space in it somewhere"} {
		_, _, _, err = LoadToken(dir, bad)
		assert.Error(t, err, bad)
	}
}

func TestTokenFileWithoutATokenIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, TokenFile), []byte("\n"), 0o600))
	_, _, _, err := LoadToken(dir, "")
	assert.Error(t, err)
}
