//go:build linux

package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/internal/termsafe"
	"github.com/starplan/starplan/llm/llmtest"
)

// openPTY opens a new pseudo-terminal: ptm is the side a person's terminal emulator reads, pts is
// the terminal a command's streams are. Output processing (\n to \r\n) and echo are turned off,
// so the bytes read from ptm are exactly the bytes the command wrote; input stays line by line.
func openPTY(t *testing.T) (ptm, pts *os.File) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { ptm.Close() })
	require.NoError(t, unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { pts.Close() })
	tio, err := unix.IoctlGetTermios(int(pts.Fd()), unix.TCGETS)
	require.NoError(t, err)
	tio.Oflag &^= unix.OPOST
	tio.Lflag &^= unix.ECHO
	require.NoError(t, unix.IoctlSetTermios(int(pts.Fd()), unix.TCSETS, tio))
	return ptm, pts
}

// screen is everything a terminal was sent, read from its controller as it arrives.
type screen struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	found chan struct{}
}

const endOfScreen = "<<end of screen>>"

func watch(ptm *os.File) *screen {
	s := &screen{found: make(chan struct{})}
	go func() {
		defer close(s.found)
		b := make([]byte, 4096)
		for {
			n, err := ptm.Read(b)
			s.mu.Lock()
			s.buf.Write(b[:n])
			done := bytes.Contains(s.buf.Bytes(), []byte(endOfScreen))
			s.mu.Unlock()
			if done || err != nil {
				return
			}
		}
	}()
	return s
}

// text writes an end marker to the terminal and returns everything before it, once the marker
// has come through: no sleeps, no deadlines.
func (s *screen) text(pts *os.File) string {
	_, _ = pts.WriteString(endOfScreen)
	<-s.found
	s.mu.Lock()
	defer s.mu.Unlock()
	out, _, _ := strings.Cut(s.buf.String(), endOfScreen)
	return out
}

// The payload a hostile plan, model or data file carries: set the window title, clear the
// screen, claim that nothing will change, conceal what follows; a C1 CSI, a right-to-left
// override and a NUL. hostileStar is the same text as Starlark string escapes, which are
// ordinary program text.
const (
	hostile     = "\x1b]0;pwned\x07\x1b[2J nothing will change \x1b[8m \u009b2J \u202eevil\u202c \x00 end"
	hostileStar = `\x1b]0;pwned\x07\x1b[2J nothing will change \x1b[8m \u009b2J \u202eevil\u202c \x00 end`
)

// The escaped forms a reader must see instead.
var visible = []string{`\x1b]0;pwned\x07`, `\x1b[2J`, `\x1b[8m`, `\x9b2J`, `\u202eevil\u202c`, `\x00 end`}

var purchasePlan = `hostile = "` + hostileStar + `"
print("said: " + hostile)
item = inventory_tbl.get({"item_id": "SG002"})
inventory_tbl.update({"quantity_in_stock": item["quantity_in_stock"] - 1}, {"item_id": "SG002"})
transactions_tbl.insert({
    "transaction_id": next_transaction_id(transactions_tbl),
    "customer_name": "Mallory " + hostile,
    "transaction_summary": "Purchase of 1 x Wayfarer (SG002)",
    "transaction_amount": item["price"],
    "balance_after_transaction": get_current_balance(transactions_tbl) + item["price"],
    "timestamp": now(),
})
STATUS = "success"
answer_text = "Done: 1 Wayfarer for Mallory."
`

// ours are the only controls starplan itself writes: the styles bold, dim, red, green and
// reset, and the carriage return that redraws eval's progress bar.
var ours = regexp.MustCompile(`\x1b\[(?:0|1|2|31|32)m|\r\[[#.]+\] \d+/\d+`)

// runHostile drives every command that prints for people on a pseudo-terminal, with plans, model
// replies, file names, arguments and stored data that carry the hostile payload, and returns
// the screen.
func runHostile(t *testing.T, noColor bool) string {
	dir := t.TempDir()
	db := filepath.Join(dir, "store")
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
		return p
	}
	srv := llmtest.NewServer(t, llmtest.Always(llmtest.Reply("<execute_python>\n"+purchasePlan+"</execute_python>")))
	env := map[string]string{"OPENAI_BASE_URL": srv.URL, "OPENAI_API_KEY": llmtest.APIKey, "STARPLAN_MODEL": llmtest.Model}
	if noColor {
		env["NO_COLOR"] = "1"
	}
	ptm, pts := openPTY(t)
	scr := watch(ptm)
	ios := IOStreams{In: pts, Out: pts, Err: pts, OutTTY: isTerminal(pts), InTTY: isTerminal(pts), Getenv: func(k string) string { return env[k] }}
	require.True(t, ios.OutTTY && ios.InTTY, "the pseudo-terminal is a terminal")
	require.Equal(t, !noColor, ios.Color())
	run := func(typed string, args ...string) int {
		t.Helper()
		if typed != "" {
			_, err := ptm.WriteString(typed)
			require.NoError(t, err)
		}
		return Main(append([]string{"--db", db, "--in-process"}, args...), ios)
	}
	piped := func(args ...string) string {
		var out bytes.Buffer
		Main(append([]string{"--db", db, "--in-process"}, args...), IOStreams{In: strings.NewReader(""), Out: &out, Err: &bytes.Buffer{}, Getenv: func(string) string { return "" }})
		return out.String()
	}

	// exec: the plan's output, the diff and the approval prompt; approved, so the hostile
	// customer name is stored.
	assert.Equal(t, ExitOK, run("y\n", "exec", "--request", "buy "+hostile, write("purchase.star", purchasePlan)))
	// exec: a runtime error whose message the plan chose.
	assert.Equal(t, ExitRejected, run("", "exec", write("fail.star", `fail("boom `+hostileStar+`")`+"\n")))
	// exec: a program whose text itself holds the raw characters (in a comment and a string).
	rawProgram := write("raw.star", "# "+hostile+"\nx = \""+strings.ReplaceAll(hostile, "\x00", "")+"\"\nSTATUS = \"success\"\nanswer_text = \"ok\"\n")
	run("", "exec", rawProgram)
	// run: the answer and the output, in the sandbox alone.
	assert.Equal(t, ExitOK, run("", "run", write("answer.star", `print("`+hostileStar+`")`+"\nanswer_text = \"A: "+hostileStar+"\"\nSTATUS = \"success\"\n")))
	// check: a hostile file name, and a rewrite of a line that holds raw characters.
	run("", "check", write("plan\x1b[8m\u202e.star", "a = None\nb = \"\x1b[2J\" if a is None else \"\"\n"))
	// ask: the model's plan shown with --show-plan, its output and diff, the prompt declined.
	assert.Equal(t, ExitOK, run("n\n", "ask", "--show-plan", "--max-repairs", "0", "buy "+hostile))
	// eval: the suite's requests.
	line, err := json.Marshal(map[string]string{"id": "e" + hostile, "request": "buy " + hostile, "status": "success"})
	require.NoError(t, err)
	assert.Equal(t, ExitOK, run("", "eval", "--concurrency", "1", write("suite.jsonl", string(line)+"\n")))
	// runs and runs show: the stored request, program, output and diff.
	assert.Equal(t, ExitOK, run("", "runs"))
	var runs []engine.RunSummary
	require.NoError(t, json.Unmarshal([]byte(piped("runs", "--json")), &runs))
	require.NotEmpty(t, runs)
	for _, r := range runs {
		run("", "runs", "show", r.ID)
	}
	// db dump: stored data; db import: an error that quotes a bad value.
	assert.Equal(t, ExitOK, run("", "db", "dump"))
	run("", "db", "import", "inventory", write("bad.csv", "item_id,name,description,quantity_in_stock,price\nSG009,Evil,"+strings.ReplaceAll(hostile, "\x00", "")+",x\x1b[2J,10\n"))
	// JSON and exports on a terminal: the same values, with nothing raw a terminal acts on.
	assert.Equal(t, ExitOK, run("", "exec", "--json", write("purchase2.star", purchasePlan)))
	assert.Equal(t, ExitOK, run("", "db", "dump", "--json"))
	assert.Equal(t, ExitOK, run("", "db", "export", "transactions", "--format", "csv"))
	assert.Equal(t, ExitOK, run("", "db", "export", "transactions", "--format", "json"))
	assert.Contains(t, piped("db", "export", "transactions", "--format", "csv"), "Mallory "+hostile, "redirected, an export is exact")
	// apply: an error that names the argument.
	assert.Equal(t, ExitUsage, run("", "apply", "r_"+hostile))
	return scr.text(pts)
}

// assertSafe checks that nothing but starplan's own styles acts on the terminal, and that every
// hostile character is shown escaped.
func assertSafe(t *testing.T, screen string) {
	t.Helper()
	rest := ours.ReplaceAllString(screen, "")
	assert.True(t, utf8.ValidString(rest), "the screen is valid UTF-8")
	raw := map[string]int{}
	for _, r := range rest {
		if termsafe.Unsafe(r) && r != '\n' && r != '\t' {
			raw[fmt.Sprintf("%U", r)]++
		}
	}
	assert.Empty(t, raw, "characters that reached the terminal raw")
	var missing []string
	for _, want := range append(visible,
		"said: "+`\x1b]0;pwned\x07\x1b[2J nothing will change`, // the plan's output
		"Apply these changes? [y/N]",
		"Applied run r_",
		"Mallory "+`\x1b]0;pwned`, // the diff and the dump
		"boom "+`\x1b]0;pwned`,    // a diagnostic
		"A: "+`\x1b]0;pwned`,      // an answer
		"buy "+`\x1b]0;pwned`,     // a request
		`plan\x1b[8m\u202e.star`,  // a file name
		`r_\x1b]0;pwned`,          // an argument in an error
		`e\x1b]0;pwned`,           // an eval case
	) {
		if !strings.Contains(rest, want) {
			missing = append(missing, want)
		}
	}
	assert.Empty(t, missing, "not on the screen")
}

func TestNothingAPlanControlsReachesATerminalRaw(t *testing.T) {
	t.Parallel()
	screen := runHostile(t, false)
	assertSafe(t, screen)
	assert.Contains(t, screen, "\x1b[1m", "colour on a terminal without NO_COLOR")
}

func TestNothingAPlanControlsReachesATerminalRawWithNoColor(t *testing.T) {
	t.Parallel()
	screen := runHostile(t, true)
	assertSafe(t, screen)
	assert.NotContains(t, screen, "\x1b", "NO_COLOR: not one escape sequence")
}
