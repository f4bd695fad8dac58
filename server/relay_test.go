package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/internal/pgtest"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/store/pg"
)

func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	stopChromium() // the review page's tests share one (browser_test.go)
	os.Exit(code)
}

// pgFixture is a server over a PostgreSQL store in the database dsn names (created when create).
func pgFixture(t *testing.T, dsn string, create bool) *fixture {
	t.Helper()
	ctx := context.Background()
	var st *pg.Store
	var err error
	if create {
		st, err = pg.Create(ctx, dsn, store.Inventory(), pg.Options{})
	} else {
		st, err = pg.Open(ctx, dsn, pg.Options{})
	}
	require.NoError(t, err)
	eng, err := engine.New(st, engine.Options{})
	require.NoError(t, err)
	srv, err := New(eng, Options{Token: testToken})
	require.NoError(t, err)
	require.NotNil(t, srv.relay, "a PostgreSQL store relays events")
	web := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Drain()
		web.Close()
		assert.NoError(t, eng.Close())
		assert.NoError(t, st.Close())
	})
	select {
	case <-srv.relay.ready:
	case <-testContext(t).Done():
		t.Fatal("the relay never listened")
	}
	return &fixture{t: t, eng: eng, srv: srv, web: web}
}

// Two servers on one database: a dry run on A streams on B's /v1/events, is applied on B (whose
// stream shows its own applied once: the relay's echo is dropped), and A's stream sees B's
// events; the same run applied on A and B at once applies once, and both answer applied; of
// two conflicting runs applied at once on A and B one wins and the other is a conflict.
func TestTwoServersOnOneDatabase(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	a := pgFixture(t, dsn, true)
	b := pgFixture(t, dsn, false)
	ctx := testContext(t)
	onA, onB := a.subscribe(ctx, nil), b.subscribe(ctx, nil)
	onA.untilSubscribed()
	onB.untilSubscribed()
	type step struct{ typ, run string }
	take := func(s *sse, n int) []step {
		t.Helper()
		var out []step
		for range n {
			ev, ok := s.next()
			require.True(t, ok, "the stream ended after %v", out)
			out = append(out, step{ev.Type, ev.RunID})
		}
		return out
	}

	run := a.run(purchase("Aviator", 1, "Bob"), "")
	require.Equal(t, StatePending, run.State)
	r := b.call("POST", "/v1/runs/"+run.RunID+"/apply", ApplyRequest{Digest: run.Digest})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var doc RunDocument
	r.decode(t, &doc)
	assert.Equal(t, StateApplied, doc.State)
	d := b.run(purchase("Aviator", 1, "Di"), "")
	assert.Equal(t, []step{{EventStarted, run.RunID}, {EventFinished, run.RunID}, {EventApplied, run.RunID},
		{EventStarted, d.RunID}, {EventFinished, d.RunID}}, take(onA, 5), "A sees its own events and B's")
	// A's next run is sent after B's events reached A; the database hands it to B after them,
	// so B's stream would show the echo of its own events before it, were it not dropped.
	// Each server's events keep their order, but A's reach B over NOTIFY while B tells its own at
	// once, so B may see its applied before A's finished of the same run (seen under load): each
	// once, and each run's steps in order.
	e := a.run(purchase("Aviator", 1, "Ed"), "")
	onBSteps := take(onB, 7)
	assert.ElementsMatch(t, []step{{EventStarted, run.RunID}, {EventFinished, run.RunID}, {EventApplied, run.RunID},
		{EventStarted, d.RunID}, {EventFinished, d.RunID}, {EventStarted, e.RunID}, {EventFinished, e.RunID}}, onBSteps,
		"B sees A's events, and its own once")
	at := func(want step) int { return slices.Index(onBSteps, want) }
	for _, id := range []string{run.RunID, d.RunID, e.RunID} {
		assert.Less(t, at(step{EventStarted, id}), at(step{EventFinished, id}), "%s's steps in order on B: %v", id, onBSteps)
	}

	// The same run applied on both at once: applied once, both answer applied.
	for range 5 {
		f := a.run(purchase("Aviator", 1, "Flo"), "")
		answers := make(chan response, 2)
		for _, srv := range []*fixture{a, b} {
			go func() {
				r, err := srv.try(testToken, "POST", "/v1/runs/"+f.RunID+"/apply", ApplyRequest{Digest: f.Digest})
				assert.NoError(t, err)
				answers <- r
			}()
		}
		for range 2 {
			r := <-answers
			require.Equal(t, http.StatusOK, r.status, "%s", r.body)
			var doc RunDocument
			r.decode(t, &doc)
			assert.Equal(t, StateApplied, doc.State, "%s", r.body)
		}
		for _, srv := range []*fixture{a, b} {
			rec, err := srv.eng.Record(f.RunID)
			require.NoError(t, err)
			assert.True(t, rec.Applied, "the record says applied (%s %s)", rec.Outcome, rec.ApplyError)
		}
	}
	// Two runs that each sell an item's whole stock, applied at once on A and B: one wins, the
	// other is a conflict, on either server.
	for _, item := range []struct {
		name string
		qty  int
	}{{"Mystique", 3}, {"Classic", 10}, {"Moon", 10}} {
		sells := []*RunDocument{a.run(purchase(item.name, item.qty, "Gil"), ""), b.run(purchase(item.name, item.qty, "Hal"), "")}
		statuses := make(chan int, 2)
		for i, srv := range []*fixture{a, b} {
			go func() {
				r, err := srv.try(testToken, "POST", "/v1/runs/"+sells[i].RunID+"/apply", ApplyRequest{Digest: sells[i].Digest})
				assert.NoError(t, err)
				statuses <- r.status
			}()
		}
		got := []int{<-statuses, <-statuses}
		assert.ElementsMatch(t, []int{http.StatusOK, http.StatusConflict}, got, item.name)
	}

	tb, _ := a.eng.Store().StageFor(ctx, store.RunLimits{}).Table("inventory")
	row, ok, err := tb.Get("SG001")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, int64(23-1-5), row["quantity_in_stock"], "the first run and the five applied once each")
}
