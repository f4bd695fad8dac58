package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/starplan/starplan/access"
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

// chromiumProcess is the package's one Chromium: started by the first test that opens a
// browser, stopped by TestMain (stopChromium). A Chromium per test cost each browser test its
// start, seconds on a busy machine; each test still has a tab of its own in a browser context
// of its own (cookies, storage and cache as a fresh browser's: the tests' servers share a host,
// and cookies do not keep to a port).
var chromiumProcess struct {
	once sync.Once
	ctx  context.Context // the browser's first tab, open while the tests run
	err  error
	stop func()
}

// sharedChromium starts the package's Chromium at path, once, and returns its first tab.
func sharedChromium(path string) (context.Context, error) {
	p := &chromiumProcess
	p.once.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path),
			chromedp.WindowSize(1280, 900),
			chromedp.Flag("disable-gpu", true),
		)
		if os.Geteuid() == 0 {
			opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run its sandbox as root
		}
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(actx)
		p.stop = func() { cancel(); cancelAlloc() }
		if p.err = chromedp.Do(ctx, chromedp.Navigate("about:blank")); p.err != nil {
			p.err = fmt.Errorf("starting %s: %w", path, p.err)
			return
		}
		p.ctx = ctx
	})
	return p.ctx, p.err
}

// stopChromium stops the package's Chromium, if a test started it.
func stopChromium() {
	if p := &chromiumProcess; p.stop != nil {
		p.stop()
	}
}

// newBrowser opens a tab of width×height CSS pixels in a new browser context of the package's
// Chromium, closed when t ends.
func newBrowser(t *testing.T, path string, width, height int) *browser {
	t.Helper()
	parent, err := sharedChromium(path)
	require.NoError(t, err)
	ctx, cancel := chromedp.NewContext(parent, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	b := &browser{t: t, ctx: ctx}
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(int64(width), int64(height))), "opening a tab in %s", path)
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

// click clicks the element sel selects. A node the page drew again between chromedp's query and
// its click (the run's fetch or an event redraws the run) is looked up again: the click fails
// before any mouse event is sent, so it is never sent twice.
func (b *browser) click(sel string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitFor)
	defer cancel()
	for {
		err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel)))
		if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "Could not find node") {
			require.NoError(b.t, err)
			return
		}
	}
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
	t.Parallel()
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
	b.click(item(approve.RunID) + " h2 a")
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
	b.click(item(reject.RunID) + " h2 a")
	b.wait("the run to reject", `document.querySelector("#feedback") !== null && document.querySelector("#run-h").textContent === "Run `+reject.RunID+`"`)
	b.do(chromedp.KeyEvent("r"))
	b.wait("r to move to the feedback", `document.activeElement.id === "feedback"`)
	b.do(chromedp.SendKeys(chromedp.CSS("#feedback"), "Alice asked for 2."))
	b.click("#reject")
	b.wait("the rejection", `document.querySelector("#decided") && document.querySelector("#decided").textContent === "Rejected with this feedback: Alice asked for 2."`)
	d, ok, err := f.eng.Decision(reject.RunID)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "Alice asked for 2.", d.Feedback)
	assert.Equal(t, OriginHTTP, d.Origin)

	// A run whose data moved: approving it shows the conflict and writes nothing.
	b.do(chromedp.Navigate(f.web.URL + "/#/runs/" + moved.RunID))
	b.wait("the moved run", `document.querySelector("#approve") !== null && document.querySelector("#run-h").textContent === "Run `+moved.RunID+`"`)
	b.click("#approve")
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
	b.click(`.filters a[data-filter="rejected"]`)
	b.wait("the rejected runs", `document.querySelectorAll("#queue-list > li").length === 2`)
	b.click(`.filters a[data-filter="failed"]`)
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

// signIn opens the page and signs in with the fixture's token, then waits for n runs in the
// pending queue.
func (b *browser) signIn(f *fixture, n int) {
	b.t.Helper()
	b.do(chromedp.Navigate(f.web.URL + "/"))
	b.wait("the login form", `document.querySelector("#token") && !document.querySelector("#login").hidden`)
	b.do(chromedp.SendKeys(chromedp.CSS("#token"), testToken), chromedp.Click(chromedp.CSS("#login-form button[type=submit]")))
	b.wait("the queue", `document.querySelectorAll("#queue-list > li").length === `+strconv.Itoa(n))
}

// openRun shows one run and waits until the page shows it.
func (b *browser) openRun(f *fixture, id string) {
	b.t.Helper()
	b.do(chromedp.Navigate(f.web.URL + "/#/runs/" + id))
	b.wait("run "+id, `document.querySelector("#run-h").textContent === "Run `+id+`" && document.querySelector("#decision") !== null`)
}

// atAGlance390 is the most a run of four changed rows (03_two_item_order.star) may take, in CSS
// pixels of page height, in a 390 px wide window: 2,325 when this was set, 6,781 before the
// page showed changed fields first (with its plan open and every field of every row).
const atAGlance390 = 2800

func TestReviewPageShowsTheChangeAtAGlance(t *testing.T) {
	t.Parallel()
	path := chromium(t)
	f := newFixture(t, Options{})
	four := f.run(example(t, "03_two_item_order.star"), "I want to buy 3 pairs of classic sunglasses and 1 pair of aviator sunglasses.")
	require.Equal(t, StatePending, four.State, "%v", four.Diagnostics)
	broken := f.run(brokenSale, "Take an Aviator.")
	require.Equal(t, StateFailed, broken.State)
	require.NotEqual(t, "ledger-missing", broken.Diagnostics[0].Code, "the run lists a lesser diagnostic first")
	q, err := f.srv.Queue("pending")
	require.NoError(t, err)
	require.Len(t, q.Runs, 1)
	headline := q.Runs[0].Headline
	require.Contains(t, headline, "SG005 Classic: quantity_in_stock 10→7")

	b := newBrowser(t, path, 1280, 800)
	b.do(chromedp.EmulateViewport(1280, 800))
	b.signIn(f, 1)

	// The queue row says what the run changes, row by row.
	assert.Equal(t, headline, eval[string](b, `document.querySelector(`+js("#queue-list li[data-run="+js(four.RunID)+"] .headline")+`).textContent`))

	// At 1280×800 a changed value is on the first screen, and the decision comes after the
	// changes: nothing can be approved before they were on screen.
	b.openRun(f, four.RunID)
	b.shot("glance-1280")
	require.Zero(t, eval[float64](b, `window.scrollY`))
	first := eval[float64](b, `document.querySelector("#changes tr.changed td").getBoundingClientRect().top`)
	t.Logf("at 1280×800 the first changed value is %.0f px down (it was 1,283 before)", first)
	assert.Less(t, first, 800.0, "the first changed value is on the first screen")
	assert.True(t, eval[bool](b, `!!(document.querySelector("#changes").compareDocumentPosition(document.querySelector("#approve")) & Node.DOCUMENT_POSITION_FOLLOWING)`),
		"Approve comes after the changes")
	assert.True(t, eval[bool](b, `document.querySelector("#approve").getBoundingClientRect().top >= document.querySelector("#changes").getBoundingClientRect().bottom`))
	assert.Equal(t, headline, eval[string](b, `document.querySelector("#headline").textContent`))

	// An updated row shows its changed fields; the full rows are behind a toggle.
	visible := func(sel string) string {
		return `(() => { const e = document.querySelector(` + js(sel) + `); return !!e && e.getClientRects().length > 0; })()`
	}
	desc := `section[data-table="inventory"] tr[data-path="description"]`
	assert.True(t, eval[bool](b, visible(`section[data-table="inventory"] tr.changed[data-path="quantity_in_stock"]`)))
	assert.False(t, eval[bool](b, visible(desc)), "the unchanged description is not shown")
	assert.Equal(t, 2, eval[int](b, `[...document.querySelectorAll('section[data-table="inventory"] tr')].filter(tr => tr.getClientRects().length > 0 && tr.parentElement.tagName === "TBODY").length`),
		"one field for each of the two updated rows")
	b.click("#whole-rows")
	b.wait("the whole rows", visible(desc))
	assert.Equal(t, "true", eval[string](b, `document.querySelector("#whole-rows").getAttribute("aria-pressed")`))
	assert.Equal(t, f.committed("inventory", "SG001")["description"], eval[string](b, `document.querySelector('section[data-table="inventory"] tr[data-path="description"] td.after').textContent`))
	assert.Equal(t, "Aviator", eval[string](b, `document.querySelector('section[data-table="inventory"] tr[data-path="name"] td.before').textContent`))
	b.click("#whole-rows")
	b.wait("the changed fields only", `!`+visible(desc))

	// Who did what, as the run document names it: the fixture's client holds the admin token.
	assert.Equal(t, "admin (API)", eval[string](b, `document.querySelector("#proposed-by").textContent`))
	assert.Equal(t, "Proposed by admin (API); approvals: 0 of 1 so far.", eval[string](b, `document.querySelector("#approvals").textContent`))
	// The page's answers are given fields of the run document that the approvals add: the
	// page renders what it is given, whoever adds it.
	b.do(chromedp.Evaluate[chromedp.Void](`(() => {
		const fetch = window.fetch;
		window.extra = {};
		window.fetch = async (input, init) => {
			const res = await fetch(input, init);
			if (!String(input).includes("/review/runs/") || res.status !== 200) return res;
			const data = await res.json();
			Object.assign(data.run, window.extra);
			if (window.via) data.tables[0].rows[0].via = window.via;
			return new Response(JSON.stringify(data), { status: 200, headers: { "Content-Type": "application/json" } });
		};
	})()`))
	b.do(chromedp.Evaluate[chromedp.Void](`window.extra = { state: "awaiting-approval", proposed_by: "agent-7", approved_by: ["bob"], approvals_needed: 2, subject: "C9" }; window.via = "sell"`))
	b.do(chromedp.Navigate(f.web.URL + "/#/queue/pending"))
	b.wait("the queue", `!document.querySelector("#queue").hidden`)
	b.openRun(f, four.RunID)
	b.wait("the run awaiting approval", `document.querySelector("#run-state").textContent === "awaiting-approval"`)
	assert.Equal(t, "agent-7 (API)", eval[string](b, `document.querySelector("#proposed-by").textContent`))
	assert.Equal(t, "C9", eval[string](b, `document.querySelector("#subject").textContent`), "the reviewer sees whom the run acts for")
	assert.Equal(t, "sell", eval[string](b, `document.querySelector("#changes caption code.via").textContent`), "the reviewer sees the helper a row was written through")
	assert.Contains(t, eval[string](b, `document.querySelector("#changes caption").textContent`), "by helper sell)")
	assert.Equal(t, 1, eval[int](b, `document.querySelectorAll("#changes code.via").length`), "a row the plan wrote itself names no helper")
	assert.Equal(t, "Proposed by agent-7 (API); approvals: 1 of 2: bob.", eval[string](b, `document.querySelector("#approvals").textContent`))
	assert.True(t, eval[bool](b, `document.querySelector("#approve") !== null`), "a run awaiting approval can be approved")
	b.do(chromedp.Evaluate[chromedp.Void](`window.extra = { state: "expired", proposed_by: "agent-7" }; window.via = ""`))
	b.do(chromedp.Navigate(f.web.URL + "/#/queue/pending"))
	b.wait("the queue", `!document.querySelector("#queue").hidden`)
	b.openRun(f, four.RunID)
	b.wait("the expired run", `document.querySelector("#run-state").textContent === "expired"`)
	assert.True(t, eval[bool](b, `document.querySelector("#approve") === null && document.querySelector("#reject") !== null`), "an expired run can only be rejected")
	b.do(chromedp.Evaluate[chromedp.Void](`window.extra = { state: "applied", proposed_by: "agent-7", approved_by: ["bob", "carol"], approvals_needed: 2, auto_approved_by_rule: "small_sale" }`))
	b.do(chromedp.Navigate(f.web.URL + "/#/queue/pending"))
	b.wait("the queue", `!document.querySelector("#queue").hidden`)
	b.openRun(f, four.RunID)
	b.wait("the applied run", `document.querySelector("#run-state").textContent === "applied"`)
	assert.Equal(t, "Proposed by agent-7 (API); approvals: 2 of 2: bob, carol; auto-approved by rule small_sale.", eval[string](b, `document.querySelector("#approvals").textContent`))
	assert.Equal(t, "small_sale", eval[string](b, `[...document.querySelectorAll(".facts dt")].find(dt => dt.textContent === "Auto-approved by rule").nextElementSibling.textContent`))
	b.do(chromedp.Evaluate[chromedp.Void](`window.extra = {}`))

	// A failed run leads with its most serious diagnostic: the unpaid item, not the answer's
	// length; and its plan is open at the lines.
	b.openRun(f, broken.RunID)
	b.wait("the failed run's lead", `document.querySelector("#lead-diag") !== null`)
	b.shot("failed-1280")
	assert.Equal(t, "ledger-missing", eval[string](b, `document.querySelector("#lead-diag").dataset.code`))
	assert.True(t, eval[bool](b, `document.querySelector("#lead").compareDocumentPosition(document.querySelector("#changes")) & Node.DOCUMENT_POSITION_FOLLOWING ? true : false`), "before the changes")
	assert.Contains(t, eval[string](b, `document.querySelector("#lead").textContent`), "1 more diagnostic")
	assert.True(t, eval[bool](b, `document.querySelector("#plan-box").open`))

	// At phone width the four changed rows take a bounded height, and nothing is wider than the
	// window.
	b.do(chromedp.EmulateViewport(390, 844))
	b.openRun(f, four.RunID)
	b.wait("the layout at 390 px", `document.documentElement.clientWidth === 390`)
	b.shot("glance-390")
	height := eval[int](b, `document.documentElement.scrollHeight`)
	t.Logf("at 390 px the four-row run is %d px tall (it was 6,781 before; bound %d)", height, atAGlance390)
	assert.LessOrEqual(t, height, atAGlance390)
	assert.LessOrEqual(t, eval[int](b, `document.documentElement.scrollWidth`), 390)
	assert.True(t, eval[bool](b, `document.querySelector("#changes tr.changed td").getBoundingClientRect().top < 844`), "a changed value on the first screen of a phone too")
}

// Who may approve, in the page: a proposer's token cannot sign in, and the page says why; an
// approver signs in, sees who proposed the run, approves it, and the decision names the approver.
func TestReviewPageApproverApprovesAProposersRun(t *testing.T) {
	t.Parallel()
	path := chromium(t)
	f := newFixture(t, Options{})
	agent, alice := f.token("agent", access.Proposer, 0), f.token("alice", access.Approver, 0)
	r := f.callWith(agent, "POST", "/v1/runs", RunRequest{Program: purchase("Aviator", 1, "Ann"), Request: "One Aviator for Ann."})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	var run RunDocument
	r.decode(t, &run)
	require.Equal(t, StatePending, run.State)
	stock := f.committed("inventory", "SG001")["quantity_in_stock"].(int64)

	b := newBrowser(t, path, 1280, 900)
	signIn := func(token string) {
		b.do(chromedp.Navigate(f.web.URL + "/"))
		b.wait("the login form", `document.querySelector("#token") && !document.querySelector("#login").hidden`)
		b.do(chromedp.Evaluate[chromedp.Void](`document.querySelector("#token").value = ""`), chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS("#login-form button[type=submit]")))
	}
	signIn(agent)
	b.wait("the refusal", `document.querySelector("#login-note").textContent.includes("proposer")`)
	assert.False(t, eval[bool](b, `!document.querySelector("#queue").hidden`), "a proposer sees no queue")
	assert.Contains(t, eval[string](b, `document.querySelector("#login-note").textContent`), "agent")

	signIn(alice)
	b.wait("the queue", `document.querySelectorAll("#queue-list > li").length === 1`)
	b.do(chromedp.Navigate(f.web.URL + "/#/runs/" + run.RunID))
	b.wait("the run", `document.querySelector("#approve") !== null && document.querySelector("#run-h").textContent === "Run `+run.RunID+`"`)
	assert.Equal(t, "agent (API)", eval[string](b, `document.querySelector("#proposed-by").textContent`))
	b.click("#approve")
	b.wait("the run applied", `document.querySelector("#decided") && document.querySelector("#decided").textContent.startsWith("Applied")`)
	b.wait("the approver named", `document.querySelector("#approvals").textContent.includes("alice")`)
	assert.Equal(t, stock-1, f.committed("inventory", "SG001")["quantity_in_stock"], "the store changed")
	doc, err := f.eng.Show(run.RunID)
	require.NoError(t, err)
	assert.Equal(t, []string{"alice"}, doc.ApprovedBy)
	assert.Equal(t, "agent", doc.ProposedBy)
}
