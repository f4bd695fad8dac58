package pg

import (
	"testing"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/internal/pgtest"
	"github.com/starplan/starplan/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sellTwoAviators is the README's embedding example's reply.
const sellTwoAviators = `<execute_python>
item = inventory_tbl.get({"name": "Aviator"})
if item is None or item["quantity_in_stock"] < 2:
    STATUS = "insufficient_stock"
    answer_text = "Sorry, we don't have 2 Aviator in stock."
else:
    amount = item["price"] * 2
    inventory_tbl.update({"quantity_in_stock": item["quantity_in_stock"] - 2}, {"item_id": item["item_id"]})
    transactions_tbl.insert({
        "transaction_id": next_transaction_id(transactions_tbl),
        "customer_name": "Walk-in customer",
        "transaction_summary": "Purchase of 2 x Aviator",
        "transaction_amount": amount,
        "balance_after_transaction": get_current_balance(transactions_tbl) + amount,
        "timestamp": now(),
    })
    STATUS = "success"
    answer_text = f"Done: 2 Aviator for ${amount:.2f}."
</execute_python>`

// The engine runs on a PostgreSQL store as on bbolt: a dry run on one server (engine and store),
// reviewed and applied on another, once; the audit log is in the database for both.
func TestEngineDryRunHereApplyThere(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	sa, err := Create(bg, dsn, store.Inventory(), Options{})
	require.NoError(t, err)
	defer sa.Close()
	sb, err := Open(bg, dsn, Options{})
	require.NoError(t, err)
	defer sb.Close()
	a, err := engine.New(sa, engine.Options{})
	require.NoError(t, err)
	defer a.Close()
	b, err := engine.New(sb, engine.Options{})
	require.NoError(t, err)
	defer b.Close()

	res, err := a.Run(bg, engine.Request{Reply: sellTwoAviators, UserRequest: "2 Aviator please"})
	require.NoError(t, err)
	require.True(t, res.Accepted(), "%+v", res)
	require.True(t, res.Pending)
	require.NoError(t, a.Close()) // the audit log is flushed to the database

	applied, err := b.Apply(bg, res.RunID)
	require.NoError(t, err)
	assert.True(t, applied.Applied, "%+v", applied)
	assert.Equal(t, "Done: 2 Aviator for $160.00.", applied.AnswerText)

	again, err := b.Apply(bg, res.RunID)
	if err == nil {
		assert.False(t, again.Applied, "a run applies once")
	}
	row, ok, err := items2(t, sb, "inventory", "SG001")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, int64(21), row["quantity_in_stock"])
	runs, err := b.Runs()
	require.NoError(t, err)
	require.Len(t, runs, 1)
}

func items2(t *testing.T, st store.Store, tbl string, key any) (map[string]any, bool, error) {
	t.Helper()
	tb, ok := st.StageFor(bg, store.RunLimits{}).Table(tbl)
	require.True(t, ok)
	return tb.Get(key)
}

// The same run applied on two servers (engines on one database) at once, many times: the rows
// are written once, its record says applied, and the losing engine neither overwrites that
// record with a conflict nor answers other than a later apply would ("already applied").
func TestEngineSameRunAppliedOnTwoServersAtOnce(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	sa, err := Create(bg, dsn, store.Inventory(), Options{})
	require.NoError(t, err)
	defer sa.Close()
	sb, err := Open(bg, dsn, Options{})
	require.NoError(t, err)
	defer sb.Close()
	a, err := engine.New(sa, engine.Options{})
	require.NoError(t, err)
	defer a.Close()
	b, err := engine.New(sb, engine.Options{})
	require.NoError(t, err)
	defer b.Close()

	const rounds = 10 // the seed's 23 Aviators, 2 a run
	for i := range rounds {
		res, err := a.Run(bg, engine.Request{Reply: sellTwoAviators, UserRequest: "2 Aviator please"})
		require.NoError(t, err)
		require.True(t, res.Pending, "%+v", res)
		_, err = a.Record(res.RunID) // its record is in the database for b
		require.NoError(t, err)

		type answer struct {
			res *engine.Result
			err error
		}
		answers := make(chan answer, 2)
		start := make(chan struct{})
		for _, e := range []*engine.Engine{a, b} {
			go func() {
				<-start
				r, err := e.Apply(bg, res.RunID)
				answers <- answer{r, err}
			}()
		}
		close(start)
		applied := 0
		for range 2 {
			ans := <-answers
			if ans.err != nil {
				var re *engine.RunError
				require.ErrorAs(t, ans.err, &re, "round %d", i)
				assert.Contains(t, re.Problem, "was already applied", "round %d", i)
				continue
			}
			require.True(t, ans.res.Applied, "round %d: the loser answers already applied, never a conflict: %+v", i, ans.res)
			applied++
		}
		assert.Equal(t, 1, applied, "round %d", i)
		for _, e := range []*engine.Engine{a, b} {
			rec, err := e.Record(res.RunID)
			require.NoError(t, err)
			assert.True(t, rec.Applied, "round %d: the record says applied (%s)", i, rec.Outcome)
			assert.Empty(t, rec.ApplyError, "round %d", i)
		}
	}
	row, ok, err := items2(t, sb, "inventory", "SG001")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, int64(23-2*rounds), row["quantity_in_stock"], "each run sold once")
}
