package pg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/starplan/starplan/store"
)

// System documents live in one table, _starplan_sys: (coll, id) → the document's JSON as text
// (its bytes as written: the audit log's hash chain depends on them), and, for a collection
// with an ordered index, the document's order and group, indexed by (coll, ord, id) and
// (coll, grp, ord, id) (collation "C": byte order, as Go compares). A collection's index is
// current when _starplan_sysidx names it: made by the first indexed write of an empty
// collection or by RebuildSysIndex. Every write keeps it (all in one transaction), so it never
// goes stale; a write without an entry to such a collection is refused.

func sysName(coll string) error {
	if !store.ValidName(coll) {
		return fmt.Errorf("system collection name %q: must be a letter followed by letters, digits or _", coll)
	}
	return nil
}

// PutSys stores v (as JSON) under id in the system collection coll, replacing any document
// with that id.
func (s *Store) PutSys(ctx context.Context, coll, id string, v any) error {
	return s.PutSysDocs(ctx, store.SysDoc{Collection: coll, ID: id, Value: v})
}

// PutSysDocs stores several system documents in one transaction.
func (s *Store) PutSysDocs(ctx context.Context, docs ...store.SysDoc) error {
	if len(docs) == 0 {
		return nil
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return s.putSysTx(ctx, tx, docs) })
}

// putSysTx writes docs in tx, keeping their collections' indexes.
func (s *Store) putSysTx(ctx context.Context, tx pgx.Tx, docs []store.SysDoc) error {
	ready := map[string]bool{}
	for _, d := range docs {
		if err := sysName(d.Collection); err != nil {
			return err
		}
		raw, err := store.EncodeSys(d.Value)
		if err != nil {
			return fmt.Errorf("system document %s/%s: %w", d.Collection, d.ID, err)
		}
		r, known := ready[d.Collection]
		if !known {
			if r, err = s.sysIndexReadyTx(ctx, tx, d.Collection, d.Index != nil); err != nil {
				return err
			}
			ready[d.Collection] = r
		}
		var ord, grp any
		if d.Index != nil {
			if err := d.Index.Valid(); err != nil {
				return fmt.Errorf("system document %s/%s: %w", d.Collection, d.ID, err)
			}
			ord, grp = d.Index.Order, d.Index.Group
		} else if r {
			return fmt.Errorf("system collection %s keeps an index: its document %s must be written with its entry (SysDoc.Index)", d.Collection, d.ID)
		}
		onConflict := "DO UPDATE SET json = EXCLUDED.json, ord = EXCLUDED.ord, grp = EXCLUDED.grp"
		if d.Create {
			// Another transaction's insert of the id, uncommitted, makes this one wait for it.
			onConflict = "DO NOTHING"
		}
		tag, err := tx.Exec(ctx, "INSERT INTO "+ident(s.schema, sysTable)+" (coll, id, json, ord, grp) VALUES ($1, $2, $3, $4, $5) "+
			"ON CONFLICT (coll, id) "+onConflict, d.Collection, d.ID, string(raw), ord, grp)
		if err != nil {
			return fmt.Errorf("system document %s/%s: %w", d.Collection, d.ID, err)
		}
		if d.Create && tag.RowsAffected() == 0 {
			return fmt.Errorf("system document %s/%s: %w", d.Collection, d.ID, store.ErrSysExists)
		}
	}
	return nil
}

// sysIndexReadyTx reports whether coll's index is current, making it when create is set and the
// collection is empty. It locks the collection's index row, so that two first writes agree.
func (s *Store) sysIndexReadyTx(ctx context.Context, tx pgx.Tx, coll string, create bool) (bool, error) {
	var n int
	err := tx.QueryRow(ctx, "SELECT 1 FROM "+ident(s.schema, sysIdxTable)+" WHERE coll = $1 FOR SHARE", coll).Scan(&n)
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return false, err
	}
	if !create {
		return false, nil
	}
	var has bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+ident(s.schema, sysTable)+" WHERE coll = $1)", coll).Scan(&has); err != nil {
		return false, err
	}
	if has {
		return false, nil // a collection written without entries: RebuildSysIndex makes its index
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+ident(s.schema, sysIdxTable)+" (coll) VALUES ($1) ON CONFLICT DO NOTHING", coll); err != nil {
		return false, err
	}
	return true, nil
}

// GetSys decodes the document id of coll into v, reporting whether it exists.
func (s *Store) GetSys(coll, id string, v any) (bool, error) {
	if err := sysName(coll); err != nil {
		return false, err
	}
	var raw string
	err := s.pool.QueryRow(context.Background(), "SELECT json FROM "+ident(s.schema, sysTable)+" WHERE coll = $1 AND id = $2", coll, id).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read system document %s/%s: %w", coll, id, err)
	}
	if err := json.Unmarshal([]byte(raw), v); err != nil {
		return true, &store.DamagedError{Path: s.schema, Problem: fmt.Sprintf("system document %s/%s does not decode: %v", coll, id, err), Err: err}
	}
	return true, nil
}

// ListSys returns every document of coll, sorted by id.
func (s *Store) ListSys(coll string) ([]store.SysRecord, error) {
	if err := sysName(coll); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(context.Background(), "SELECT id, json FROM "+ident(s.schema, sysTable)+" WHERE coll = $1 ORDER BY id", coll)
	if err != nil {
		return nil, fmt.Errorf("list system collection %s: %w", coll, err)
	}
	return collectRecords(rows)
}

func collectRecords(rows pgx.Rows) ([]store.SysRecord, error) {
	defer rows.Close()
	out := []store.SysRecord{}
	for rows.Next() {
		var id, raw string
		if err := rows.Scan(&id, &raw); err != nil {
			return nil, err
		}
		out = append(out, store.SysRecord{ID: id, JSON: json.RawMessage(raw)})
	}
	return out, rows.Err()
}

// PruneSys removes, in one transaction, every document of coll for which drop returns true,
// and the documents of the same id in the collections with.
func (s *Store) PruneSys(ctx context.Context, coll string, drop func(store.SysRecord) (bool, error), with ...string) (store.SysPruned, error) {
	return s.pruneSys(ctx, store.SysPrune{Coll: coll, Drop: drop, With: with}, false)
}

// PruneSysOldest is PruneSys offering drop only the documents whose index Order sorts before
// p.Before, after p.After, up to p.Max removals, when coll has a current index, and writing
// p.Then's documents in the same transaction. The rows are read as they come (locked FOR
// UPDATE), so the transaction holds the ids it removes, not every record before the cut.
func (s *Store) PruneSysOldest(ctx context.Context, p store.SysPrune) (store.SysPruned, error) {
	if p.Before == "" {
		return store.SysPruned{}, nil
	}
	return s.pruneSys(ctx, p, true)
}

func (s *Store) pruneSys(ctx context.Context, p store.SysPrune, oldest bool) (store.SysPruned, error) {
	var out store.SysPruned
	if err := sysName(p.Coll); err != nil {
		return out, err
	}
	for _, w := range p.With {
		if err := sysName(w); err != nil {
			return out, err
		}
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		out = store.SysPruned{}
		sql := "SELECT id, json, coalesce(ord, '') FROM " + ident(s.schema, sysTable) + " WHERE coll = $1"
		args := []any{p.Coll}
		order := " ORDER BY id"
		if oldest {
			ready, err := s.sysIndexReadyTx(ctx, tx, p.Coll, false)
			if err != nil {
				return err
			}
			if ready {
				sql += " AND ord < $2"
				args = append(args, p.Before)
				if p.After != "" {
					ord, id, _ := strings.Cut(p.After, "\x00")
					sql += " AND (ord, id) > ($3, $4)"
					args = append(args, ord, id)
				}
				order = " ORDER BY ord, id"
			} else {
				oldest = false // pruned whole: After and Max do not apply
			}
		}
		rows, err := tx.Query(ctx, sql+order+" FOR UPDATE", args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id, raw, ord string
			if err := rows.Scan(&id, &raw, &ord); err != nil {
				return err
			}
			ok, err := p.Drop(store.SysRecord{ID: id, JSON: json.RawMessage(raw)})
			if err != nil {
				return err
			}
			if ok {
				out.IDs = append(out.IDs, id)
				out.Bytes += int64(len(raw))
			}
			if oldest {
				out.Cursor = ord + "\x00" + id
				if p.Max > 0 && len(out.IDs) >= p.Max {
					out.More = true
					break
				}
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(out.IDs) == 0 {
			return nil
		}
		var n int64
		err = tx.QueryRow(ctx, "WITH d AS (DELETE FROM "+ident(s.schema, sysTable)+" WHERE coll = ANY($1) AND id = ANY($2) AND NOT (coll = $3) RETURNING octet_length(json) AS b) SELECT coalesce(sum(b), 0) FROM d",
			p.With, out.IDs, p.Coll).Scan(&n)
		if err != nil {
			return err
		}
		out.Bytes += n
		if _, err = tx.Exec(ctx, "DELETE FROM "+ident(s.schema, sysTable)+" WHERE coll = $1 AND id = ANY($2)", p.Coll, out.IDs); err != nil {
			return err
		}
		slices.Sort(out.IDs)
		if p.Then == nil {
			return nil
		}
		after, err := p.Then(slices.Clone(out.IDs))
		if err != nil {
			return err
		}
		remove := map[string][]string{}
		var colls []string
		for _, k := range after.Remove {
			if err := sysName(k.Collection); err != nil {
				return err
			}
			if _, ok := remove[k.Collection]; !ok {
				colls = append(colls, k.Collection)
			}
			remove[k.Collection] = append(remove[k.Collection], k.ID)
		}
		for _, c := range colls {
			if _, err := tx.Exec(ctx, "DELETE FROM "+ident(s.schema, sysTable)+" WHERE coll = $1 AND id = ANY($2)", c, remove[c]); err != nil {
				return err
			}
		}
		if len(after.Put) == 0 {
			return nil
		}
		return s.putSysTx(ctx, tx, after.Put)
	})
	if err != nil {
		return store.SysPruned{}, err
	}
	return out, nil
}

// RebuildSysIndex builds coll's ordered index afresh from index's entry for each document, in
// one transaction, and returns how many it indexed.
func (s *Store) RebuildSysIndex(ctx context.Context, coll string, index func(store.SysRecord) (store.SysIndex, error)) (int, error) {
	if err := sysName(coll); err != nil {
		return 0, err
	}
	n := 0
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		n = 0
		if _, err := tx.Exec(ctx, "INSERT INTO "+ident(s.schema, sysIdxTable)+" (coll) VALUES ($1) ON CONFLICT DO NOTHING", coll); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "SELECT id, json FROM "+ident(s.schema, sysTable)+" WHERE coll = $1 ORDER BY id FOR UPDATE", coll)
		if err != nil {
			return err
		}
		docs, err := collectRecords(rows)
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		for _, d := range docs {
			x, err := index(d)
			if err != nil {
				return err
			}
			if err := x.Valid(); err != nil {
				return fmt.Errorf("system document %s/%s: %w", coll, d.ID, err)
			}
			b.Queue("UPDATE "+ident(s.schema, sysTable)+" SET ord = $3, grp = $4 WHERE coll = $1 AND id = $2", coll, d.ID, x.Order, x.Group)
			n++
		}
		return tx.SendBatch(ctx, b).Close()
	})
	return n, err
}

// SysIndexReady reports whether coll has a current index.
func (s *Store) SysIndexReady(coll string) (bool, error) {
	if err := sysName(coll); err != nil {
		return false, err
	}
	var n int
	err := s.pool.QueryRow(context.Background(), "SELECT 1 FROM "+ident(s.schema, sysIdxTable)+" WHERE coll = $1", coll).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// SysStats returns the count and bytes of each group of the indexed coll, or ErrNoSysIndex.
func (s *Store) SysStats(coll string) (map[string]store.SysGroup, error) {
	if ready, err := s.SysIndexReady(coll); err != nil || !ready {
		if err == nil {
			err = store.ErrNoSysIndex
		}
		return nil, err
	}
	rows, err := s.pool.Query(context.Background(), "SELECT grp, count(*), coalesce(sum(octet_length(json)), 0) FROM "+ident(s.schema, sysTable)+" WHERE coll = $1 GROUP BY grp", coll)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]store.SysGroup{}
	for rows.Next() {
		var grp *string
		var g store.SysGroup
		var n, b int64
		if err := rows.Scan(&grp, &n, &b); err != nil {
			return nil, err
		}
		if grp == nil {
			return nil, &store.DamagedError{Path: s.schema, Problem: fmt.Sprintf("the indexed system collection %s holds documents without an index entry", coll)}
		}
		g.Count, g.Bytes = int(n), b
		out[*grp] = g
	}
	return out, rows.Err()
}

// scanPage is how many index entries ScanSys reads from the database at a time.
const scanPage = 256

// ScanSys walks coll's index in order (opts), reading the documents opts.Next takes, in one
// snapshot (a REPEATABLE READ read-only transaction), or returns ErrNoSysIndex.
func (s *Store) ScanSys(coll string, opts store.SysScan) ([]store.SysEntry, error) {
	if err := sysName(coll); err != nil {
		return nil, err
	}
	ctx := context.Background()
	var out []store.SysEntry
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		out = nil
		var n int
		if err := tx.QueryRow(ctx, "SELECT 1 FROM "+ident(s.schema, sysIdxTable)+" WHERE coll = $1", coll).Scan(&n); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return store.ErrNoSysIndex
			}
			return err
		}
		cmp, dir := ">", "ASC"
		if opts.Reverse {
			cmp, dir = "<", "DESC"
		}
		var afterOrd, afterID string
		after := opts.After != ""
		if after {
			i := strings.IndexByte(opts.After, 0)
			if i < 0 {
				return fmt.Errorf("scan %s: the cursor %q is not one a scan returned", coll, opts.After)
			}
			afterOrd, afterID = opts.After[:i], opts.After[i+1:]
		}
		for {
			sql := "SELECT id, ord, grp FROM " + ident(s.schema, sysTable) + " WHERE coll = $1"
			args := []any{coll}
			if opts.Group != "" {
				args = append(args, opts.Group)
				sql += fmt.Sprintf(" AND grp = $%d", len(args))
			} else {
				sql += " AND ord IS NOT NULL"
			}
			if after {
				args = append(args, afterOrd, afterID)
				sql += fmt.Sprintf(" AND (ord, id) %s ($%d, $%d)", cmp, len(args)-1, len(args))
			}
			sql += fmt.Sprintf(" ORDER BY ord %s, id %s LIMIT %d", dir, dir, scanPage)
			rows, err := tx.Query(ctx, sql, args...)
			if err != nil {
				return err
			}
			var page []store.SysEntry
			for rows.Next() {
				var e store.SysEntry
				var ord, grp *string
				if err := rows.Scan(&e.ID, &ord, &grp); err != nil {
					rows.Close()
					return err
				}
				if ord == nil || grp == nil {
					rows.Close()
					return &store.DamagedError{Path: s.schema, Problem: fmt.Sprintf("the indexed system collection %s holds document %s without an index entry", coll, e.ID)}
				}
				e.Order, e.Group = *ord, *grp
				e.Cursor = e.Order + "\x00" + e.ID
				page = append(page, e)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			var taken []int
			more := true
			for i := range page {
				take, goOn := opts.Next(page[i])
				if take {
					taken = append(taken, i)
				}
				if !goOn {
					page = page[:i+1]
					more = false
					break
				}
			}
			if len(taken) > 0 {
				ids := make([]string, len(taken))
				for j, i := range taken {
					ids[j] = page[i].ID
				}
				docs, err := tx.Query(ctx, "SELECT id, json FROM "+ident(s.schema, sysTable)+" WHERE coll = $1 AND id = ANY($2)", coll, ids)
				if err != nil {
					return err
				}
				recs, err := collectRecords(docs)
				if err != nil {
					return err
				}
				byID := make(map[string]json.RawMessage, len(recs))
				for _, r := range recs {
					byID[r.ID] = r.JSON
				}
				for _, i := range taken {
					e := page[i]
					e.JSON = byID[e.ID]
					out = append(out, e)
				}
			}
			if !more || len(page) < scanPage {
				return nil
			}
			last := page[len(page)-1]
			after, afterOrd, afterID = true, last.Order, last.ID
		}
	})
	return out, err
}

// sysLocks holds the store's locks on system collections (LockSys): PostgreSQL session advisory
// locks, on a connection of their own outside the pool, so that a process waiting for the lock
// holds none of the pool's connections (the holder's writes need them), and a process that dies
// releases its lock with its connection. One holder at a time in a process.
type sysLocks struct {
	mu   sync.Mutex // held from LockSys to its unlock
	conn *pgx.Conn  // nil until the first lock, and after a failure
}

// LockSys holds a lock on the system collection coll across every process on the store's
// schema until unlock is called (store.SysSerializer): the audit log's hash chain takes it
// around each append.
func (s *Store) LockSys(ctx context.Context, coll string) (unlock func(), err error) {
	if err := sysName(coll); err != nil {
		return nil, err
	}
	l := &s.locks
	l.mu.Lock()
	if l.conn == nil {
		if l.conn, err = pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy()); err != nil {
			l.conn = nil
			l.mu.Unlock()
			return nil, fmt.Errorf("connecting for the lock on %s: %w", coll, err)
		}
	}
	key := s.schema + "/" + coll
	if _, err := l.conn.Exec(ctx, "SELECT pg_advisory_lock(hashtext('starplan'), hashtext($1))", key); err != nil {
		l.drop()
		l.mu.Unlock()
		return nil, fmt.Errorf("locking %s: %w", coll, err)
	}
	return func() {
		// A lock that cannot be released is released by closing its connection.
		if _, err := l.conn.Exec(context.Background(), "SELECT pg_advisory_unlock(hashtext('starplan'), hashtext($1))", key); err != nil {
			l.drop()
		}
		l.mu.Unlock()
	}, nil
}

// drop closes the lock connection (its locks go with it); l.mu is held.
func (l *sysLocks) drop() {
	if l.conn != nil {
		_ = l.conn.Close(context.Background())
		l.conn = nil
	}
}

// close closes the lock connection when no lock is held.
func (l *sysLocks) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drop()
}

var _ store.SysSerializer = (*Store)(nil)
