package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/internal/testtier"
	"github.com/starplan/starplan/server"
)

// Two `starplan serve` processes (the built binary) on one PostgreSQL database, as a deployment
// with a second instance runs them: the same run applied on both at once, conflicting runs
// applied on both at once, and servers killed with SIGKILL in the middle of an apply.

// pgToken is the token both servers are started with (STARPLAN_TOKEN): a client may call either.
const pgToken = "a-token-both-servers-share"

// pgServe is `starplan serve` (the built binary) on a PostgreSQL database, started by the test.
type pgServe struct {
	t     *testing.T
	name  string
	cmd   *exec.Cmd
	errb  *syncBuffer
	ended chan struct{} // closed once the process has exited
	base  string        // http://127.0.0.1:port
}

// startPGServe starts `starplan serve` on db and waits until it listens. It is killed when the
// test ends, if it is still running.
func startPGServe(t *testing.T, ctx context.Context, bin, db, name string) *pgServe {
	t.Helper()
	s := &pgServe{t: t, name: name, errb: &syncBuffer{}, ended: make(chan struct{})}
	s.cmd = exec.Command(bin, "--db", db, "serve", "--listen", "127.0.0.1:0")
	s.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "NO_COLOR=1", "STARPLAN_TOKEN=" + pgToken}
	s.cmd.Stdout, s.cmd.Stderr = s.errb, s.errb
	require.NoError(t, s.cmd.Start())
	go func() { _ = s.cmd.Wait(); close(s.ended) }()
	t.Cleanup(func() {
		select {
		case <-s.ended:
		default:
			_ = s.cmd.Process.Kill()
			<-s.ended
		}
	})
	listening := regexp.MustCompile(`listening on (http://[0-9.:]+)`)
	for {
		if m := listening.FindStringSubmatch(s.errb.String()); m != nil {
			s.base = m[1]
			return s
		}
		select {
		case <-s.ended:
			t.Fatalf("server %s exited before it listened (%s):\n%s", name, s.cmd.ProcessState, s.errb)
		case <-ctx.Done():
			t.Fatalf("server %s never listened:\n%s", name, s.errb)
		default:
			waitABit()
		}
	}
}

// kill ends the server with SIGKILL, as an OOM killer or a lost machine would, and waits for it.
func (s *pgServe) kill() {
	s.t.Helper()
	require.NoError(s.t, s.cmd.Process.Signal(syscall.SIGKILL))
	<-s.ended
	ws, _ := s.cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(s.t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "server %s ended by itself before the kill (%s):\n%s", s.name, s.cmd.ProcessState, s.errb)
}

// stop sends SIGTERM and checks that the server drains and exits 0.
func (s *pgServe) stop() {
	s.t.Helper()
	require.NoError(s.t, s.cmd.Process.Signal(syscall.SIGTERM))
	<-s.ended
	assert.Equal(s.t, 0, s.cmd.ProcessState.ExitCode(), "server %s exits 0 on SIGTERM:\n%s", s.name, s.errb)
}

// do sends a request with the shared token; the error is the transport's (a killed server's).
func (s *pgServe) do(ctx context.Context, method, path, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+pgToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// dryRun posts program as a run and returns its document, which must be pending.
func (s *pgServe) dryRun(ctx context.Context, program string) server.RunDocument {
	s.t.Helper()
	body, err := json.Marshal(server.RunRequest{Program: program})
	require.NoError(s.t, err)
	code, out, err := s.do(ctx, http.MethodPost, "/v1/runs", string(body))
	require.NoError(s.t, err)
	require.Equal(s.t, http.StatusOK, code, "%s", out)
	var doc server.RunDocument
	require.NoError(s.t, json.Unmarshal(out, &doc))
	require.Equal(s.t, server.StatePending, doc.State, "the dry run waits for apply: %s", out)
	return doc
}

// applied is one server's answer to an apply.
type applied struct {
	code int
	doc  server.RunDocument
	body string
}

// applyAtOnce applies runs[j] on servers[j], both released at the same moment.
func applyAtOnce(t *testing.T, ctx context.Context, servers [2]*pgServe, runs [2]server.RunDocument) [2]applied {
	var answers [2]applied
	var wg sync.WaitGroup
	start := make(chan struct{})
	for j, srv := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			code, doc, body, err := srv.apply(ctx, runs[j])
			assert.NoError(t, err)
			answers[j] = applied{code, doc, body}
		}()
	}
	close(start)
	wg.Wait()
	return answers
}

// apply applies run on s with its digest: the status and the document answered (zero for an
// error body).
func (s *pgServe) apply(ctx context.Context, run server.RunDocument) (int, server.RunDocument, string, error) {
	code, out, err := s.do(ctx, http.MethodPost, "/v1/runs/"+run.RunID+"/apply", `{"digest": "`+run.Digest+`"}`)
	var doc server.RunDocument
	if err == nil && (code == http.StatusOK || code == http.StatusConflict) {
		_ = json.Unmarshal(out, &doc)
	}
	return code, doc, string(out), err
}

// show returns run as s's GET /v1/runs/{id} answers it.
func (s *pgServe) show(ctx context.Context, id string) server.RunDocument {
	s.t.Helper()
	code, out, err := s.do(ctx, http.MethodGet, "/v1/runs/"+id, "")
	require.NoError(s.t, err)
	require.Equal(s.t, http.StatusOK, code, "%s", out)
	var doc server.RunDocument
	require.NoError(s.t, json.Unmarshal(out, &doc))
	return doc
}

// pgDB is the test's own connection to the database, to read what the servers committed.
type pgDB struct {
	t    *testing.T
	conn *pgx.Conn
}

func connectPG(t *testing.T, ctx context.Context, db string) *pgDB {
	t.Helper()
	conn, err := pgx.Connect(ctx, db)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return &pgDB{t: t, conn: conn}
}

// applies counts the audit log's hash-chain entries that record an apply of run: one per apply
// that committed (approved, or auto-approved by a rule).
func (d *pgDB) applies(ctx context.Context, run string) int {
	d.t.Helper()
	var n int
	require.NoError(d.t, d.conn.QueryRow(ctx, `SELECT count(*) FROM inventory._starplan_sys
		WHERE coll = 'audit_chain' AND json::jsonb->>'run_id' = $1 AND json::jsonb->>'event' IN ('approved', 'auto-approved')`, run).Scan(&n))
	return n
}

// stock is each item's quantity in stock.
func (d *pgDB) stock(ctx context.Context) map[string]int64 {
	d.t.Helper()
	rows, err := d.conn.Query(ctx, `SELECT item_id, quantity_in_stock FROM inventory.inventory`)
	require.NoError(d.t, err)
	m := map[string]int64{}
	for rows.Next() {
		var id string
		var q int64
		require.NoError(d.t, rows.Scan(&id, &q))
		m[id] = q
	}
	require.NoError(d.t, rows.Err())
	return m
}

// ledger is the transactions' summaries by key.
func (d *pgDB) ledger(ctx context.Context) map[string]string {
	d.t.Helper()
	rows, err := d.conn.Query(ctx, `SELECT transaction_id, coalesce(transaction_summary, '') FROM inventory.transactions`)
	require.NoError(d.t, err)
	m := map[string]string{}
	for rows.Next() {
		var id, s string
		require.NoError(d.t, rows.Scan(&id, &s))
		m[id] = s
	}
	require.NoError(d.t, rows.Err())
	return m
}

// twoServes makes an inventory store in a fresh database and starts two servers on it.
func twoServes(t *testing.T, ctx context.Context) (db, bin string, a, b *pgServe) {
	t.Helper()
	db = pgURL(t)
	bin = starplanBinary(t)
	s := &session{t: t, dir: filepath.Join(t.TempDir(), "unused"), db: db}
	o := s.run(false, "", "db", "init")
	require.Equal(t, ExitOK, o.code, o.err)
	return db, bin, startPGServe(t, ctx, bin, db, "A"), startPGServe(t, ctx, bin, db, "B")
}

// sellOne is a plan that sells one unit of the item named name (it reads the item and the
// ledger's last row, and writes both tables).
func sellOne(name string) string {
	return fmt.Sprintf(`item = inventory_tbl.get({"name": %q})
inventory_tbl.update({"quantity_in_stock": item["quantity_in_stock"] - 1}, {"item_id": item["item_id"]})
transactions_tbl.insert({
    "transaction_id": next_transaction_id(transactions_tbl),
    "customer_name": "Kim",
    "transaction_summary": "one %s",
    "transaction_amount": item["price"],
    "balance_after_transaction": get_current_balance(transactions_tbl) + item["price"],
    "timestamp": now(),
})
STATUS = "success"
answer_text = "Sold one %s."
`, name, name, name)
}

// The same run applied on A and on B at the same moment, several times: it is applied once —
// the row changed by one unit, one apply in the audit log's hash chain — and both servers answer
// with the one applied document (an apply of an applied run answers as the first did: applying
// is idempotent over HTTP), never a conflict or an error.
func TestTwoServesApplySameRunOnce(t *testing.T) {
	t.Parallel()
	ctx := deadline(t)
	db, _, a, b := twoServes(t, ctx)
	pg := connectPG(t, ctx, db)
	rounds := testtier.Size(3, 20) // the seed's 23 Aviators
	for i := range rounds {
		before := pg.stock(ctx)["SG001"]
		run := []*pgServe{a, b}[i%2].dryRun(ctx, sellOne("Aviator"))
		answers := applyAtOnce(t, ctx, [2]*pgServe{a, b}, [2]server.RunDocument{run, run})
		for j, ans := range answers {
			require.Equal(t, http.StatusOK, ans.code, "round %d, server %s: %s", i, "AB"[j:j+1], ans.body)
			assert.Equal(t, server.StateApplied, ans.doc.State, "round %d: %s", i, ans.body)
			require.NotNil(t, ans.doc.AppliedAt, "round %d: %s", i, ans.body)
		}
		assert.Equal(t, *answers[0].doc.AppliedAt, *answers[1].doc.AppliedAt, "round %d: both answer with the one apply's document", i)
		assert.Equal(t, before-1, pg.stock(ctx)["SG001"], "round %d: the row changed once", i)
		assert.Equal(t, 1, pg.applies(ctx, run.RunID), "round %d: one apply in the audit log, never two", i)
		for _, srv := range []*pgServe{a, b} {
			assert.Equal(t, server.StateApplied, srv.show(ctx, run.RunID).State, "round %d", i)
		}
	}
	a.stop()
	b.stop()
}

// Two runs that read and write the same row (one Aviator each, from the same stock and the same
// last ledger row), dry-run before either is applied, then applied at once, one on A and one on
// B, several times: exactly one is applied; the other is a conflict (409) that names the rows
// that moved, and wrote nothing.
func TestTwoServesConflictingRunsOneWins(t *testing.T) {
	t.Parallel()
	ctx := deadline(t)
	db, _, a, b := twoServes(t, ctx)
	pg := connectPG(t, ctx, db)
	rounds := testtier.Size(3, 10) // two Aviators a round at most, of 23
	for i := range rounds {
		before, ledger := pg.stock(ctx)["SG001"], len(pg.ledger(ctx))
		runs := []server.RunDocument{a.dryRun(ctx, sellOne("Aviator")), b.dryRun(ctx, sellOne("Aviator"))}
		answers := applyAtOnce(t, ctx, [2]*pgServe{a, b}, [2]server.RunDocument(runs))
		won := -1
		for j, ans := range answers {
			switch ans.code {
			case http.StatusOK:
				assert.Equal(t, server.StateApplied, ans.doc.State, "round %d: %s", i, ans.body)
				assert.Equal(t, -1, won, "round %d: both conflicting runs were applied", i)
				won = j
			case http.StatusConflict:
				assert.Equal(t, server.StateConflict, ans.doc.State, "round %d: %s", i, ans.body)
				assert.Equal(t, engine.OutcomeConflict, ans.doc.Outcome, "round %d", i)
				require.NotEmpty(t, ans.doc.Diagnostics, "round %d: %s", i, ans.body)
				var msgs []string
				for _, d := range ans.doc.Diagnostics {
					msgs = append(msgs, d.Message)
				}
				assert.Contains(t, strings.Join(msgs, "\n"), `inventory row "SG001" was changed after the run read it`, "round %d: the conflict names the row that moved", i)
				assert.Equal(t, 0, pg.applies(ctx, runs[j].RunID), "round %d: the conflicting run has no apply in the audit log", i)
			default:
				t.Fatalf("round %d: server %s answered %d: %s", i, "AB"[j:j+1], ans.code, ans.body)
			}
		}
		require.NotEqual(t, -1, won, "round %d: one of the runs is applied", i)
		assert.Equal(t, 1, pg.applies(ctx, runs[won].RunID), "round %d", i)
		assert.Equal(t, before-1, pg.stock(ctx)["SG001"], "round %d: one sale's stock", i)
		assert.Equal(t, ledger+1, len(pg.ledger(ctx)), "round %d: one sale's ledger row", i)
	}
	a.stop()
	b.stop()
}

// Both servers append to the one audit log's hash chain, which `starplan runs verify` then finds
// whole: a dry run on A applied on B, and one on B applied on A. Each server numbered entries
// from the head it kept in memory, so the second replaced the first's ("chain entry 3 does not
// link to entry 2 before it"); an entry is now written only where its number is free.
func TestTwoServesShareOneAuditChain(t *testing.T) {
	t.Parallel()
	ctx := deadline(t)
	db, bin, a, b := twoServes(t, ctx)
	for _, pair := range [][2]*pgServe{{a, b}, {b, a}} {
		run := pair[0].dryRun(ctx, sellOne("Aviator"))
		code, _, body, err := pair[1].apply(ctx, run)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, body)
	}
	verifyChain(t, bin, db)
	a.stop()
	b.stop()
}

// verifyChain runs `starplan runs verify` on db: the audit log's hash chain, which both servers
// appended to, holds.
func verifyChain(t *testing.T, bin, db string) {
	t.Helper()
	cmd := exec.Command(bin, "--db", db, "runs", "verify")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "NO_COLOR=1"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	assert.NoError(t, cmd.Run(), "starplan runs verify:\n%s", out.String())
}

// killItems are the items a kill round's run changes: three inventory rows and, for each, a new
// ledger row — six rows in two tables.
var killItems = []string{"SG001", "SG004", "SG005"}

// killPlan sells (sign 1) or takes back (sign -1) one unit of each of killItems, with a ledger
// row each whose summary names the round.
func killPlan(round, sign int) string {
	return fmt.Sprintf(`sign = %d
balance = get_current_balance(transactions_tbl)
n = int(next_transaction_id(transactions_tbl)[3:], 10)
for sku in %s:
    item = inventory_tbl.get({"item_id": sku})
    inventory_tbl.update({"quantity_in_stock": item["quantity_in_stock"] - sign}, {"item_id": sku})
    balance += item["price"] * sign
    transactions_tbl.insert({
        "transaction_id": "TXN" + format(n, "03d"),
        "customer_name": "Kim",
        "transaction_summary": "round %d " + sku,
        "transaction_amount": item["price"] * sign,
        "balance_after_transaction": balance,
        "timestamp": now(),
    })
    n += 1
STATUS = "success"
answer_text = "Done."
`, sign, pyList(killItems), round)
}

func pyList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// SIGKILL of a server in the middle of an apply, many times (8; 40 in the long tier). One round
// in three kills at a random moment, from before the request reaches the server to after the
// commit; the others while the apply is certainly inside its transaction, the test holding a
// lock it waits for: the tables' version rows (before it writes a row), or the run's record
// (after it wrote the rows, before the commit). The run writes six rows in two tables.
// After each kill, before anything else: the store holds the state before the run or after it,
// never a mix, and the run's record agrees (pending with the old rows, applied with the new).
// Then the same run, applied on the other server, is applied or answered as already applied,
// and the rows are the run's new state, once: no row changed twice, one apply in the audit log.
// The killed server is restarted each round, and the two swap roles.
func TestKillServerMidApply(t *testing.T) {
	t.Parallel()
	ctx := deadline(t)
	db, bin, a, b := twoServes(t, ctx)
	pg := connectPG(t, ctx, db)
	holder := connectPG(t, ctx, db) // holds a lock the apply waits for, in the rounds that kill inside its transaction
	kills := testtier.Size(8, 40)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	servers := []*pgServe{a, b}
	var spread time.Duration // how long an uncontested apply takes end to end, as last measured
	tally := map[string]int{}
	for i := range kills {
		victim, other := servers[i%2], servers[(i+1)%2]
		sign := 1 - 2*(i%2) // sell, then take back: the stock stays within bounds
		oldStock, oldLedger := pg.stock(ctx), pg.ledger(ctx)
		run := victim.dryRun(ctx, killPlan(i, sign))
		require.Equal(t, 2*len(killItems), run.ChangedRows, "round %d", i)

		// Where the kill falls: at a random moment, or (the test holding a lock the apply waits
		// for) inside the apply's transaction before it writes a row (the tables' version rows),
		// or after it wrote the rows and before it writes the run's record (the record's row).
		mode := []string{"at a random moment", "before the writes", "after the writes"}[i%3]
		var hold pgx.Tx
		if mode != "at a random moment" {
			var err error
			hold, err = holder.conn.Begin(ctx)
			require.NoError(t, err)
			lock := `SELECT * FROM inventory._starplan_tables FOR UPDATE`
			if mode == "after the writes" {
				lock = `SELECT * FROM inventory._starplan_sys WHERE coll = 'runs' AND id = $1 FOR UPDATE`
			}
			tag, err := hold.Exec(ctx, lock, pgxArgs(mode == "after the writes", run.RunID)...)
			require.NoError(t, err)
			require.Positive(t, tag.RowsAffected(), "round %d: the lock %s holds a row", i, lock)
		}
		done := make(chan error, 1)
		go func() {
			_, _, _, err := victim.apply(ctx, run)
			done <- err
		}()
		switch {
		case hold != nil:
			waitForLockWait(t, ctx, pg)
		case spread > 0:
			time.Sleep(time.Duration(rng.Int64N(int64(spread) * 5 / 4)))
		default:
			waitABit()
		}
		victim.kill()
		if err := <-done; err == nil {
			tally["answered before the kill"]++
		}
		if hold != nil {
			tally["killed "+mode]++
			require.NoError(t, hold.Rollback(ctx)) // the killed apply's transaction goes on, finds its client gone and ends
		}

		// Old or new, never mixed, and the record agrees.
		newStock, newLedger := pg.stock(ctx), pg.ledger(ctx)
		mine := 0
		for _, s := range newLedger {
			if strings.HasPrefix(s, fmt.Sprintf("round %d ", i)) {
				mine++
			}
		}
		changed := 0
		for _, sku := range killItems {
			switch newStock[sku] {
			case oldStock[sku]:
			case oldStock[sku] - int64(sign):
				changed++
			default:
				t.Fatalf("round %d: %s's stock went from %d to %d: the run changes it by %d, once", i, sku, oldStock[sku], newStock[sku], -sign)
			}
		}
		applied := changed == len(killItems) && mine == len(killItems) && len(newLedger) == len(oldLedger)+len(killItems)
		untouched := changed == 0 && mine == 0 && len(newLedger) == len(oldLedger)
		require.True(t, applied || untouched, "round %d: a mixed state after the kill: %d of %d stocks changed, %d of %d ledger rows written (%d rows before, %d after)",
			i, changed, len(killItems), mine, len(killItems), len(oldLedger), len(newLedger))
		state := other.show(ctx, run.RunID).State
		if applied {
			tally["killed after the commit"]++
			assert.Equal(t, server.StateApplied, state, "round %d: the rows are written, so the record says applied", i)
		} else {
			tally["killed before the commit"]++
			assert.Equal(t, server.StatePending, state, "round %d: nothing was written, so the run still waits", i)
		}

		// The other server applies it, or answers that it was applied; either way once.
		began := time.Now()
		code, doc, body, err := other.apply(ctx, run)
		require.NoError(t, err)
		if untouched {
			spread = time.Since(began) // the next unlocked round's kill falls within about this
		}
		require.Equal(t, http.StatusOK, code, "round %d: %s", i, body)
		assert.Equal(t, server.StateApplied, doc.State, "round %d: %s", i, body)
		stock := pg.stock(ctx)
		for _, sku := range killItems {
			assert.Equal(t, oldStock[sku]-int64(sign), stock[sku], "round %d: %s changed once", i, sku)
		}
		assert.Len(t, pg.ledger(ctx), len(oldLedger)+len(killItems), "round %d", i)
		assert.Equal(t, 1, pg.applies(ctx, run.RunID), "round %d: one apply in the audit log", i)
		if t.Failed() {
			t.FailNow()
		}
		servers[i%2] = startPGServe(t, ctx, bin, db, victim.name)
	}
	t.Logf("%d kills: %v", kills, tally)
	assert.Positive(t, tally["killed before the commit"], "some kills came before the commit")
	servers[0].stop()
	servers[1].stop()
}

// pgxArgs is args when with, else none.
func pgxArgs(with bool, args ...any) []any {
	if with {
		return args
	}
	return nil
}

// waitForLockWait waits until some backend waits for a lock on the tables' version rows: the
// apply is inside its transaction.
func waitForLockWait(t *testing.T, ctx context.Context, pg *pgDB) {
	t.Helper()
	for {
		var n int
		require.NoError(t, pg.conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`).Scan(&n))
		if n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the apply never waited for the tables' lock")
		default:
			waitABit()
		}
	}
}
