package pg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// Pending returns the run's writes and reads in serializable form, as store/bolt's does
// (store.Pending's AddTable).
func (sg *Stage) Pending() *store.Pending {
	p := store.NewPending(sg.st.domain.Name)
	for _, name := range sg.st.names {
		t := sg.tables[name]
		preds, all, allVer := t.preds.Pending(name)
		p.AddTable(name, t.pendingWrites(), preds, all, allVer, t.reads)
	}
	return p
}

// pendingWrites is the run's final state of each row it wrote.
func (t *stageTable) pendingWrites() []store.PendingWrite {
	out := make([]store.PendingWrite, 0, len(t.writes))
	for _, w := range t.writes {
		out = append(out, store.PendingWrite{Table: t.s.Name, Key: w.key, Base: w.base, Before: w.before, Row: w.row})
	}
	return out
}

// op is one normalised write.
type op struct {
	t    *sqlTable
	key  any
	row  table.Row // nil: delete
	base int64
	cur  *rec // the committed row it replaces, read under the apply's locks
}

type readCheck struct {
	t    *sqlTable
	key  any
	all  bool
	ver  int64
	pred *store.PredCheck
}

// normalize checks p against the schemas (store.CheckPending).
func (s *Store) normalize(p *store.Pending) ([]op, []readCheck, error) {
	ws, rs, err := store.CheckPending(p, s.domain.Name, s.schemas, store.CheckPred)
	if err != nil {
		return nil, nil, err
	}
	ops := make([]op, len(ws))
	for i, w := range ws {
		ops[i] = op{t: s.tables[w.Schema.Name], key: w.Key, row: w.Row, base: w.Base}
	}
	reads := make([]readCheck, len(rs))
	for i, r := range rs {
		reads[i] = readCheck{t: s.tables[r.Schema.Name], key: r.Key, all: r.All, ver: r.Version, pred: r.Pred}
	}
	return ops, reads, nil
}

// maxApplyAttempts is how many times ApplyPending runs its transaction when PostgreSQL ends it
// for a deadlock or a serialization failure (with another program's writes), before it gives up.
const maxApplyAttempts = 5

// ApplyPending writes p's changes and the extra system documents in one transaction, after
// checking that every row p changed or read is still at the version it saw and that every
// predicate it read still finds what it found (a *store.ConflictError otherwise, and nothing
// is written), and after verify, which sees the change set and the committed state inside the
// transaction, under its locks.
//
// Locking (see doc.go): the transaction (READ COMMITTED) first locks, FOR UPDATE and in name
// order, the version row of every table p writes or reads; every apply, and every other
// program's statement that changes a domain table (its trigger bumps that row), takes the same
// row lock, so two applies that touch a table run one after the other, the second seeing the
// first's rows. It then locks the rows it replaces (FOR UPDATE) and the rows it read (FOR SHARE)
// and checks them; a predicate read is checked again only when its table's version moved.
func (s *Store) ApplyPending(ctx context.Context, p *store.Pending, verify store.Verify, extra ...store.SysDoc) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// The steps, timed when the caller asks (store.ApplySteps): each attempt's check (the first
	// from the start, the pending change's own check included; its BEGIN and lock waits), verify
	// and commit (the writes to the end of COMMIT).
	steps := store.ApplyStepsOf(ctx)
	began := steps.Begin()
	ops, reads, err := s.normalize(p)
	if err != nil {
		steps.Done(store.StepCheck, began, err)
		return err
	}
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			began = steps.Begin()
		}
		var commit time.Time // when the commit step began (zero: not reached, or not timed)
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			for i := range ops {
				ops[i].cur = nil
			}
			return s.applyTx(ctx, tx, ops, reads, verify, extra, steps, began, &commit)
		})
		if !commit.IsZero() {
			steps.Done(store.StepCommit, commit, err)
		}
		if attempt < maxApplyAttempts && retryable(err) {
			continue
		}
		return err
	}
}

// retryable reports whether err is PostgreSQL ending a transaction that may succeed when run
// again: a deadlock (with another program's writes) or a serialization failure.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// applyTx is one attempt of an apply in tx: the check, verify, the writes. steps times the
// check (begun at began) and verify, and *commit is set when the writes begin.
func (s *Store) applyTx(ctx context.Context, tx pgx.Tx, ops []op, reads []readCheck, verify store.Verify, extra []store.SysDoc,
	steps *store.ApplySteps, began time.Time, commit *time.Time) error {
	err := s.checkTx(ctx, tx, ops, reads)
	steps.Done(store.StepCheck, began, err)
	if err != nil {
		return err
	}
	if verify != nil {
		v := steps.Begin()
		err := verify(changeSet(ops), txReader{s: s, tx: tx, ctx: ctx})
		steps.Done(store.StepVerify, v, err)
		if err != nil {
			return err
		}
	}
	*commit = steps.Begin()
	if err := s.writeOps(ctx, tx, ops); err != nil {
		return err
	}
	return s.putSysTx(ctx, tx, extra)
}

// checkTx locks what the apply depends on and checks that none of it moved: a
// *store.ConflictError when some did.
func (s *Store) checkTx(ctx context.Context, tx pgx.Tx, ops []op, reads []readCheck) error {
	// The tables' version rows, locked in name order (the same order in every apply: no
	// deadlock between applies).
	touched := map[string]bool{}
	for _, o := range ops {
		touched[o.t.s.Name] = true
	}
	for _, r := range reads {
		touched[r.t.s.Name] = true
	}
	names := slices.Sorted(mapsKeysBool(touched))
	vers := map[string]int64{}
	if len(names) > 0 {
		rows, err := tx.Query(ctx, "SELECT name, ver FROM "+ident(s.schema, verTable)+" WHERE name = ANY($1) ORDER BY name FOR UPDATE", names)
		if err != nil {
			return fmt.Errorf("apply: lock the tables: %w", err)
		}
		for rows.Next() {
			var name string
			var ver int64
			if err := rows.Scan(&name, &ver); err != nil {
				rows.Close()
				return err
			}
			vers[name] = ver
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("apply: lock the tables: %w", err)
		}
	}
	if err := s.checkDefinition(ctx, tx); err != nil { // after the locks: an upgrade under way has committed
		return err
	}
	// The rows the writes replace, locked.
	byTable := map[*sqlTable][]int{}
	for i, o := range ops {
		byTable[o.t] = append(byTable[o.t], i)
	}
	for t, idx := range byTable {
		keys := make([]any, len(idx))
		for j, i := range idx {
			keys[j] = ops[i].key
		}
		rows, err := tx.Query(ctx, "SELECT "+t.sel+" FROM "+t.name+" t WHERE t."+t.col(t.s.Key)+" = ANY($1) FOR UPDATE", keyArray(t, keys))
		if err != nil {
			return fmt.Errorf("apply: read %s: %w", t.s.Name, err)
		}
		recs, err := t.scanRecs(rows)
		if err != nil {
			return fmt.Errorf("apply: read %s: %w", t.s.Name, err)
		}
		cur := make(map[any]*rec, len(recs))
		for _, r := range recs {
			cur[r.key] = r
		}
		for _, i := range idx {
			ops[i].cur = cur[ops[i].key]
		}
	}
	var conflicts []store.Conflict
	for _, o := range ops {
		if now := o.curVer(); now != o.base {
			conflicts = append(conflicts, store.Conflict{Table: o.t.s.Name, Key: o.key, Seen: o.base, Now: now})
		}
	}
	// The rows read, locked against other programs' writes until the commit.
	keyReads := map[*sqlTable][]readCheck{}
	for _, r := range reads {
		if r.pred == nil && !r.all {
			keyReads[r.t] = append(keyReads[r.t], r)
		}
	}
	for t, rs := range keyReads {
		keys := make([]any, len(rs))
		for i, r := range rs {
			keys[i] = r.key
		}
		rows, err := tx.Query(ctx, "SELECT "+t.keySel+", t._version FROM "+t.name+" t WHERE t."+t.col(t.s.Key)+" = ANY($1) FOR SHARE", keyArray(t, keys))
		if err != nil {
			return fmt.Errorf("apply: read %s: %w", t.s.Name, err)
		}
		now := map[any]int64{}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				rows.Close()
				return err
			}
			now[vals[0]] = vals[1].(int64)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, r := range rs {
			if now[r.key] != r.ver {
				conflicts = append(conflicts, store.Conflict{Table: t.s.Name, Key: r.key, Seen: r.ver, Now: now[r.key]})
			}
		}
	}
	var predConflicts []store.Conflict
	for _, r := range reads {
		now := vers[r.t.s.Name]
		switch {
		case r.all:
			if now != r.ver {
				conflicts = append(conflicts, store.Conflict{Table: r.t.s.Name, Seen: r.ver, Now: now})
			}
		case r.pred != nil:
			ok, err := holds(ctx, tx, r.pred, r.t, now)
			if err != nil {
				return fmt.Errorf("apply: %w", err)
			}
			if !ok {
				predConflicts = append(predConflicts, store.Conflict{Table: r.t.s.Name, Seen: r.ver, Now: now, Read: r.pred.Describe()})
			}
		}
	}
	conflicts = store.AddPredConflicts(conflicts, predConflicts)
	if len(conflicts) > 0 {
		return &store.ConflictError{Conflicts: conflicts}
	}
	return nil
}

func mapsKeysBool(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// keyArray is keys as the typed array the key column compares with.
func keyArray(t *sqlTable, keys []any) any {
	if t.s.KeyField.Type == table.TypeInt {
		out := make([]int64, len(keys))
		for i, k := range keys {
			out[i] = k.(int64)
		}
		return out
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.(string)
	}
	return out
}

func (o *op) curVer() int64 {
	if o.cur == nil {
		return 0
	}
	return o.cur.ver
}

// changeSet renders checked ops as the change set they make to the committed rows.
func changeSet(ops []op) table.ChangeSet {
	cs := table.ChangeSet{}
	for _, o := range ops {
		var before table.Row
		if o.cur != nil {
			before = o.cur.row
		}
		store.AddChange(cs, o.t.s, o.key, before, o.row)
	}
	return cs
}

// txReader is the Committed of a verify: it reads inside the apply's transaction.
type txReader struct {
	s   *Store
	tx  pgx.Tx
	ctx context.Context
}

func (r txReader) LastRow(tbl string) (table.Row, bool, error) {
	t := r.s.tables[tbl]
	if t == nil {
		return nil, false, fmt.Errorf("no table %s", tbl)
	}
	_, recs, err := t.fetch(r.ctx, r.tx, sqlRead{reverse: true, limit: 1, exact: true})
	if err != nil || len(recs) == 0 {
		return nil, false, err
	}
	return recs[0].row, true, nil
}

// writeOps writes checked ops in one round trip (a batch in tx). Versions come from the
// database: an insert's default, an update's trigger.
func (s *Store) writeOps(ctx context.Context, tx pgx.Tx, ops []op) error {
	if len(ops) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, o := range ops {
		t := o.t
		switch {
		case o.row == nil:
			b.Queue("DELETE FROM "+t.name+" WHERE "+t.col(t.s.Key)+" = $1", o.key)
		default:
			vals, err := t.values(o.row, o.cur == nil)
			if err != nil {
				return err
			}
			if o.cur == nil {
				b.Queue(t.insertSQL(), vals...)
			} else {
				b.Queue(t.updateSQL(), append(vals, o.key)...)
			}
		}
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("apply: write the rows: %w; nothing was written", err)
	}
	return nil
}

func (t *sqlTable) insertSQL() string {
	cols := make([]string, 0, len(t.cols)+1)
	ph := make([]string, 0, len(t.cols)+1)
	for i, c := range t.cols {
		cols = append(cols, t.col(c))
		ph = append(ph, fmt.Sprintf("$%d", i+1))
	}
	cols = append(cols, "_ord")
	ph = append(ph, fmt.Sprintf("$%d", len(t.cols)+1))
	return "INSERT INTO " + t.name + " (" + strings.Join(cols, ", ") + ") VALUES (" + strings.Join(ph, ", ") + ")"
}

func (t *sqlTable) updateSQL() string {
	set := make([]string, 0, len(t.cols))
	for i, c := range t.cols {
		set = append(set, fmt.Sprintf("%s = $%d", t.col(c), i+1))
	}
	return "UPDATE " + t.name + " SET " + strings.Join(set, ", ") + fmt.Sprintf(" WHERE %s = $%d", t.col(t.s.Key), len(t.cols)+1)
}
