package contracts_test

import (
	"fmt"

	"github.com/starplan/starplan/contracts"
	"github.com/starplan/starplan/table"
)

// A plan for "3 Classic and 1 Aviator" that records the whole order as one transaction.
func ExampleDomain_Check() {
	d, err := contracts.Load("inventory")
	if err != nil {
		panic(err)
	}
	classic := table.Row{"item_id": "SG005", "quantity_in_stock": int64(10), "price": 60.0}
	aviator := table.Row{"item_id": "SG001", "quantity_in_stock": int64(23), "price": 80.0}
	diags, err := d.Check(contracts.Input{
		Globals: map[string]any{"STATUS": "success", "answer_text": "Order placed: 3 Classic and 1 Aviator for $260.00."},
		Changes: table.ChangeSet{
			"inventory": {Key: "item_id", Updated: []table.Update{
				{Key: "SG001", Before: aviator, After: table.Row{"item_id": "SG001", "quantity_in_stock": int64(22), "price": 80.0}, Fields: []string{"quantity_in_stock"}},
				{Key: "SG005", Before: classic, After: table.Row{"item_id": "SG005", "quantity_in_stock": int64(7), "price": 60.0}, Fields: []string{"quantity_in_stock"}},
			}},
			"transactions": {Key: "transaction_id", Inserted: []table.Row{
				{"transaction_id": "TXN002", "transaction_amount": 260.0, "balance_after_transaction": 760.0},
			}},
		},
		Committed: contracts.LastRows{"transactions": {"transaction_id": "TXN001", "balance_after_transaction": 500.0}},
	})
	if err != nil {
		panic(err)
	}
	for _, dg := range diags {
		fmt.Println(dg.Code)
		fmt.Println(" ", dg.Message)
		fmt.Println("  try:", dg.Hint)
	}
	// Output:
	// ledger-whole-order
	//   new transactions row "TXN002" has transaction_amount 260.00, the total of 2 items ("SG001" 80.00 + "SG005" 180.00) in one row; each item gets exactly one row of its own
	//   try: insert one transactions row per item instead: "SG001" 80.00, "SG005" 180.00
}
