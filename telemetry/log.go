package telemetry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/starplan/starplan/engine"
)

// Log formats and levels, as serve's --log-format and --log-level take them.
var (
	LogFormats = []string{"text", "json"}
	LogLevels  = []string{"debug", "info", "warn", "error"}
)

// NewLogger returns a structured logger writing to w in format ("text": key=value lines; "json":
// one object per line) from level on (debug, info, warn, error). Unknown values are an error
// naming the known ones.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	switch strings.ToLower(level) {
	case "debug":
		lv = slog.LevelDebug
	case "info", "":
		lv = slog.LevelInfo
	case "warn", "warning":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	default:
		return nil, fmt.Errorf("log level %q is not one of %s", level, strings.Join(LogLevels, ", "))
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q is not one of %s", format, strings.Join(LogFormats, ", "))
}

// Request is one HTTP request as the server answered it.
type Request struct {
	// Route is the operation's name (server.Operations: run, apply, ...), "mcp", "page" (the
	// review page, its login and data) or "other": never the raw path, which holds run ids.
	Route    string
	Method   string
	Status   int
	Duration time.Duration
	// Code is the error's code when the answer is an error (unauthorized, forbidden-role, ...).
	Code string
}

// Refusal is an apply the server refused by role or rule: nothing was written.
type Refusal struct {
	RunID string
	Code  string // forbidden-role, approval-required or run-expired
	By    string // the principal's name
}

// Hooks are what a server tells its telemetry besides the engine's events (server.Options).
// Nil fields tell no one.
type Hooks struct {
	Request func(context.Context, Request)
	Refused func(context.Context, Refusal)
}

// ServerHooks returns hooks that count into m and log to l; either may be nil.
func ServerHooks(m *Metrics, l *Logs) Hooks {
	if m == nil && l == nil {
		return Hooks{}
	}
	return Hooks{
		Request: func(ctx context.Context, r Request) {
			if m != nil {
				m.Request(r)
			}
			if l != nil {
				l.Request(ctx, r)
			}
		},
		Refused: func(ctx context.Context, r Refusal) {
			if m != nil {
				m.Refused(r)
			}
			if l != nil {
				l.Refused(ctx, r)
			}
		},
	}
}

// Logs writes serve's log lines: requests, the runs' verdicts, decisions, conflicts, limits and
// refusals. A line carries ids, names, codes, counts and durations, never a token, a plan's
// program, a request's text, a row's value or a diagnostic's message (which may quote data):
// what a plan touched is in the audit log, behind the token.
type Logs struct{ l *slog.Logger }

// NewLogs returns the log lines' writer over l.
func NewLogs(l *slog.Logger) *Logs { return &Logs{l: l} }

// Observe logs a step of a run: it is an engine.Observer. slog's handlers write under their own
// lock; a slow log destination holds the run up (serve logs to its standard error).
func (g *Logs) Observe(ctx context.Context, ev engine.Event) {
	ms := func(d time.Duration) slog.Attr { return slog.Float64("duration_ms", float64(d.Microseconds())/1000) }
	switch {
	case ev.Type == engine.EventStarted:
		g.l.LogAttrs(ctx, slog.LevelDebug, "run started", slog.String("run_id", ev.RunID), slog.String("origin", ev.Origin),
			slog.String("by", ev.By), slog.String("parent_run_id", ev.ParentRunID))
	case ev.Verdict():
		attrs := []slog.Attr{slog.String("run_id", ev.RunID), slog.String("origin", ev.Origin), slog.String("outcome", string(ev.Outcome)),
			slog.String("state", ev.State), ms(ev.Duration), slog.Uint64("steps", ev.Steps), slog.Int("rows", ev.RowsWritten)}
		if ev.Limit != "" {
			attrs = append(attrs, slog.String("limit", string(ev.Limit)))
		}
		if len(ev.Codes) > 0 {
			attrs = append(attrs, slog.Any("codes", ev.Codes))
		}
		if ev.ParentRunID != "" {
			attrs = append(attrs, slog.String("parent_run_id", ev.ParentRunID))
		}
		g.l.LogAttrs(ctx, slog.LevelInfo, "run", attrs...)
	case ev.Type == engine.EventFailed: // starplan itself failed
		g.l.LogAttrs(ctx, slog.LevelError, "run failed", slog.String("run_id", ev.RunID), slog.String("origin", ev.Origin),
			slog.String("state", ev.State), slog.String("error", errText(ev.Err)))
	case ev.Type == engine.EventRan && ev.Limit != "":
		g.l.LogAttrs(ctx, slog.LevelWarn, "limit", slog.String("run_id", ev.RunID), slog.String("origin", ev.Origin),
			slog.String("limit", string(ev.Limit)), slog.Uint64("steps", ev.Steps), ms(ev.Duration))
	case ev.Type == engine.EventChecked || ev.Type == engine.EventRan || ev.Type == engine.EventContract:
		attrs := []slog.Attr{slog.String("run_id", ev.RunID), slog.String("phase", string(ev.Type)), slog.String("outcome", string(ev.Outcome)), ms(ev.Duration)}
		if len(ev.Codes) > 0 {
			attrs = append(attrs, slog.Any("codes", ev.Codes))
		}
		g.l.LogAttrs(ctx, slog.LevelDebug, "phase", attrs...)
	case ev.Type == engine.EventApplied:
		attrs := []slog.Attr{slog.String("run_id", ev.RunID), slog.String("result", ApplyApplied), slog.String("by", ev.By),
			slog.String("origin", ev.Origin), slog.Int("rows", ev.RowsWritten), ms(ev.Duration)}
		if ev.Rule != "" {
			attrs = append(attrs, slog.String("rule", ev.Rule))
		}
		g.l.LogAttrs(ctx, slog.LevelInfo, "decision", attrs...)
	case ev.Type == engine.EventRejected:
		g.l.LogAttrs(ctx, slog.LevelInfo, "decision", slog.String("run_id", ev.RunID), slog.String("result", "rejected"), slog.String("by", ev.By),
			slog.String("origin", ev.Origin), slog.Int("feedback_bytes", len(ev.Feedback)))
	case ev.Type == engine.EventConflict:
		g.l.LogAttrs(ctx, slog.LevelWarn, "conflict", slog.String("run_id", ev.RunID), slog.String("origin", ev.Origin),
			slog.Int("rows", ev.RowsWritten), slog.Any("codes", ev.Codes), ms(ev.Duration))
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Request logs an HTTP request: info, a refused credential or right at warn ("auth failed",
// "refused"), a server error at error.
func (g *Logs) Request(ctx context.Context, r Request) {
	level, msg := slog.LevelInfo, "request"
	switch {
	case r.Status == http.StatusUnauthorized:
		level, msg = slog.LevelWarn, "auth failed"
	case r.Status == http.StatusForbidden:
		level, msg = slog.LevelWarn, "refused"
	case r.Status >= 500:
		level = slog.LevelError
	}
	if !g.l.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{slog.String("route", r.Route), slog.String("method", r.Method), slog.Int("status", r.Status),
		slog.Float64("duration_ms", float64(r.Duration.Microseconds())/1000)}
	if r.Code != "" {
		attrs = append(attrs, slog.String("code", r.Code))
	}
	g.l.LogAttrs(ctx, level, msg, attrs...)
}

// Refused logs an apply the server refused by role or rule.
func (g *Logs) Refused(ctx context.Context, r Refusal) {
	g.l.LogAttrs(ctx, slog.LevelWarn, "decision", slog.String("run_id", r.RunID), slog.String("result", "refused"),
		slog.String("code", r.Code), slog.String("by", r.By))
}
