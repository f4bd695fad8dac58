package engine_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/store/bolt"
)

// answer is the README's embedding snippet, verbatim (TestReadmeEmbeddingSnippet keeps the two
// the same): open a store, run a model's reply as a dry run, apply it if it was accepted.
func answer(ctx context.Context, dir, question, reply string) (*engine.Result, error) {
	st, err := bolt.Open(dir, bolt.Options{}) // clover on bbolt; seeded with the demo data when new
	if err != nil {
		return nil, err
	}
	defer st.Close()
	eng, err := engine.New(st, engine.Options{})
	if err != nil {
		return nil, err
	}
	defer eng.Close() // flushes the audit log; runs before st.Close

	res, err := eng.Run(ctx, engine.Request{Reply: reply, UserRequest: question})
	if err != nil || !res.Accepted() || !res.Pending {
		return res, err // rejected, or nothing to write: res says why
	}
	// A reviewer would look at res.Changes here. Apply is atomic; its outcome is "conflict" if
	// the data the run read moved since the dry run.
	return eng.Apply(ctx, res.RunID)
}

// Embedding starplan: a model's reply, run as a dry run against a new store, then applied.
func Example() {
	dir, _ := os.MkdirTemp("", "starplan-example-")
	defer os.RemoveAll(dir)

	reply := `Here is the plan:
<execute_python>
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
	res, err := answer(context.Background(), dir, "I'd like to buy 2 Aviator sunglasses", reply)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Outcome, res.Status, res.Applied, res.AnswerText)
	fmt.Println("stock:", res.Changes["inventory"].Updated[0].Before["quantity_in_stock"], "→", res.Changes["inventory"].Updated[0].After["quantity_in_stock"])
	// Output:
	// ok success true Done: 2 Aviator for $160.00.
	// stock: 23 → 21
}

// TestReadmeEmbeddingSnippet: the README's embedding snippet is answer, verbatim, so the snippet
// a new user copies compiles and is run by Example.
func TestReadmeEmbeddingSnippet(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	section, ok := strings.CutPrefix(string(readme[strings.Index(string(readme), "## Embedding\n"):]), "## Embedding\n\n```go\n")
	require.True(t, ok, "the README's Embedding section starts with a Go block")
	snippet := section[:strings.Index(section, "```")]
	src, err := os.ReadFile("example_test.go")
	require.NoError(t, err)
	assert.Contains(t, string(src), snippet, "README.md's embedding snippet and answer in engine/example_test.go differ: copy one to the other")
	assert.True(t, strings.HasPrefix(snippet, "func answer("), "the snippet is the whole function")
}
