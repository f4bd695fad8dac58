package pg

// rvbuf: the audit writer's reused record buffers (audit6e) on PostgreSQL: two engines (two
// servers) append to one database's audit log and chain, so a batch's write is tried again when
// the other took its entries' numbers (store.ErrSysExists), with the same queued bytes; readers
// show and list runs while batches commit, and decisions take the queue. Afterwards every
// record is the run's, runs verify and db check (with the chain verifier) find nothing, and each
// record the readers were shown is the stored one.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/internal/pgtest"
	"github.com/starplan/starplan/store"
)

func TestRvbufTwoEnginesStreamOnePostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	sa, err := Create(bg, dsn, store.Inventory(), Options{})
	require.NoError(t, err)
	defer sa.Close()
	sb, err := Open(bg, dsn, Options{})
	require.NoError(t, err)
	defer sb.Close()
	a, err := engine.New(sa, engine.Options{})
	require.NoError(t, err)
	b, err := engine.New(sb, engine.Options{})
	require.NoError(t, err)

	plans := []string{sellTwoAviators}
	for _, name := range []string{"02_purchase_wayfarer.star", "03_two_item_order.star", "01_round_under_100.star"} {
		p, err := os.ReadFile("../../testdata/examples/" + name)
		require.NoError(t, err)
		plans = append(plans, string(p))
	}
	var mu sync.Mutex
	request := map[string]string{}
	decided := map[string]bool{}
	shown := map[string][]string{} // run id -> the records Show showed, as JSON
	var errs []error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if len(errs) < 10 {
			errs = append(errs, err)
		}
	}
	want := func(id string) string {
		mu.Lock()
		defer mu.Unlock()
		return request[id]
	}
	made := make(chan *engine.Result, 400)
	var done atomic.Bool
	var writers, others sync.WaitGroup
	for w, e := range []*engine.Engine{a, b, a, b} {
		writers.Go(func() {
			for i := range 40 {
				req := fmt.Sprintf("engine %d run %d", w, i)
				res, err := e.Run(bg, engine.Request{Reply: plans[(w+i)%len(plans)], UserRequest: req})
				if err != nil {
					fail(err)
					return
				}
				mu.Lock()
				request[res.RunID] = req
				mu.Unlock()
				made <- res
			}
		})
	}
	for r, e := range []*engine.Engine{a, b} {
		others.Go(func() { // a reader of its own engine's runs and the other's
			for !done.Load() {
				page, err := e.ListRuns(engine.ListOptions{Limit: 8})
				if err != nil {
					fail(fmt.Errorf("listing on engine %d: %w", r, err))
					return
				}
				for _, s := range page.Runs {
					if w := want(s.ID); w != "" && s.Request != w {
						fail(fmt.Errorf("engine %d lists run %s asking %q, not %q", r, s.ID, s.Request, w))
					}
					doc, err := e.Show(s.ID)
					if err != nil {
						fail(fmt.Errorf("showing run %s on engine %d: %w", s.ID, r, err))
						return
					}
					if doc.RunID != s.ID || (want(s.ID) != "" && doc.Request != want(s.ID)) {
						fail(fmt.Errorf("engine %d shows run %s asking %q as run %s asking %q", r, s.ID, want(s.ID), doc.RunID, doc.Request))
					}
					raw, err := json.Marshal(doc.Result)
					if err == nil {
						mu.Lock()
						shown[s.ID] = append(shown[s.ID], string(raw))
						mu.Unlock()
					}
				}
			}
		})
	}
	others.Go(func() { // decisions on the other engine than the run's, taking its queue
		n := 0
		for res := range made {
			if !res.Pending {
				continue
			}
			if n++; n%4 != 0 {
				continue
			}
			mu.Lock()
			decided[res.RunID] = true
			mu.Unlock()
			var err error
			if n%8 == 0 {
				_, _, err = b.Reject(bg, res.RunID, "no", "test")
			} else {
				_, err = a.ApplyWith(bg, res.RunID, engine.ApplyOptions{Origin: "test"})
			}
			var re *engine.RunError
			if err != nil && !errors.As(err, &re) {
				fail(fmt.Errorf("deciding run %s: %w", res.RunID, err))
			}
		}
	})
	writers.Wait()
	close(made)
	done.Store(true)
	others.Wait()
	require.Empty(t, errs)
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())

	c, err := engine.New(sa, engine.Options{})
	require.NoError(t, err)
	defer c.Close()
	require.Len(t, request, 160)
	for id, req := range request {
		var raw json.RawMessage
		ok, err := sa.GetSys(engine.AuditCollection, id, &raw)
		require.NoError(t, err)
		require.True(t, ok, "run %s was not stored", id)
		require.NoError(t, engine.CheckRecord(raw))
		var head struct {
			ID      string `json:"run_id"`
			Request string `json:"request"`
		}
		require.NoError(t, json.Unmarshal(raw, &head))
		require.Equal(t, id, head.ID)
		require.Equal(t, req, head.Request)
		if decided[id] {
			continue
		}
		doc, err := c.Show(id)
		require.NoError(t, err)
		now, err := json.Marshal(doc.Result)
		require.NoError(t, err)
		for _, s := range shown[id] {
			require.Equal(t, string(now), s, "run %s was shown as another record than the one stored", id)
		}
	}
	rep, err := c.VerifyChain()
	require.NoError(t, err)
	require.Empty(t, rep.Problems)
	chain := engine.NewChainVerifier()
	crep, err := sa.Check(bg, chain.CheckOptions())
	require.NoError(t, err)
	require.True(t, crep.OK(), "%v", crep.Problems)
	require.Empty(t, chain.Report().Problems)
	require.GreaterOrEqual(t, chain.Report().Records, 160)
}
