package server

import (
	"context"
	"fmt"
	"net/http"

	"github.com/starplan/starplan/engine"
)

// A token pinned to a subject (access.Principal.Subject) reads only that subject's runs: show,
// replay and the list keep to them, and the event stream of every run is closed to it. Another
// subject's run is answered as a run that does not exist, so the caller learns nothing of it.

// pinnedTo is the subject the caller of ctx is pinned to, "" when it is not.
func pinnedTo(ctx context.Context) string { return principal(ctx).Subject }

// hiddenRun is nil when the caller of ctx may read a run that acts for subject, else the
// unknown-run error it would get for a run that does not exist.
func hiddenRun(ctx context.Context, id, subject string) *Error {
	if pin := pinnedTo(ctx); pin == "" || pin == subject {
		return nil
	}
	return unknownRun(&engine.RunError{ID: id, Problem: "no such run"})
}

// showFor is Show for the caller of ctx.
func (s *Server) showFor(ctx context.Context, id string) (*RunDocument, error) {
	doc, err := s.Show(id)
	if err != nil {
		return nil, err
	}
	if e := hiddenRun(ctx, id, doc.Subject); e != nil {
		return nil, e
	}
	return doc, nil
}

// replayFor is Replay for the caller of ctx.
func (s *Server) replayFor(ctx context.Context, id string) (*engine.ReplayReport, error) {
	if pinnedTo(ctx) != "" {
		if _, err := s.showFor(ctx, id); err != nil {
			return nil, err
		}
	}
	return s.Replay(ctx, id)
}

// Bounds of a pinned caller's listing, which filters the log's pages: it reads at most
// pinnedScanRuns records (or pinnedScanPages pages) for one answer, and a page may then hold
// fewer runs than asked and still give a next_cursor.
var (
	pinnedScanRuns  = 5000
	pinnedScanPages = 64
)

// listFor is List for the caller of ctx. A pinned caller gets its subject's runs only, and the
// log's counts (count, bytes, states) are left zero: they are every subject's.
func (s *Server) listFor(ctx context.Context, state string, limit int, cursor string) (*RunList, error) {
	pin := pinnedTo(ctx)
	if pin == "" {
		return s.List(state, limit, cursor)
	}
	if limit == 0 {
		limit = DefaultListLimit
	}
	out := &RunList{Runs: []RunSummary{}, Subject: pin, States: map[string]int{}}
	scanned := 0
	for pages := 0; pages < pinnedScanPages && scanned < pinnedScanRuns; pages++ {
		// Each page asks for no more runs than are still wanted, so every match of the page is
		// taken and its next_cursor is where this listing goes on.
		page, err := s.List(state, limit-len(out.Runs), cursor)
		if err != nil {
			return nil, err
		}
		scanned += len(page.Runs)
		for _, r := range page.Runs {
			if r.Subject == pin {
				out.Runs = append(out.Runs, r)
			}
		}
		cursor = page.NextCursor
		if cursor == "" || len(out.Runs) == limit {
			break
		}
	}
	out.NextCursor = cursor
	return out, nil
}

// eventsClosed refuses the event stream to a pinned caller: it carries every subject's runs.
func eventsClosed(ctx context.Context) *Error {
	pin := pinnedTo(ctx)
	if pin == "" {
		return nil
	}
	return errorf(http.StatusForbidden, engine.CodeSubjectMismatch,
		"GET /v1/runs/{id} shows a run of its own, and GET /v1/runs lists them",
		"%s", fmt.Sprintf("%s is pinned to subject %q and cannot follow the events of every subject's runs", principal(ctx).Name, pin))
}
