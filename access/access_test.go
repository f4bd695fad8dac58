package access

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRoleRights(t *testing.T) {
	want := map[Role][]Right{
		Proposer: {Read, Propose},
		Approver: {Read, Propose, Approve},
		Admin:    {Read, Propose, Approve, Administer},
		"":       {},
		"root":   {},
	}
	for role, rights := range want {
		for _, x := range []Right{Read, Propose, Approve, Administer} {
			assert.Equal(t, assert.ObjectsAreEqual(true, contains(rights, x)), role.Can(x), "%q can %q", role, x)
		}
	}
}

func contains(rs []Right, x Right) bool {
	for _, r := range rs {
		if r == x {
			return true
		}
	}
	return false
}

func TestParseRole(t *testing.T) {
	for _, r := range Roles {
		got, err := ParseRole(string(r))
		require.NoError(t, err)
		assert.Equal(t, r, got)
	}
	_, err := ParseRole("owner")
	assert.ErrorContains(t, err, "proposer, approver, admin")
}

func TestLocal(t *testing.T) {
	p := Local()
	assert.True(t, p.IsLocal())
	assert.Equal(t, Admin, p.Role)
	assert.False(t, Principal{Name: "agent", Role: Proposer}.IsLocal())
}

// A subject id is shown to reviewers and in token lists: one that holds what does not show, or
// shows as something else, is refused (review: "M001" with a zero-width space was accepted).
func TestCheckSubject(t *testing.T) {
	for _, ok := range []string{"", "M001", "C-1/ß", "customer 42", "名前"} {
		assert.NoError(t, CheckSubject(ok), "%q", ok)
	}
	for _, bad := range []string{"M001\u200b", "\u2060M001", "M0\ufeff01", "M001\u202e", " M001", "M001\n", "M\x00", "\xff", strings.Repeat("x", MaxSubject+1)} {
		assert.Error(t, CheckSubject(bad), "%q", bad)
	}
}
