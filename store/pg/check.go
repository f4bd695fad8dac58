package pg

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// CheckSysIndex is the check whose problems are documents of an indexed system collection
// without their index entry (as store/bolt names it).
const CheckSysIndex = "sysindex"

// Check reads the whole store in one snapshot and reports what is wrong: a table without its
// version row, a mapped table that no longer fits its domain table or lost a trigger or a
// column the store added (record), a row that does not read back or fit its table's schema, or whose _ord
// is not its key's (rows; another program's write, which the SQL constraints let through), a
// system document that is not JSON or that opts.Records refuses (system), a document of an
// indexed collection without its entry (sysindex), and, with opts.Invariants, the domain's rules
// over the committed rows (policy). opts.Domain and opts.LockTimeout are not used: the store was
// opened with its domain, and a snapshot waits for no one.
func (s *Store) Check(ctx context.Context, opts store.CheckOptions) (*store.CheckReport, error) {
	rep := &store.CheckReport{File: "postgres schema " + s.schema, Tables: []store.TableCount{}, Problems: []store.Problem{}}
	rows := table.ChangeSet{}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		// The store's size is what its schema's tables take on disk, indexes and TOAST included;
		// its last commit, the highest table version (every write gives its table a new one).
		if err := tx.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
			FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relkind IN ('r', 'm', 'p')`, s.schema).Scan(&rep.Size); err != nil {
			return err
		}
		for _, name := range s.names { // and the mapped tables, which live elsewhere
			if t := s.tables[name]; t.mapped && t.path[0] != s.schema {
				var n int64
				if err := tx.QueryRow(ctx, "SELECT pg_total_relation_size($1::regclass)", t.name).Scan(&n); err != nil {
					return err
				}
				rep.Size += n
			}
		}
		if err := s.checkAdopted(ctx, tx, rep); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(ver), 0)::bigint FROM "+ident(s.schema, verTable)).Scan(&rep.Seq); err != nil {
			return err
		}
		for _, name := range s.names {
			t := s.tables[name]
			var ver int64
			if err := tx.QueryRow(ctx, "SELECT ver FROM "+ident(s.schema, verTable)+" WHERE name = $1", name).Scan(&ver); err != nil {
				if !errors.Is(err, pgx.ErrNoRows) {
					return err
				}
				rep.Add(store.CheckRecord, name, "the table has no version row in %s: applies cannot lock it", verTable)
			}
			tc := &table.TableChanges{Key: t.s.Key, Inserted: []table.Row{}, Updated: []table.Update{}, Deleted: []table.Row{}}
			rows[name] = tc
			q, err := tx.Query(ctx, "SELECT "+t.sel+", t._ord FROM "+t.name+" t ORDER BY t._ord")
			if err != nil {
				return err
			}
			n := 0
			for q.Next() {
				vals, err := q.Values()
				if err != nil {
					q.Close()
					return err
				}
				n++
				r, err := t.decode(vals[:len(vals)-1])
				if err != nil {
					rep.Add(store.CheckRows, name, "a row does not read back: %v", err)
					continue
				}
				row, err := t.s.ValidateRow(r.row)
				if err != nil {
					rep.Add(store.CheckRows, name, "%v", err)
					continue
				}
				if ord, _ := vals[len(vals)-1].([]byte); !bytes.Equal(ord, ordKey(r.key)) {
					rep.Add(store.CheckRows, name, "row %s: its _ord is not its key's (a row written by another program must set it), so it sorts out of place", table.FormatValue(r.key))
				}
				tc.Inserted = append(tc.Inserted, row)
			}
			q.Close()
			if err := q.Err(); err != nil {
				return err
			}
			rep.Tables = append(rep.Tables, store.TableCount{Table: name, Rows: n})
		}
		q, err := tx.Query(ctx, "SELECT d.coll, d.id, d.json, d.ord IS NULL OR d.grp IS NULL, x.coll IS NOT NULL FROM "+ident(s.schema, sysTable)+" d LEFT JOIN "+ident(s.schema, sysIdxTable)+" x ON x.coll = d.coll ORDER BY d.coll, d.id")
		if err != nil {
			return err
		}
		defer q.Close()
		for q.Next() {
			var coll, id, raw string
			var noEntry, indexed bool
			if err := q.Scan(&coll, &id, &raw, &noEntry, &indexed); err != nil {
				return err
			}
			if !json.Valid([]byte(raw)) {
				rep.Add(store.CheckSystem, "", "system document %s/%s is not JSON", coll, id)
			} else if dec := opts.RecordIDs[coll]; dec != nil {
				if err := dec(id, []byte(raw)); err != nil {
					rep.Add(store.CheckSystem, "", "system document %s/%s: %v", coll, id, err)
				}
			} else if dec := opts.Records[coll]; dec != nil {
				if err := dec([]byte(raw)); err != nil {
					rep.Add(store.CheckSystem, "", "system document %s/%s: %v", coll, id, err)
				}
			}
			if indexed && noEntry {
				rep.Add(CheckSysIndex, "", "system document %s/%s of the indexed collection %s has no index entry", coll, id, coll)
			}
		}
		return q.Err()
	})
	if err != nil {
		return nil, err
	}
	if opts.Invariants != nil {
		msgs, err := opts.Invariants(s.domain, rows)
		if err != nil {
			rep.Add(store.CheckRecord, "", "the domain's rules do not load, so they were not checked against the rows: %v", err)
			return rep, nil
		}
		for _, msg := range msgs {
			rep.Add(store.CheckPolicy, "", "%s", msg)
		}
	}
	return rep, nil
}
