package server

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// browser drives one headless Chromium tab against a fixture's review page. Waits are on DOM
// conditions with generous timeouts, never on the clock.
type browser struct {
	t       *testing.T
	ctx     context.Context
	mu      sync.Mutex
	console []chromedp.ConsoleMessage
}

// waitFor is how long a DOM condition may take to hold before the test fails; it only bounds a
// hang, it decides no outcome.
const waitFor = 90 * time.Second

// chromium returns the path of a Chromium or Chrome binary, or skips the test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium not found: install it with apt-get install chromium (.ci/run does)")
	return ""
}

func newBrowser(t *testing.T, path string, width, height int) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.WindowSize(width, height),
		chromedp.Flag("disable-gpu", true),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run its sandbox as root
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx}
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")), "starting %s", path)
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.console = append(b.console, m)
			b.mu.Unlock()
		}
	}()
	return b
}

func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitFor)
	defer cancel()
	require.NoError(b.t, chromedp.Do(ctx, steps...))
}

// wait waits until a JavaScript expression is truthy.
func (b *browser) wait(what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitFor+10*time.Second)
	defer cancel()
	var err error
	// A poll runs in the page's current JavaScript context; one that began as a navigation
	// replaced that context fails at once and is started again in the new one.
	for try := 0; try < 20; try++ {
		_, err = chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(waitFor)))
		if err == nil || errors.Is(err, chromedp.ErrPollingTimeout) || ctx.Err() != nil {
			break
		}
		b.t.Logf("polling for %s again after: %v", what, err)
		_ = chromedp.Do(ctx, chromedp.WaitReady(chromedp.CSS("body")))
	}
	if err != nil {
		b.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
	}
	require.NoError(b.t, err, "waiting for %s: %s", what, expr)
}

func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitFor)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	require.NoError(b.t, err, "%s", expr)
	return v
}

// shot saves a screenshot of the whole page in the test's artifact directory (kept with
// go test -artifacts -outputdir DIR).
func (b *browser) shot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitFor)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(b.t.ArtifactDir(), name+".png")
	require.NoError(b.t, os.WriteFile(path, png, 0o644))
	b.t.Logf("screenshot: %s", path)
}

// js quotes a Go string as a JavaScript string literal.
func js(s string) string { return strconv.Quote(s) }

func TestReviewPageInARealBrowser(t *testing.T) {
	path := chromium(t)
	f := newFixture(t, Options{})
	// A hostile request: markup, and a bidi override that would show "Alice alive" reversed.
	hostileRequest := `<img src=x onerror="document.title='pwned'"> one Aviator for` + " \u202eevila ecilA\u202c"
	shownRequest := `<img src=x onerror="document.title='pwned'"> one Aviator for \u202eevila ecilA\u202c` // escaped, as the terminal shows it
	hostileSummary := `<script>document.title='pwned'</script>`
	approve := f.run(purchase("Aviator", 1, "Ann"), "One Aviator for Ann.")
	reject := f.run(example(t, "02_purchase_wayfarer.star"), "Purchase 3 Wayfarer sunglasses for customer Alice.")
	moved := f.run(purchase("Aviator", 1, "Bob"), "One Aviator for Bob.")
	hostile := f.run(hostilePurchase(t, hostileSummary)+"\nprint(\"total: \\u202e00.0001$\")\n", hostileRequest)
	require.Contains(t, hostile.Stdout, "total: \u202e00.0001$", "the plan printed a bidi override")
	for _, d := range []*RunDocument{approve, reject, moved, hostile} {
		require.Equal(t, StatePending, d.State, "%v", d.Diagnostics)
	}
	stock := f.committed("inventory", "SG001")["quantity_in_stock"].(int64)
	ledger := f.count("transactions")

	b := newBrowser(t, path, 1280, 900)
	item := func(id string) string { return "#queue-list li[data-run=" + js(id) + "]" }

	// Signing in: the page asks for the token and keeps only a session.
	b.do(chromedp.Navigate(f.web.URL + "/"))
	b.wait("the login form", `document.querySelector("#token") && !document.querySelector("#login").hidden`)
	b.do(chromedp.SendKeys(chromedp.CSS("#token"), testToken), chromedp.Click(chromedp.CSS("#login-form button[type=submit]")))
	b.wait("the queue", `document.querySelectorAll("#queue-list > li").length === 4`)
	assert.NotContains(t, eval[string](b, `document.documentElement.outerHTML + JSON.stringify(localStorage) + JSON.stringify(sessionStorage) + document.cookie`), testToken,
		"the token is nowhere a script can read it")
	assert.Regexp(t, `^[0-9a-f]{64}$`, eval[string](b, `sessionStorage.getItem("starplan.session_key")`), "the session's key is kept in the tab")

	// The queue: newest first, who proposed it, a summary of its changes, its age.
	ids := eval[[]string](b, `[...document.querySelectorAll("#queue-list > li")].map(li => li.dataset.run)`)
	assert.Equal(t, []string{hostile.RunID, moved.RunID, reject.RunID, approve.RunID}, ids)
	text := eval[string](b, `document.querySelector(`+js(item(approve.RunID))+`).innerText`)
	for _, want := range []string{"One Aviator for Ann.", "pending", "by API", "outcome ok", "STATUS success", "ago", "inventory: 1 updated; transactions: 1 inserted"} {
		assert.Contains(t, text, want)
	}
	// A hostile request is text, not markup, with its bidi override shown escaped.
	assert.Equal(t, shownRequest, eval[string](b, `document.querySelector(`+js(item(hostile.RunID)+" h2 a")+`).textContent`))
	b.shot("queue-1280")

	// One run: request, answer, STATUS, the plan and the cell diff; approve with the keyboard.
	b.do(chromedp.Click(chromedp.CSS(item(approve.RunID) + " h2 a")))
	b.wait("the run", `!document.querySelector("#run").hidden && document.querySelector("#approve") !== null`)
	assert.Equal(t, "Run "+approve.RunID, eval[string](b, `document.querySelector("#run-h").textContent`))
	assert.Equal(t, "Done.", eval[string](b, `document.querySelector("#answer").textContent`))
	assert.Equal(t, approve.Digest, eval[string](b, `document.querySelector("#digest").textContent`))
	assert.Equal(t, []string{strconv.FormatInt(stock, 10), strconv.FormatInt(stock-1, 10)}, eval[[]string](b, `[...document.querySelectorAll('section[data-table="inventory"] tr.changed[data-path="quantity_in_stock"] td')].map(td => td.textContent)`),
		"the changed cell, before and after")
	assert.True(t, eval[bool](b, `document.querySelectorAll('section[data-table="transactions"] tr.changed').length > 3`), "the inserted row, field by field")
	assert.True(t, eval[bool](b, `document.querySelectorAll("table.plan tbody tr").length > 10`), "the plan, line by line")
	b.shot("run-1280")
	b.do(chromedp.KeyEvent("a"))
	b.wait("a to move to Approve", `document.activeElement.id === "approve"`)
	b.do(chromedp.KeyEvent("\r"))
	b.wait("the run applied", `document.querySelector("#decided") && document.querySelector("#decided").textContent.startsWith("Applied")`)
	assert.Equal(t, "applied", eval[string](b, `document.querySelector("#run-state").textContent`))
	assert.Equal(t, stock-1, f.committed("inventory", "SG001")["quantity_in_stock"], "the store changed")
	assert.Equal(t, ledger+1, f.count("transactions"))

	// Reject another with feedback.
	b.do(chromedp.KeyEvent("\x1b")) // Escape: back to the queue
	b.wait("the queue without the applied run", `!document.querySelector("#queue").hidden && document.querySelectorAll("#queue-list > li").length === 3`)
	b.do(chromedp.Click(chromedp.CSS(item(reject.RunID) + " h2 a")))
	b.wait("the run to reject", `document.querySelector("#feedback") !== null && document.querySelector("#run-h").textContent === "Run `+reject.RunID+`"`)
	b.do(chromedp.KeyEvent("r"))
	b.wait("r to move to the feedback", `document.activeElement.id === "feedback"`)
	b.do(chromedp.SendKeys(chromedp.CSS("#feedback"), "Alice asked for 2."))
	b.do(chromedp.Click(chromedp.CSS("#reject")))
	b.wait("the rejection", `document.querySelector("#decided") && document.querySelector("#decided").textContent === "Rejected with this feedback: Alice asked for 2."`)
	d, ok, err := f.eng.Decision(reject.RunID)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "Alice asked for 2.", d.Feedback)
	assert.Equal(t, OriginHTTP, d.Origin)

	// A run whose data moved: approving it shows the conflict and writes nothing.
	b.do(chromedp.Navigate(f.web.URL + "/#/runs/" + moved.RunID))
	b.wait("the moved run", `document.querySelector("#approve") !== null && document.querySelector("#run-h").textContent === "Run `+moved.RunID+`"`)
	b.do(chromedp.Click(chromedp.CSS("#approve")))
	// The event stream may show the conflict before the apply's own answer says what happened:
	// wait for both.
	b.wait("the conflict", `document.querySelector("#decided") && document.querySelector("#decided").textContent.includes("the data moved")`+
		` && document.querySelector("#action-msg") && document.querySelector("#action-msg").textContent.includes("nothing was written")`)
	assert.Equal(t, "conflict", eval[string](b, `document.querySelector("#run-state").textContent`))
	assert.Equal(t, stock-1, f.committed("inventory", "SG001")["quantity_in_stock"])
	assert.Equal(t, ledger+1, f.count("transactions"))
	b.shot("run-conflict-1280")

	// A hostile description renders as text.
	b.do(chromedp.Navigate(f.web.URL + "/#/runs/" + hostile.RunID))
	b.wait("the hostile run", `document.querySelector("#run-h").textContent === "Run `+hostile.RunID+`" && document.querySelector("#approve") !== null`)
	assert.Equal(t, []string{hostileSummary}, eval[[]string](b, `[...document.querySelectorAll('section[data-table="transactions"] tr[data-path="transaction_summary"] td.after')].map(td => td.textContent)`))
	assert.Equal(t, shownRequest, eval[string](b, `document.querySelector(".request").textContent`))
	assert.Equal(t, "total: \\u202e00.0001$\n", eval[string](b, `document.querySelector("pre.out").textContent`), "printed output shows its bidi override escaped")
	assert.Equal(t, 0, eval[int](b, `document.querySelectorAll("main img, main script, main [onerror]").length`))
	assert.NotEqual(t, "pwned", eval[string](b, `document.title`))

	// Live: an open run and the queue follow the event stream without a reload.
	b.do(chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
	r := f.call("POST", "/v1/runs/"+hostile.RunID+"/reject", RejectRequest{Feedback: "rejected elsewhere"})
	require.Equal(t, 200, r.status, "%s", r.body)
	b.wait("the open run to show its rejection", `document.querySelector("#decided") && document.querySelector("#decided").textContent.includes("rejected elsewhere")`)
	b.do(chromedp.KeyEvent("\x1b"))
	b.wait("the pending queue", `!document.querySelector("#queue").hidden && document.querySelectorAll("#queue-list > li").length === 0`)
	fresh := f.run(purchase("Wayfarer", 1, "Dee"), "One Wayfarer for Dee, live.")
	b.wait("the new run in the queue", `document.querySelector(`+js(item(fresh.RunID))+`) !== null`)
	assert.True(t, eval[bool](b, `window.notReloaded === true`), "no reload")

	// One open page never holds two queue fetches at once: events that arrive while a refresh
	// is in flight are folded into the next one. The page's queue fetches are held until the
	// test lets them go, and counted.
	b.do(chromedp.Evaluate[chromedp.Void](`(() => {
		const q = window.queueFetches = { inflight: 0, most: 0, count: 0, seen: 0 };
		q.hold = new Promise((r) => { q.release = r; });
		const fetch = window.fetch;
		window.fetch = async (input, init) => {
			if (!String(input).includes("/review/queue")) return fetch(input, init);
			q.inflight++; q.count++; q.most = Math.max(q.most, q.inflight);
			try { await q.hold; return await fetch(input, init); } finally { q.inflight--; }
		};
		const es = new EventSource("/v1/events?session_key=" + sessionStorage.getItem("starplan.session_key"));
		es.addEventListener("finished", () => { q.seen++; });
		es.onopen = () => { q.open = true; };
	})()`))
	b.wait("the test's own event stream", `window.queueFetches.open === true`)
	burst := []*RunDocument{f.run(purchase("Wayfarer", 1, "Eve"), "One Wayfarer for Eve.")}
	b.wait("a queue refresh in flight", `window.queueFetches.inflight === 1`)
	burst = append(burst, f.run(purchase("Wayfarer", 1, "Fay"), "One Wayfarer for Fay."), f.run(purchase("Wayfarer", 1, "Gus"), "One Wayfarer for Gus."))
	b.wait("the page to have had the burst's events", `window.queueFetches.seen >= 3`)
	// Time for a refresh timer to fire had it been started (it decides no outcome: a page that
	// starts none passes however long this is).
	b.do(chromedp.Evaluate[chromedp.Void](`setTimeout(() => { window.queueFetches.waited = true; }, 1000)`))
	b.wait("a second", `window.queueFetches.waited === true`)
	assert.Equal(t, 1, eval[int](b, `window.queueFetches.most`), "one queue fetch in flight, however many events came")
	b.do(chromedp.Evaluate[chromedp.Void](`window.queueFetches.release()`))
	b.wait("the burst in the queue", `document.querySelector(`+js(item(burst[2].RunID))+`) !== null && document.querySelector(`+js(item(burst[1].RunID))+`) !== null`)
	assert.Equal(t, 1, eval[int](b, `window.queueFetches.most`))
	assert.LessOrEqual(t, eval[int](b, `window.queueFetches.count`), 3, "the events were folded into few refreshes")

	// Filters, and a phone-width window.
	b.do(chromedp.Click(chromedp.CSS(`.filters a[data-filter="rejected"]`)))
	b.wait("the rejected runs", `document.querySelectorAll("#queue-list > li").length === 2`)
	b.do(chromedp.Click(chromedp.CSS(`.filters a[data-filter="failed"]`)))
	b.wait("the failed runs", `document.querySelectorAll("#queue-list > li").length === 1 && document.querySelector(`+js(item(moved.RunID))+`) !== null`)
	b.do(chromedp.EmulateViewport(390, 844))
	b.do(chromedp.Navigate(f.web.URL + "/#/runs/" + fresh.RunID))
	b.wait("the run at phone width", `document.querySelector("#run-h").textContent === "Run `+fresh.RunID+`" && document.querySelector("#approve") !== null`)
	assert.LessOrEqual(t, eval[int](b, `document.documentElement.scrollWidth`), 390, "nothing is wider than a phone")
	b.shot("run-390")
	b.do(chromedp.Navigate(f.web.URL + "/#/queue/all"))
	b.wait("all runs at phone width", `document.querySelectorAll("#queue-list > li").length === 8`)
	assert.LessOrEqual(t, eval[int](b, `document.documentElement.scrollWidth`), 390)
	b.shot("queue-390")

	// The session cookie alone opens nothing: without the key (a new tab, or a process that
	// replays the cookie) the page asks to sign in. A one-time link signs in again, and its code
	// does not stay in the address.
	b.do(chromedp.Evaluate[chromedp.Void](`sessionStorage.clear()`))
	b.do(chromedp.Reload())
	b.wait("the login form for a cookie without its key", `!document.querySelector("#login").hidden`)
	b.do(chromedp.Navigate(f.web.URL + f.srv.LoginLink()))
	b.wait("the queue after the one-time link", `!document.querySelector("#queue").hidden && document.querySelectorAll("#queue-list > li").length > 0`)
	assert.Equal(t, "#/queue/pending", eval[string](b, `location.hash`), "the code is taken off the address")
	assert.Regexp(t, `^[0-9a-f]{64}$`, eval[string](b, `sessionStorage.getItem("starplan.session_key")`))

	// The page broke none of its own rules.
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range b.console {
		assert.NotContains(t, m.Text, "Content Security Policy", "the page keeps to its CSP")
		assert.NotEqual(t, chromedp.ConsoleException, m.Type, "an uncaught exception: %s", m.Text)
		if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning {
			t.Logf("console %s: %s", m.Type, m.Text)
		}
	}
}
