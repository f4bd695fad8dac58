package bolt

import (
	"errors"
	"fmt"
	"testing"

	"github.com/starplan/starplan/table"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// viewHarness is what the conformance suite needs from an implementation: a fresh view over the
// demo data (six items SG001-SG006, one transaction TXN001), and the view's change set.
type viewHarness struct {
	open    func(t *testing.T) table.View
	changes func(v table.View) table.ChangeSet
	// other opens a second, independent view over the same committed data.
	other func(v table.View) table.View
}

// TestStageConformance runs the View/Table behaviour suite against Stage over a real
// clover-on-disk store.
func TestStageConformance(t *testing.T) {
	testView(t, viewHarness{
		open: func(t *testing.T) table.View {
			return openTemp(t).Stage()
		},
		changes: func(v table.View) table.ChangeSet { return v.(*Stage).ChangeSet() },
		other:   func(v table.View) table.View { return v.(*Stage).st.Stage() },
	})
}

func testView(t *testing.T, h viewHarness) {
	t.Run("Names", func(t *testing.T) {
		v := h.open(t)
		assert.Equal(t, []string{"inventory", "transactions"}, v.Names())
		_, ok := v.Table("nope")
		assert.False(t, ok)
		inv := tbl(t, v, "inventory")
		assert.Equal(t, "item_id", inv.Schema().Key)
	})

	t.Run("FindAllInKeyOrder", func(t *testing.T) {
		inv := tbl(t, h.open(t), "inventory")
		assert.Equal(t, 6, inv.Len())
		rows := find(t, inv, table.Query{})
		assert.Equal(t, []any{"SG001", "SG002", "SG003", "SG004", "SG005", "SG006"}, keys(t, rows, "item_id"))
		assert.Equal(t, "Aviator", rows[0]["name"])
		assert.Equal(t, int64(23), rows[0]["quantity_in_stock"])
		assert.Equal(t, 80.0, rows[0]["price"])
		rows = find(t, inv, table.Query{Reverse: true, Limit: 2})
		assert.Equal(t, []any{"SG006", "SG005"}, keys(t, rows, "item_id"))
		rows = find(t, inv, table.Query{Limit: 1})
		assert.Equal(t, []any{"SG001"}, keys(t, rows, "item_id"))
	})

	t.Run("NaturalKeyOrderWithOwnInserts", func(t *testing.T) {
		tx := tbl(t, h.open(t), "transactions")
		for _, id := range []string{"TXN010", "TXN0009", "TXN100", "TXN002"} {
			_, err := tx.Insert(txnRow(id, 1))
			require.NoError(t, err)
		}
		rows := find(t, tx, table.Query{})
		assert.Equal(t, []any{"TXN001", "TXN002", "TXN0009", "TXN010", "TXN100"}, keys(t, rows, "transaction_id"))
		rows = find(t, tx, table.Query{Reverse: true})
		assert.Equal(t, []any{"TXN100", "TXN010", "TXN0009", "TXN002", "TXN001"}, keys(t, rows, "transaction_id"))
		rows = find(t, tx, table.Query{Reverse: true, Limit: 2})
		assert.Equal(t, []any{"TXN100", "TXN010"}, keys(t, rows, "transaction_id"))
	})

	t.Run("WhereEquality", func(t *testing.T) {
		inv := tbl(t, h.open(t), "inventory")
		rows := find(t, inv, table.Query{Where: where("name", "Aviator"), Limit: 1})
		require.Len(t, rows, 1)
		assert.Equal(t, "SG001", rows[0]["item_id"])
		rows = find(t, inv, table.Query{Where: where("quantity_in_stock", 10)})
		assert.Equal(t, []any{"SG005", "SG006"}, keys(t, rows, "item_id"))
		rows = find(t, inv, table.Query{Where: where("quantity_in_stock", 10), Reverse: true})
		assert.Equal(t, []any{"SG006", "SG005"}, keys(t, rows, "item_id"))
		rows = find(t, inv, table.Query{Where: where("price", 80)}) // an int finds the float 80.0
		assert.Equal(t, []any{"SG001"}, keys(t, rows, "item_id"))
		rows = find(t, inv, table.Query{Where: where("item_id", "SG004")})
		assert.Equal(t, []any{"SG004"}, keys(t, rows, "item_id"))
		rows = find(t, inv, table.Query{Where: where("name", "aviator")})
		assert.Empty(t, rows, "plain equality is exact")
		rows = find(t, inv, table.Query{Where: where("name", "Aviator", "price", 95)})
		assert.Empty(t, rows, "every key must hold")
	})

	t.Run("WhereOperators", func(t *testing.T) {
		inv := tbl(t, h.open(t), "inventory")
		rows := find(t, inv, table.Query{Where: where("price", map[string]any{"$lt": 100}, "quantity_in_stock", map[string]any{"$gt": 5})})
		assert.Equal(t, []any{"SG001", "SG002", "SG005"}, keys(t, rows, "item_id"))
		rows = find(t, inv, table.Query{Where: where("$or", []any{where("name", "Moon"), where("name", map[string]any{"$ieq": "sport"})})})
		assert.Equal(t, []any{"SG004", "SG006"}, keys(t, rows, "item_id"))
	})

	t.Run("WhereErrors", func(t *testing.T) {
		inv := tbl(t, h.open(t), "inventory")
		_, err := inv.Find(table.Query{Where: where("nmae", "Aviator")})
		var qe *table.QueryError
		require.ErrorAs(t, err, &qe)
		assert.Equal(t, "name", qe.Suggestion)
		_, err = inv.Count(table.Query{Where: where("price", map[string]any{"$lte_": 3})})
		assert.ErrorAs(t, err, &qe)
		_, err = inv.Update(table.Row{"price": 1.0}, table.Query{Where: where("prise", 1)})
		assert.ErrorAs(t, err, &qe)
		_, err = inv.Remove(table.Query{Where: where("prise", 1)})
		assert.ErrorAs(t, err, &qe)
	})

	t.Run("IndexAgreesWithScan", func(t *testing.T) {
		v := h.open(t)
		inv := tbl(t, v, "inventory")
		// Make the overlay interesting: a new row, a changed row, a removed row.
		_, err := inv.Insert(table.Row{"name": "Aviator", "quantity_in_stock": 10, "price": 80})
		require.NoError(t, err)
		_, err = inv.Update(table.Row{"name": "Aviator"}, table.Query{Where: where("item_id", "SG003")})
		require.NoError(t, err)
		_, err = inv.Update(table.Row{"quantity_in_stock": 11}, table.Query{Where: where("item_id", "SG005")})
		require.NoError(t, err)
		_, err = inv.Remove(table.Query{Where: where("item_id", "SG006")})
		require.NoError(t, err)
		all := find(t, inv, table.Query{})
		for _, w := range []map[string]any{
			where("name", "Aviator"),
			where("quantity_in_stock", 10),
			where("quantity_in_stock", 11),
			where("price", 80.0),
			where("price", 120),
			where("item_id", "SG006"),
			where("item_id", "SG007"),
			where("name", "Aviator", "quantity_in_stock", 10),
			where("$and", []any{where("name", "Aviator"), where("price", map[string]any{"$gte": 75})}),
			where("name", map[string]any{"$eq": "Wayfarer"}),
		} {
			m, err := table.Compile(inv.Schema(), w)
			require.NoError(t, err)
			var want []any
			for _, r := range all {
				if m.Match(r) {
					want = append(want, r["item_id"])
				}
			}
			got := keys(t, find(t, inv, table.Query{Where: w}), "item_id")
			if want == nil {
				want = []any{}
			}
			assert.Equal(t, want, got, "where %v", w)
			n, err := inv.Count(table.Query{Where: w})
			require.NoError(t, err)
			assert.Equal(t, len(want), n, "count where %v", w)
		}
	})

	t.Run("MatchRunsAfterWhere", func(t *testing.T) {
		inv := tbl(t, h.open(t), "inventory")
		var seen []any
		rows := find(t, inv, table.Query{
			Where: where("quantity_in_stock", map[string]any{"$gte": 10}),
			Match: func(r table.Row) (bool, error) {
				seen = append(seen, r["item_id"])
				return r["price"].(float64) > 100, nil
			},
		})
		assert.Equal(t, []any{"SG001", "SG004", "SG005", "SG006"}, seen)
		assert.Equal(t, []any{"SG004", "SG006"}, keys(t, rows, "item_id"))
		rows = find(t, inv, table.Query{Match: func(r table.Row) (bool, error) { return true, nil }, Limit: 2, Reverse: true})
		assert.Equal(t, []any{"SG006", "SG005"}, keys(t, rows, "item_id"))
		boom := errors.New("boom")
		_, err := inv.Find(table.Query{Match: func(table.Row) (bool, error) { return false, boom }})
		assert.ErrorIs(t, err, boom)
		_, err = inv.Count(table.Query{Match: func(table.Row) (bool, error) { return false, boom }})
		assert.ErrorIs(t, err, boom)
		_, err = inv.Update(table.Row{"price": 1}, table.Query{Match: func(table.Row) (bool, error) { return false, boom }})
		assert.ErrorIs(t, err, boom)
	})

	t.Run("MatchMayCallBack", func(t *testing.T) {
		// A plan's lambda may use the table inside a query (the view must not hold a lock
		// across the callback).
		v := h.open(t)
		inv := tbl(t, v, "inventory")
		rows := find(t, inv, table.Query{Match: func(r table.Row) (bool, error) {
			n, err := inv.Count(table.Query{Where: where("price", map[string]any{"$lt": r["price"]})})
			return n == 0, err
		}})
		assert.Equal(t, []any{"SG005"}, keys(t, rows, "item_id"))
	})

	t.Run("Get", func(t *testing.T) {
		inv := tbl(t, h.open(t), "inventory")
		row, ok, err := inv.Get("SG002")
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, "Wayfarer", row["name"])
		_, ok, err = inv.Get("SG999")
		require.NoError(t, err)
		assert.False(t, ok)
		_, _, err = inv.Get(int64(2))
		var qe *table.QueryError
		assert.ErrorAs(t, err, &qe, "an int is not a key of a string key field")
	})

	t.Run("InsertAndGeneratedKeys", func(t *testing.T) {
		v := h.open(t)
		tx := tbl(t, v, "transactions")
		row := txnRow("", 80)
		delete(row, "transaction_id")
		k, err := tx.Insert(row)
		require.NoError(t, err)
		assert.Equal(t, "TXN002", k)
		k, err = tx.Insert(row)
		require.NoError(t, err)
		assert.Equal(t, "TXN003", k, "generated from the highest visible number, own inserts included")
		row["customer_name"] = "changed after insert"
		got, ok, err := tx.Get("TXN003")
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, "Alice", got["customer_name"], "the caller's map is copied")
		assert.Equal(t, 3, tx.Len())
		n, err := tx.Count(table.Query{Where: where("customer_name", "Alice")})
		require.NoError(t, err)
		assert.Equal(t, 2, n)

		// Removing the highest key makes its number free again, as next_transaction_id does.
		_, err = tx.Remove(table.Query{Where: where("transaction_id", "TXN003")})
		require.NoError(t, err)
		k, err = tx.Insert(row)
		require.NoError(t, err)
		assert.Equal(t, "TXN003", k)

		inv := tbl(t, v, "inventory")
		k, err = inv.Insert(table.Row{"name": "Cat Eye", "quantity_in_stock": 4, "price": 85})
		require.NoError(t, err)
		assert.Equal(t, "SG007", k)
		got, _, _ = inv.Get("SG007")
		assert.Equal(t, 85.0, got["price"], "an int for a float field is stored as float64")
		assert.Nil(t, got["description"], "every declared field is present")
		assert.Contains(t, got, "description")
	})

	t.Run("InsertRejections", func(t *testing.T) {
		inv := tbl(t, h.open(t), "inventory")
		_, err := inv.Insert(table.Row{"item_id": "SG001", "name": "Dup", "quantity_in_stock": 1, "price": 1})
		var fe *table.FieldError
		require.ErrorAs(t, err, &fe)
		assert.Contains(t, fe.Rule, "duplicate key")
		assert.Equal(t, "SG001", fe.Key)

		_, err = inv.Insert(table.Row{"name": "Neg", "quantity_in_stock": -1, "price": 1})
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, "quantity_in_stock", fe.Field)
		assert.Equal(t, -1, fe.Value)
		assert.Contains(t, fe.Rule, ">= 0")

		_, err = inv.Insert(table.Row{"name": "X", "quantity": 1, "price": 1})
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, "quantity", fe.Field)
		assert.Contains(t, fe.Rule, `did you mean "quantity_in_stock"`)
		assert.Equal(t, 6, inv.Len(), "a rejected insert stages nothing")
	})

	t.Run("InsertAfterRemoveOfSameKey", func(t *testing.T) {
		inv := tbl(t, h.open(t), "inventory")
		n, err := inv.Remove(table.Query{Where: where("item_id", "SG002")})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		_, err = inv.Insert(table.Row{"item_id": "SG002", "name": "Wayfarer II", "quantity_in_stock": 1, "price": 99})
		require.NoError(t, err)
		rows := find(t, inv, table.Query{})
		assert.Equal(t, []any{"SG001", "SG002", "SG003", "SG004", "SG005", "SG006"}, keys(t, rows, "item_id"))
		assert.Equal(t, "Wayfarer II", rows[1]["name"])
	})

	t.Run("Update", func(t *testing.T) {
		v := h.open(t)
		inv := tbl(t, v, "inventory")
		before, _, _ := inv.Get("SG001")
		n, err := inv.Update(table.Row{"quantity_in_stock": 20}, table.Query{Where: where("name", "Aviator")})
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		after, _, _ := inv.Get("SG001")
		assert.Equal(t, int64(20), after["quantity_in_stock"])
		assert.Equal(t, int64(23), before["quantity_in_stock"], "rows handed out earlier never change")
		assert.Equal(t, "Aviator", after["name"], "fields not given are kept")

		n, err = inv.Update(table.Row{"quantity_in_stock": 20}, table.Query{Where: where("name", "Aviator")})
		require.NoError(t, err)
		assert.Equal(t, 1, n, "a row already holding the values still counts as matched")

		n, err = inv.Update(table.Row{"price": 61.5}, table.Query{Where: where("quantity_in_stock", 10)})
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		n, err = inv.Update(table.Row{"price": 1}, table.Query{Where: where("quantity_in_stock", 10), Limit: 1})
		require.NoError(t, err)
		assert.Equal(t, 1, n, "Limit bounds an update")
		n, err = inv.Update(table.Row{"price": 1}, table.Query{Where: where("name", "Nope")})
		require.NoError(t, err)
		assert.Equal(t, 0, n)

		other := tbl(t, h.other(v), "inventory")
		row, _, _ := other.Get("SG001")
		assert.Equal(t, int64(23), row["quantity_in_stock"], "another view sees only committed data")
	})

	t.Run("UpdateRejections", func(t *testing.T) {
		v := h.open(t)
		inv := tbl(t, v, "inventory")
		var fe *table.FieldError
		_, err := inv.Update(table.Row{"item_id": "SG100"}, table.Query{Where: where("name", "Aviator")})
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, "item_id", fe.Field)
		assert.Contains(t, fe.Rule, "key")

		_, err = inv.Update(table.Row{"quantity_in_stock": 2.5}, table.Query{})
		require.ErrorAs(t, err, &fe)
		assert.Contains(t, fe.Rule, "whole number")

		_, err = inv.Update(table.Row{"prise": 2}, table.Query{Where: where("name", "Nope")})
		require.ErrorAs(t, err, &fe, "unknown fields are rejected even when nothing matches")
		assert.Contains(t, fe.Rule, `did you mean "price"`)

		// All or nothing: SG003 (stock 3) would go negative, so SG001 must not change either.
		_, err = inv.Update(table.Row{"quantity_in_stock": -1}, table.Query{})
		require.ErrorAs(t, err, &fe)
		row, _, _ := inv.Get("SG001")
		assert.Equal(t, int64(23), row["quantity_in_stock"])
		assert.Empty(t, h.changes(v).Tables())

		tx := tbl(t, h.open(t), "transactions")
		_, err = tx.Update(table.Row{"timestamp": "yesterday"}, table.Query{})
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, "timestamp", fe.Field)
		assert.Contains(t, fe.Rule, "ISO-8601")
	})

	t.Run("Remove", func(t *testing.T) {
		inv := tbl(t, h.open(t), "inventory")
		n, err := inv.Remove(table.Query{Where: where("quantity_in_stock", map[string]any{"$lt": 10})})
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		assert.Equal(t, 4, inv.Len())
		_, ok, _ := inv.Get("SG002")
		assert.False(t, ok)
		assert.Equal(t, []any{"SG001", "SG004", "SG005", "SG006"}, keys(t, find(t, inv, table.Query{}), "item_id"))
		n, err = inv.Remove(table.Query{Where: where("item_id", "SG002")})
		require.NoError(t, err)
		assert.Equal(t, 0, n)
	})

	t.Run("ChangeSet", func(t *testing.T) {
		v := h.open(t)
		inv := tbl(t, v, "inventory")
		tx := tbl(t, v, "transactions")
		assert.True(t, h.changes(v).Empty())

		_, err := inv.Update(table.Row{"quantity_in_stock": 21, "price": 80.0}, table.Query{Where: where("item_id", "SG001")})
		require.NoError(t, err)
		_, err = inv.Remove(table.Query{Where: where("item_id", "SG003")})
		require.NoError(t, err)
		_, err = tx.Insert(txnRow("TXN002", 160))
		require.NoError(t, err)
		// No-ops leave no trace: insert then remove, update and back.
		_, err = tx.Insert(txnRow("TXN003", 1))
		require.NoError(t, err)
		_, err = tx.Remove(table.Query{Where: where("transaction_id", "TXN003")})
		require.NoError(t, err)
		_, err = inv.Update(table.Row{"price": 1}, table.Query{Where: where("item_id", "SG004")})
		require.NoError(t, err)
		_, err = inv.Update(table.Row{"price": 110}, table.Query{Where: where("item_id", "SG004")})
		require.NoError(t, err)

		cs := h.changes(v)
		assert.Equal(t, []string{"inventory", "transactions"}, cs.Tables())
		assert.Equal(t, 3, cs.Rows())
		ic := cs["inventory"]
		assert.Equal(t, "item_id", ic.Key)
		require.Len(t, ic.Updated, 1)
		u := ic.Updated[0]
		assert.Equal(t, "SG001", u.Key)
		assert.Equal(t, []string{"quantity_in_stock"}, u.Fields)
		assert.Equal(t, int64(23), u.Before["quantity_in_stock"])
		assert.Equal(t, int64(21), u.After["quantity_in_stock"])
		require.Len(t, ic.Deleted, 1)
		assert.Equal(t, "Mystique", ic.Deleted[0]["name"])
		assert.Empty(t, ic.Inserted)
		tc := cs["transactions"]
		require.Len(t, tc.Inserted, 1)
		assert.Equal(t, "TXN002", tc.Inserted[0]["transaction_id"])
		assert.Equal(t, 160.0, tc.Inserted[0]["transaction_amount"])
	})
}

func txnRow(id string, amount float64) table.Row {
	return table.Row{
		"transaction_id":            id,
		"customer_name":             "Alice",
		"transaction_summary":       fmt.Sprintf("bought for %v", amount),
		"transaction_amount":        amount,
		"balance_after_transaction": 500 + amount,
		"timestamp":                 "2025-01-02T10:00:00",
	}
}
