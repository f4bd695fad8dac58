package tokens

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/access"
	"github.com/starplan/starplan/store/bolt"
)

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// counting counts the store's writes, to show that uses are batched.
type counting struct {
	*bolt.Store
	mu   sync.Mutex
	puts map[string]int
}

func (c *counting) PutSys(ctx context.Context, coll, id string, v any) error {
	c.mu.Lock()
	c.puts[coll]++
	c.mu.Unlock()
	return c.Store.PutSys(ctx, coll, id, v)
}

func newKeeper(t *testing.T) (*Keeper, *clock, *counting) {
	t.Helper()
	st, err := bolt.Open(t.TempDir(), bolt.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	c := &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	cs := &counting{Store: st, puts: map[string]int{}}
	return New(cs, c.now), c, cs
}

func TestCreateVerifyListRevoke(t *testing.T) {
	ctx := context.Background()
	k, c, st := newKeeper(t)
	secret, info, err := k.Create(ctx, "agent-1", access.Proposer, 0)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(secret, Prefix))
	assert.Equal(t, "agent-1", info.Name)
	assert.Nil(t, info.Expires)

	p, id, err := k.Verify(ctx, secret)
	require.NoError(t, err)
	assert.Equal(t, access.Principal{Name: "agent-1", Role: access.Proposer}, p)

	// Only the hash is stored: the secret's random part appears in no system document.
	recs, err := st.ListSys(Collection)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.NotContains(t, string(recs[0].JSON), secret[len(Prefix)+2*idBytes+1:])
	assert.Contains(t, string(recs[0].JSON), hashOf(secret))

	list, err := k.List()
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.NotNil(t, list[0].LastUsed, "the verification was recorded as a use")
	assert.Equal(t, c.now(), *list[0].LastUsed)

	_, err = k.Revoke(ctx, "agent-1")
	require.NoError(t, err)
	_, _, err = k.Verify(ctx, secret)
	e, ok := AsError(err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, CodeRevoked, e.Code)
	_, err = k.Live(ctx, id)
	e, _ = AsError(err)
	assert.Equal(t, CodeRevoked, e.Code, "a session made with the token ends too")

	// The name stays taken: the audit log's names keep meaning one credential.
	_, _, err = k.Create(ctx, "agent-1", access.Approver, 0)
	e, _ = AsError(err)
	require.NotNil(t, e)
	assert.Equal(t, CodeTaken, e.Code)
	_, err = k.Revoke(ctx, "nobody")
	e, _ = AsError(err)
	assert.Equal(t, CodeNotFound, e.Code)
}

func TestVerifyRefusesWrongSecrets(t *testing.T) {
	ctx := context.Background()
	k, _, _ := newKeeper(t)
	secret, _, err := k.Create(ctx, "a", access.Admin, 0)
	require.NoError(t, err)
	last := secret[len(secret)-1]
	flipped := secret[:len(secret)-1] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", last)+1)%16])
	for _, s := range []string{"", "spt_", secret + "0", flipped, "spt_0000000000000000_" + strings.Repeat("0", 64), "legacy-token-123456"} {
		_, _, err := k.Verify(ctx, s)
		e, ok := AsError(err)
		require.True(t, ok, "%q: %v", s, err)
		assert.Equal(t, CodeUnknown, e.Code, "%q", s)
	}
}

func TestExpiry(t *testing.T) {
	ctx := context.Background()
	k, c, _ := newKeeper(t)
	secret, info, err := k.Create(ctx, "short", access.Approver, time.Hour)
	require.NoError(t, err)
	require.NotNil(t, info.Expires)
	assert.Equal(t, c.now().Add(time.Hour), *info.Expires)
	_, id, err := k.Verify(ctx, secret)
	require.NoError(t, err)
	c.add(time.Hour)
	_, _, err = k.Verify(ctx, secret)
	e, _ := AsError(err)
	require.NotNil(t, e)
	assert.Equal(t, CodeExpired, e.Code)
	_, err = k.Live(ctx, id)
	e, _ = AsError(err)
	assert.Equal(t, CodeExpired, e.Code)
}

func TestNames(t *testing.T) {
	ctx := context.Background()
	k, _, _ := newKeeper(t)
	for _, name := range []string{"", "admin", "-x", "a b", "local:me", strings.Repeat("x", 65), "a\x1b"} {
		_, _, err := k.Create(ctx, name, access.Proposer, 0)
		e, ok := AsError(err)
		require.True(t, ok, "%q", name)
		assert.Equal(t, CodeBadName, e.Code, "%q", name)
	}
	_, _, err := k.Create(ctx, "x", access.Role("root"), 0)
	assert.Error(t, err)
}

// A busy token costs one store write per UseGranularity, not one per request.
func TestUsesAreBatched(t *testing.T) {
	ctx := context.Background()
	k, c, st := newKeeper(t)
	secret, _, err := k.Create(ctx, "busy", access.Proposer, 0)
	require.NoError(t, err)
	for range 100 {
		_, _, err := k.Verify(ctx, secret)
		require.NoError(t, err)
		c.add(time.Second / 10) // 10 s in all
	}
	assert.Equal(t, 1, st.puts[UseCollection])
	c.add(UseGranularity)
	_, _, err = k.Verify(ctx, secret)
	require.NoError(t, err)
	assert.Equal(t, 2, st.puts[UseCollection])
	list, err := k.List()
	require.NoError(t, err)
	assert.Equal(t, c.now(), *list[0].LastUsed)
}

// A proposer's token may be pinned to a subject, which its principal carries and list shows;
// another role's, or a subject that cannot be an id, is refused.
func TestPinnedSubject(t *testing.T) {
	k, _, _ := newKeeper(t)
	ctx := context.Background()
	secret, info, err := k.CreateFor(ctx, "agent-m1", access.Proposer, 0, "M1")
	require.NoError(t, err)
	assert.Equal(t, "M1", info.Subject)
	p, _, err := k.Verify(ctx, secret)
	require.NoError(t, err)
	assert.Equal(t, access.Principal{Name: "agent-m1", Role: access.Proposer, Subject: "M1"}, p)
	list, err := k.List()
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "M1", list[0].Subject)

	_, _, err = k.CreateFor(ctx, "boss", access.Approver, 0, "M1")
	require.ErrorContains(t, err, "only a proposer's token can be pinned to a subject")
	_, _, err = k.CreateFor(ctx, "bad", access.Proposer, 0, "M\x01")
	require.ErrorContains(t, err, "control character")
}
