package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTokenCommands drives `starplan token` as the built binary: alone on the store, then while
// `starplan serve` holds it, where the commands run inside the server (the relay, as the local
// user, an admin) and a token they make or revoke counts from the server's next request on.
func TestTokenCommands(t *testing.T) {
	t.Parallel()
	bin := starplanBinary(t)
	lc := newLifecycle(t, bin, lifecycleDomain{name: "inventory", dir: filepath.Join("..", "..", "domains", "inventory")})
	dir := filepath.Join(lc.work, "store")
	lc.ok(lc.initArgs(dir)...)

	// Alone: create prints the secret once; list never shows it.
	var created struct{ Name, Role, Token string }
	require.NoError(t, json.Unmarshal([]byte(lc.ok("--db", dir, "token", "create", "agent-1", "--role", "proposer", "--expires", "30d", "--json").out), &created))
	assert.Equal(t, "agent-1", created.Name)
	assert.Equal(t, "proposer", created.Role)
	assert.Regexp(t, `^spt_[0-9a-f]{16}_[0-9a-f]{64}$`, created.Token)
	list := lc.ok("--db", dir, "token", "list", "--json").out
	assert.Contains(t, list, `"agent-1"`)
	assert.Contains(t, list, `"expires_at": "`)
	assert.NotContains(t, list, created.Token[len(created.Token)-64:], "list never shows a secret")
	s := lc.run("--db", dir, "token", "create", "agent-1", "--role", "approver")
	assert.Equal(t, ExitUsage, s.code, "%s", s)
	assert.Contains(t, s.err, "exists already")
	s = lc.run("--db", dir, "token", "create", "admin", "--role", "admin")
	assert.Equal(t, ExitUsage, s.code, "the legacy token's name is taken: %s", s)
	s = lc.run("--db", dir, "token", "create", "x", "--role", "root")
	assert.Equal(t, ExitUsage, s.code, "%s", s)

	// Served: the commands go through the server, and its HTTP API follows them.
	srv := lc.serve(dir)
	m := regexp.MustCompile(`listening on (http://[0-9.:]+)`).FindStringSubmatch(srv.errb.String())
	require.NotNil(t, m, "%s", srv.errb)
	base := m[1]
	get := func(token, method, path string) (int, string) {
		req, err := http.NewRequestWithContext(lc.ctx, method, base+path, strings.NewReader(`{"digest": "sha256:00"}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	var approver struct{ Token string }
	require.NoError(t, json.Unmarshal([]byte(lc.ok("--db", dir, "token", "create", "alice", "--role", "approver", "--json").out), &approver))
	code, body := get(approver.Token, "GET", "/v1/runs")
	assert.Equal(t, http.StatusOK, code, "a token made through the server works at once: %s", body)
	code, body = get(created.Token, "POST", "/v1/runs/r_0000000000/apply")
	assert.Equal(t, http.StatusForbidden, code, body)
	assert.Contains(t, body, `"forbidden-role"`)
	code, _ = get("a-token-for-the-lifecycle-test", "GET", "/v1/runs")
	assert.Equal(t, http.StatusOK, code, "STARPLAN_TOKEN is the admin token")
	code, body = get(created.Token, "POST", "/v1/runs/r_0000000000/replay")
	assert.Equal(t, http.StatusForbidden, code, "replay is for admins: %s", body)

	list = lc.ok("--db", dir, "token", "list", "--json").out
	var listed struct {
		Tokens []struct {
			Name     string  `json:"name"`
			LastUsed *string `json:"last_used_at"`
		} `json:"tokens"`
	}
	require.NoError(t, json.Unmarshal([]byte(list), &listed))
	require.Len(t, listed.Tokens, 2)
	for _, tok := range listed.Tokens {
		assert.NotNil(t, tok.LastUsed, "%s was used through the server", tok.Name)
	}

	// The relay is the local user, an admin: it prunes, which no proposer may.
	lc.ok("--db", dir, "runs", "prune", "--older-than", "30d")

	lc.ok("--db", dir, "token", "revoke", "alice")
	code, body = get(approver.Token, "GET", "/v1/runs")
	assert.Equal(t, http.StatusUnauthorized, code, "revoked through the server, refused at the next request: %s", body)
	assert.Contains(t, body, "revoked")
	srv.stop()

	// Alone again: the store kept what the server did.
	list = lc.ok("--db", dir, "token", "list").out
	assert.Contains(t, list, "revoked")
}
