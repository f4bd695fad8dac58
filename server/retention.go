package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/starplan/starplan/engine"
)

// RetentionInterval is how often a server with a retention (Options.Retention) prunes the audit
// log, after the prune at its start.
const RetentionInterval = time.Hour

// retention is what the server knows of its pruning of the audit log.
type retention struct {
	mu   sync.Mutex
	last *engine.PruneReport // the last prune's report (nil: none yet)
	err  error               // the last prune's error
}

// Retain prunes the audit log's settled runs (every state but pending) older than
// Options.Retention, at once, and returns the report; with no retention it prunes nothing and
// returns nil. A server with a retention also does it every RetentionInterval (Start).
func (s *Server) Retain(ctx context.Context) (*engine.PruneReport, error) {
	if s.opts.Retention <= 0 {
		return nil, nil
	}
	rep, err := s.eng.Prune(ctx, engine.PruneOptions{OlderThan: s.opts.Retention})
	s.retention.mu.Lock()
	s.retention.last, s.retention.err = rep, err
	s.retention.mu.Unlock()
	return rep, err
}

// startRetention prunes every RetentionInterval until Drain, when the server has a retention.
func (s *Server) startRetention() {
	if s.opts.Retention <= 0 {
		return
	}
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if s.bgClosed {
		return
	}
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		t := time.NewTicker(RetentionInterval)
		defer t.Stop()
		for {
			select {
			case <-s.bg.Done():
				return
			case <-t.C:
				s.Retain(s.bg) // kept for Describe; the next tick tries again
			}
		}
	}()
}

// FormatRetention says how long the audit log keeps settled runs: "forever", or an age in
// days (30d) or as a Go duration (12h0m0s).
func FormatRetention(d time.Duration) string {
	switch {
	case d <= 0:
		return "forever"
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

// AuditLogDescription is the audit log's size and how long it keeps runs.
type AuditLogDescription struct {
	Runs   int            `json:"runs" jsonschema:"how many runs the audit log holds"`
	Bytes  int64          `json:"bytes" jsonschema:"the stored size of its records, in bytes"`
	States map[string]int `json:"states" jsonschema:"how many runs it holds in each state"`
	// Retention is how long settled runs are kept: "forever", or an age (30d) after which the
	// server prunes them (starplan serve --retention).
	Retention string `json:"retention" jsonschema:"how long settled runs (all but pending) are kept: forever, or an age such as 30d after which serve prunes them (serve --retention)"`
	// LastPrune is the server's last prune by its retention, if any.
	LastPrune *engine.PruneReport `json:"last_prune,omitempty"`
	// LastPruneError is why the last prune failed, if it did.
	LastPruneError string `json:"last_prune_error,omitempty"`
}

// auditLogOf describes eng's audit log.
func auditLogOf(eng *engine.Engine) (AuditLogDescription, error) {
	st, err := eng.RunStats()
	if err != nil {
		return AuditLogDescription{}, err
	}
	return AuditLogDescription{Runs: st.Count, Bytes: st.Bytes, States: st.States, Retention: FormatRetention(eng.Retention())}, nil
}
