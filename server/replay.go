package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/starplan/starplan/engine"
)

// Replay runs a recorded run again (engine.Replay) and reports whether it gives the recorded
// result. Nothing is recorded or written. The error is an *Error for an unknown run or one whose
// record cannot be run again.
func (s *Server) Replay(ctx context.Context, id string) (*engine.ReplayReport, error) {
	if _, err := s.eng.Record(id); err != nil {
		if e := unknownRun(err); e != nil {
			return nil, e
		}
		return nil, internal(err)
	}
	rep, err := s.eng.Replay(ctx, id)
	var re *engine.RunError
	if errors.As(err, &re) {
		return nil, &Error{Status: http.StatusUnprocessableEntity, Code: CodeNotReplayable, Message: err.Error(), Hint: "GET /v1/runs/" + id + " shows what the record keeps",
			toolHint: "show_run with run_id " + id + " shows what the record keeps"}
	}
	if err != nil {
		return nil, internal(err)
	}
	return rep, nil
}

func (s *Server) handleReplay(w http.ResponseWriter, r *http.Request) {
	rep, err := s.replayFor(r.Context(), r.PathValue("id"))
	respond(w, http.StatusOK, rep, err)
}
