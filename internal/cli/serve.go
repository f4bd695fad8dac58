package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/server"
	"github.com/starplan/starplan/telemetry"
)

// DefaultListen is where `starplan serve` listens unless told otherwise: loopback only.
const DefaultListen = "127.0.0.1:7410"

// serveOptions are the options of `starplan serve`.
type serveOptions struct {
	modelOptions
	Listen       string
	ListenSet    bool // --listen was given (with --mcp-stdio, HTTP is served only then)
	MCPStdio     bool
	Token        string
	DrainTimeout time.Duration
	Retention    string // --retention: an age (30d, 12h) after which settled runs are pruned; 0 keeps them
	// MetricsListen is where GET /metrics answers in the Prometheus text format, without the
	// token; "" serves no metrics.
	MetricsListen string
	LogFormat     string // --log-format: text or json
	LogLevel      string // --log-level: debug, info, warn or error
}

func newServeCmd(ios IOStreams, g *globalOptions) *cobra.Command {
	opts := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the store to other planners over HTTP and MCP",
		Long: `Open the store once and serve it to many clients: a JSON API under /v1 (describe, check, dry
runs, apply with the digest of the reviewed changes, reject with feedback, runs, and run events as
Server-Sent Events at /v1/events) and MCP over streamable HTTP at /mcp, on --listen (loopback by
default). Every HTTP request needs "Authorization: Bearer TOKEN": a named token with a role
(starplan token create NAME --role proposer|approver|admin; a proposer cannot apply), or the
admin token, created at the first start in serve.token in the store directory (mode 0600),
unless STARPLAN_TOKEN or --token gives one (--token shows it to every local user in the
process's command line: prefer the other two). MCP on stdio acts as the local user, an admin.

A review page for people is at / on the same address: sign in with an approver's or an admin's
token, or open the one-time link printed at the start; the page keeps a session (a cookie and a key that only its
tab holds), never the token.

Connections are bounded: strangers' (those that have sent no token yet) at most 128 at once and
32 per client address, the oldest closed to make room, each closed after one answer, out of 512
in all, so the token holder always has room. What was refused is logged, a line per 10 s.

While it runs, the CLI commands that use this store (exec, ask, apply, runs, token, db seed, dump,
export and import) run inside it, through the socket serve.sock in the store directory, which only
this user can open: they print what they would print alone. db init and db check need the store
to themselves, and name the server (from serve.json, its pid and address, kept in the store
directory while it runs).

Structured logs go to standard error (--log-format text|json, --log-level): each request (its
route by the operation's name, status and time), each run's verdict, decisions, conflicts, limits
and refused credentials, with ids, names, codes, counts and durations, never a token or a plan's
data. --metrics-listen HOST:PORT serves Prometheus metrics at /metrics on an address of its own,
without the token (they hold counts, no data); off unless given.

--mcp-stdio serves MCP on standard input and output instead (for an MCP client that starts
starplan itself); HTTP is then served too only if --listen is given.

SIGTERM or Ctrl-C stops accepting requests, lets those in flight finish (at most
--drain-timeout), writes the audit log and exits 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ListenSet = cmd.Flags().Changed("listen")
			return runServe(cmd.Context(), ios, g, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Listen, "listen", DefaultListen, "address for HTTP (the /v1 API and MCP at /mcp); port 0 picks a free one")
	cmd.Flags().BoolVar(&opts.MCPStdio, "mcp-stdio", false, "serve MCP on standard input and output")
	cmd.Flags().StringVar(&opts.Token, "token", "", "the bearer token HTTP clients must send (default $STARPLAN_TOKEN, else serve.token in the store directory); "+
		"every local user can read it in the process's command line: prefer STARPLAN_TOKEN or serve.token")
	cmd.Flags().DurationVar(&opts.DrainTimeout, "drain-timeout", 30*time.Second, "how long a shutdown waits for requests in flight")
	cmd.Flags().StringVar(&opts.MetricsListen, "metrics-listen", "", "address for Prometheus metrics at /metrics, without the token (127.0.0.1:9464); off when empty")
	cmd.Flags().StringVar(&opts.LogFormat, "log-format", "text", "log lines on standard error: text (key=value) or json (one object a line)")
	cmd.Flags().StringVar(&opts.LogLevel, "log-level", "info", "least level logged: debug (every phase of every run), info (requests, verdicts, decisions), warn (conflicts, limits, refusals), error")
	cmd.Flags().StringVar(&opts.Retention, "retention", "0", "prune settled runs (all but pending) older than this from the audit log, at the start and hourly: 30d, 12h; 0 keeps every run")
	opts.modelOptions.register(cmd)
	return cmd
}

// parseRetention reads --retention: 0 (keep every run) or an age (parseAge's forms).
func parseRetention(s string) (time.Duration, error) {
	if s == "0" || s == "0d" {
		return 0, nil
	}
	d, err := parseAge(s)
	if err != nil {
		return 0, fmt.Errorf("--retention %q: neither 0 (keep every run) nor an age such as 30d or 12h", s)
	}
	return d, nil
}

func runServe(ctx context.Context, ios IOStreams, g *globalOptions, opts *serveOptions) error {
	retention, err := parseRetention(opts.Retention)
	if err != nil {
		return withCode(ExitUsage, err, "give --retention 0 to keep every run, or an age such as 90d")
	}
	logger, err := telemetry.NewLogger(ios.Err, opts.LogFormat, opts.LogLevel)
	if err != nil {
		return withCode(ExitUsage, err, "give --log-format text or json, and --log-level debug, info, warn or error")
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	return withEngine(ios, g, func(e *engine.Engine) error {
		// Every run of this engine, whatever asked for it (HTTP, MCP, CLI commands relayed
		// here), is logged and, with --metrics-listen, counted.
		logs := telemetry.NewLogs(logger)
		defer e.Observe(logs.Observe)()
		var metrics *telemetry.Metrics
		if opts.MetricsListen != "" {
			mo := telemetry.MetricsOptions{Domain: e.Policy().Name, Audit: e.RunStats}
			if g.pool != nil {
				mo.Pool = g.pool.Stats
			}
			metrics = telemetry.NewMetrics(mo)
			defer e.Observe(metrics.Observe)()
		}
		given := opts.Token
		if given != "" {
			fmt.Fprintln(ios.Err, "warning: --token puts the token in this process's command line, which every local user can read (ps, /proc/PID/cmdline); "+
				"set STARPLAN_TOKEN or let serve keep it in serve.token in the store directory instead")
		}
		if given == "" {
			given = ios.Getenv("STARPLAN_TOKEN")
		}
		httpOn := !opts.MCPStdio || opts.ListenSet
		dir, local := storeDirOf(e)
		token, path, created, err := "", "", false, error(nil)
		if httpOn && !local && given == "" {
			return withCode(ExitUsage, errors.New("a store in a database has no directory to keep serve.token in, and no token was given"),
				"set STARPLAN_TOKEN (16 characters or more), the same on every server of the database, or create named tokens with starplan token create")
		}
		if httpOn {
			token, path, created, err = server.LoadToken(dir, given)
			if err != nil {
				return withCode(ExitUsage, err, "pass --token (16 characters or more) or set STARPLAN_TOKEN")
			}
		}
		// A model, when one is configured, answers POST /v1/ask and replans rejected ask runs.
		var model engine.Model
		if client, err := opts.client(ios); err == nil {
			model = client
			if metrics != nil {
				model = metrics.Model(client)
			}
			if telemetry.TracesConfigured(ios.Getenv) { // a failed call leaves no run: its span of its own
				model = telemetry.TraceModel(nil, client.Model(), model)
			}
			fmt.Fprintf(ios.Err, "starplan serve: model %s for /v1/ask and for replanning after a rejection\n", safe(client.Model()))
		} else {
			fmt.Fprintln(ios.Err, "starplan serve: no model configured (OPENAI_API_KEY, OPENAI_BASE_URL): /v1/ask is off, and a rejection only records")
		}
		srv, err := server.New(e, server.Options{Token: token, Model: model, MaxRepairs: opts.repairs(), Retention: retention,
			Log: slog.NewLogLogger(logger.Handler(), slog.LevelWarn), Telemetry: telemetry.ServerHooks(metrics, logs)})
		if err != nil {
			return withCode(ExitInternal, err, "")
		}
		if err := printAuditLog(ctx, ios, srv, e, retention); err != nil {
			return engineError(err)
		}
		// CLI commands on this store run here while the server holds it (relay.go). A store in a
		// database is not held: every command opens it itself.
		var relay *relayServer
		if local {
			relay, err = listenRelay(dir, e)
		}
		switch {
		case err != nil:
			fmt.Fprintf(ios.Err, "warning: CLI commands on this store cannot go through the server (%s); they will find the store in use\n", safe(err.Error()))
		case relay != nil:
			go relay.serve()
			defer relay.close(0) // also on the early returns below
			fmt.Fprintf(ios.Err, "starplan serve: CLI commands on this store go through %s\n", safe(relay.path))
		}
		var (
			hs        *http.Server
			httpEnded = make(chan error, 1) // the HTTP server stopped by itself
			mcpEnded  = make(chan error, 1) // the stdio session ended (the client went away)
		)
		info := serveInfo{PID: os.Getpid()}
		if metrics != nil { // before the API, so a refused address stops nothing that serves
			ms, addr, err := serveMetrics(opts.MetricsListen, metrics)
			if err != nil {
				return err
			}
			defer ms.Close()
			fmt.Fprintf(ios.Err, "starplan serve: metrics on http://%s/metrics\n", addr)
		}
		if httpOn {
			ln, err := net.Listen("tcp", opts.Listen)
			if err != nil {
				return withCode(ExitUsage, fmt.Errorf("listening on %s: %w", opts.Listen, err), "pass --listen HOST:PORT with a free port")
			}
			// Connections are bounded, strangers' apart from the token holder's (server/conns.go).
			srv.SetPageURL("http://" + ln.Addr().String())
			hs = srv.HTTPServer()
			go func() { httpEnded <- hs.Serve(srv.Listener(ln)) }()
			if !isLoopbackAddr(ln.Addr()) {
				fmt.Fprintf(ios.Err, "warning: %s is not a loopback address: anyone who reaches it with the token can apply runs\n", ln.Addr())
			}
			switch {
			case created:
				fmt.Fprintf(ios.Err, "starplan serve: created a bearer token in %s\n", path)
			case path != "":
				fmt.Fprintf(ios.Err, "starplan serve: bearer token in %s\n", path)
			}
			info.HTTP = "http://" + ln.Addr().String()
			fmt.Fprintf(ios.Err, "starplan serve: listening on http://%s (API /v1, MCP %s)\n", ln.Addr(), server.MCPPath)
			// The one-time login link is an admin's session: it goes to a person's terminal, never
			// into a log that standard error may be (--log-format json to a collector).
			if ios.ErrTTY {
				fmt.Fprintf(ios.Err, "starplan serve: review page http://%s/ (one-time login, valid %s: http://%s%s)\n", ln.Addr(), server.LoginLinkTTL, ln.Addr(), srv.LoginLink())
			} else {
				fmt.Fprintf(ios.Err, "starplan serve: review page http://%s/ (sign in with a token; a one-time login link is printed only on a terminal)\n", ln.Addr())
			}
		}
		// Who holds the store, for the commands that cannot go through the server (holder.go).
		if local {
			if remove, err := writeServeInfo(dir, info); err == nil {
				defer remove()
			}
		}
		mctx, stopMCP := context.WithCancel(ctx)
		defer stopMCP()
		if opts.MCPStdio {
			go func() {
				mcpEnded <- srv.RunMCP(mctx, &mcp.IOTransport{Reader: io.NopCloser(ios.In), Writer: nopWriteCloser{ios.Out}})
			}()
		}
		var ended error
		stdioOpen := opts.MCPStdio
		select {
		case <-ctx.Done():
		case ended = <-httpEnded:
		case ended = <-mcpEnded:
			stdioOpen = false
		}
		// Drain: event streams end, requests in flight finish, CLI commands end, then the engine
		// may close.
		srv.Drain()
		if relay != nil {
			relay.close(0) // the server is stopping: commands running for clients end now
		}
		if stdioOpen {
			stopMCP()
			if err := <-mcpEnded; ended == nil {
				ended = err // RunMCP returns once the calls in flight are answered
			}
		}
		if hs != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.DrainTimeout)
			defer cancel()
			if err := hs.Shutdown(dctx); err != nil {
				hs.Close()
				return withCode(ExitInternal, fmt.Errorf("requests still in flight after %s were cut: %w", opts.DrainTimeout, err), "raise --drain-timeout")
			}
		}
		if ended != nil && !errors.Is(ended, http.ErrServerClosed) && !errors.Is(ended, io.EOF) {
			return withCode(ExitInternal, ended, "")
		}
		return nil
	})
}

// serveMetrics serves m at /metrics on its own listener at addr (no token: the metrics are
// counts, never data), and nothing else. The caller closes the server.
func serveMetrics(addr string, m *telemetry.Metrics) (*http.Server, net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, withCode(ExitUsage, fmt.Errorf("listening for metrics on %s: %w", addr, err), "pass --metrics-listen HOST:PORT with a free port")
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Minute}
	go func() { _ = hs.Serve(ln) }()
	return hs, ln.Addr(), nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func isLoopbackAddr(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// printAuditLog prunes the audit log by the retention, if there is one, and says how big the log
// is and how long it keeps runs: the knob is visible at every start.
func printAuditLog(ctx context.Context, ios IOStreams, srv *server.Server, e *engine.Engine, retention time.Duration) error {
	rep, err := srv.Retain(ctx)
	if err != nil {
		return fmt.Errorf("pruning the audit log (--retention %s): %w", server.FormatRetention(retention), err)
	}
	st, err := e.RunStats()
	if err != nil {
		return err
	}
	size := fmt.Sprintf("%d %s, %s", st.Count, plural(st.Count, "run", "runs"), builtins.FormatBytes(st.Bytes))
	if n := e.IndexBuilt(); n > 0 {
		size += fmt.Sprintf(" (its index by time and state was built now from %d %s: the store was written before it)", n, plural(n, "record", "records"))
	}
	if retention <= 0 {
		fmt.Fprintf(ios.Err, "starplan serve: audit log %s; every run is kept (--retention 90d would prune settled runs older than 90 days)\n", size)
		return nil
	}
	fmt.Fprintf(ios.Err, "starplan serve: audit log %s; settled runs older than %s are pruned now and hourly (--retention; removed %d, %s)\n",
		size, server.FormatRetention(retention), rep.Removed, builtins.FormatBytes(rep.Bytes))
	return nil
}
