package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/internal/errcode"
	"github.com/starplan/starplan/server"
	"github.com/starplan/starplan/store/bolt"
)

// jsonErrorCode runs a command with --json among args and returns the "code" of the error
// document it printed.
func jsonErrorCode(t *testing.T, dir string, h *host, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	ios := IOStreams{In: strings.NewReader(""), Out: &out, Err: &errb, Getenv: func(string) string { return "" }, host: h}
	code := Main(append([]string{"--db", dir}, args...), ios)
	require.NotEqual(t, ExitOK, code, "%v: %s", args, out.String())
	var doc errorDocument
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc), "%v: stdout %q, stderr %q", args, out.String(), errb.String())
	assert.Equal(t, code, doc.Error.ExitCode, args)
	return doc.Error.Code
}

// serverErrorCode is the code of an operation's *server.Error.
func serverErrorCode(t *testing.T, err error) string {
	t.Helper()
	var se *server.Error
	require.True(t, errors.As(err, &se), "%v", err)
	return se.Code
}

// The CLI's --json errors carry the HTTP API's code for the same condition: each row makes the
// condition happen on both sides (where it can: a server always has its store, and holds it)
// and compares the codes with the one errcode defines.
func TestJSONErrorCodesAreTheServers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newSession(t)
	noStore := jsonErrorCode(t, s.dir, nil, "runs", "--json")
	require.Equal(t, ExitOK, s.run(false, "", "db", "init").code)

	// A conflict on the command line: a pending run whose data another run's apply moved.
	o := s.run(false, "", "exec", example("02_purchase_wayfarer.star"))
	require.Equal(t, ExitOK, o.code, o.err)
	var moved engine.Result
	require.NoError(t, json.Unmarshal([]byte(o.out), &moved))
	require.Equal(t, ExitOK, s.run(false, "", "exec", "--apply", example("02_purchase_wayfarer.star")).code)
	o = s.run(false, "", "apply", "--json", moved.RunID)
	require.Equal(t, ExitConflict, o.code, o.err)
	var conflict engine.Result
	require.NoError(t, json.Unmarshal([]byte(o.out), &conflict))

	damaged := filepath.Join(t.TempDir(), "damaged")
	require.NoError(t, os.MkdirAll(damaged, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(damaged, "data.db"), bytes.Repeat([]byte("not a store "), 2000), 0o644))

	held, err := bolt.Open(s.dir, bolt.Options{})
	require.NoError(t, err)
	inUse := jsonErrorCode(t, s.dir, nil, "runs", "--json")
	require.NoError(t, held.Close())

	// The server, over a store of its own.
	sdir := filepath.Join(t.TempDir(), "served")
	st, err := bolt.Open(sdir, bolt.Options{})
	require.NoError(t, err)
	eng, err := engine.New(st, engine.Options{})
	require.NoError(t, err)
	srv, err := server.New(eng, server.Options{Token: strings.Repeat("t", 32)})
	require.NoError(t, err)
	program, err := os.ReadFile(example("02_purchase_wayfarer.star"))
	require.NoError(t, err)
	first, err := srv.Run(ctx, server.RunRequest{Program: string(program)}, "test")
	require.NoError(t, err)
	second, err := srv.Run(ctx, server.RunRequest{Program: string(program)}, "test")
	require.NoError(t, err)
	_, err = srv.Apply(ctx, second.RunID, second.Digest, "test")
	require.NoError(t, err)
	serverConflict, err := srv.Apply(ctx, first.RunID, first.Digest, "test")
	require.NoError(t, err)
	_, unknown := srv.Show("r_0000000000")
	_, badState := srv.List("bogus", 0, "")
	_, noModel := srv.Ask(ctx, server.AskRequest{Request: "How many Aviator?"}, "test")
	req := httptest.NewRequest(http.MethodGet, "/v1/runs", nil)
	req.Host = "rebound.example"
	req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7410}))
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	require.Equal(t, http.StatusForbidden, rec.Code)
	var forbidden server.ErrorBody
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &forbidden))
	require.NoError(t, eng.Close())
	require.NoError(t, st.Close())
	_, closed := srv.Show(first.RunID) // the store is gone under the server: starplan itself fails

	for _, tc := range []struct {
		condition   string
		want        string
		cli, server string // "": the condition cannot happen on that side
	}{
		{"no store where the command looks", errcode.NoStore, noStore, ""},
		{"a run id the audit log does not hold", errcode.UnknownRun, jsonErrorCode(t, s.dir, nil, "runs", "show", "r_0000000000", "--json"), serverErrorCode(t, unknown)},
		{"a state that is none of the run states", errcode.BadRequest, jsonErrorCode(t, s.dir, nil, "runs", "--state", "bogus", "--json"), serverErrorCode(t, badState)},
		{"an apply whose data moved", errcode.Conflict, string(conflict.Outcome), serverConflict.State},
		{"an operation refused where it was asked", errcode.Forbidden, jsonErrorCode(t, s.dir, &host{}, "db", "check", "--json"), forbidden.Error.Code},
		{"no model configured", errcode.NoModel, jsonErrorCode(t, s.dir, nil, "ask", "--json", "How many Aviator?"), serverErrorCode(t, noModel)},
		{"starplan itself failed", errcode.Internal, jsonErrorCode(t, damaged, nil, "runs", "--json"), serverErrorCode(t, closed)},
		{"another process holds the store", errcode.StoreInUse, inUse, ""},
	} {
		assert.Equal(t, tc.want, tc.cli, "CLI: %s", tc.condition)
		if tc.server != "" {
			assert.Equal(t, tc.want, tc.server, "server: %s", tc.condition)
		}
	}
	assert.Equal(t, errcode.Conflict, exitNames[ExitConflict], "the code of exit 5 is the conflict's")
	assert.Equal(t, errcode.Conflict, engine.CodeConflict, "the conflict's diagnostic code, in the server's events")
	assert.Equal(t, errcode.Conflict, engine.StateConflict, "the conflicted run's state")
}
