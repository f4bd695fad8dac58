package engine_test

import (
	"context"
	"fmt"
	"os"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/store"
)

// Embedding starplan: open a store, run a model's reply as a dry run, review, apply.
func Example() {
	dir, _ := os.MkdirTemp("", "starplan-example-")
	defer os.RemoveAll(dir)
	st, err := store.Open(dir, store.Options{}) // a new store is seeded with the demo data
	if err != nil {
		panic(err)
	}
	defer st.Close()
	eng, err := engine.New(st, engine.Options{})
	if err != nil {
		panic(err)
	}
	defer eng.Close() // flushes the audit log; runs before st.Close

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
	ctx := context.Background()
	res, err := eng.Run(ctx, engine.Request{Reply: reply, UserRequest: "I'd like to buy 2 Aviator sunglasses"})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Outcome, res.Status, res.Pending, res.AnswerText)
	fmt.Println("stock:", res.Changes["inventory"].Updated[0].Before["quantity_in_stock"], "→", res.Changes["inventory"].Updated[0].After["quantity_in_stock"])

	res, err = eng.Apply(ctx, res.RunID)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Outcome, res.Applied)
	// Output:
	// ok success true Done: 2 Aviator for $160.00.
	// stock: 23 → 21
	// ok true
}
