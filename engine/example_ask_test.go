package engine_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/llm"
	"github.com/starplan/starplan/store/bolt"
)

// cannedModel is a model of one's own: anything with Complete is an engine.Model, so a planner
// with its own client (another SDK, a local model, a cache of plans) hands it to Ask as it is.
// This one writes its first plan with a Python-only try block, and fixes it when Ask sends the
// diagnostics back.
type cannedModel struct{ calls int }

func (m *cannedModel) Complete(_ context.Context, msgs []llm.Message) (llm.Reply, error) {
	m.calls++
	plan := `item = inventory_tbl.get({"name": {"$ieq": "wayfarer"}})
STATUS = "success"
answer_text = f"We have {item['quantity_in_stock']} Wayfarer in stock."`
	if m.calls == 1 {
		plan = "try:\n    " + strings.ReplaceAll(plan, "\n", "\n    ") + "\nexcept:\n    pass"
	}
	return llm.Reply{Content: "<execute_python>\n" + plan + "\n</execute_python>", Model: "canned"}, nil
}

// Ask with one's own model: the engine writes the system prompt, runs each reply in the sandbox
// and sends a failed plan back with its diagnostics.
func ExampleEngine_Ask() {
	dir, _ := os.MkdirTemp("", "starplan-example-")
	defer os.RemoveAll(dir)
	st, err := bolt.Open(dir, bolt.Options{})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	eng, err := engine.New(st, engine.Options{})
	if err != nil {
		panic(err)
	}
	defer eng.Close()

	res, err := eng.Ask(context.Background(), &cannedModel{}, engine.AskRequest{Question: "How many Wayfarer do you have?"})
	if err != nil {
		panic(err)
	}
	for _, a := range res.Attempts {
		var codes []string
		for _, d := range a.Diagnostics {
			codes = append(codes, d.Code)
		}
		fmt.Println("attempt:", a.Outcome, codes)
	}
	fmt.Println(res.Status, res.AnswerText)
	// Output:
	// attempt: check_failed [python-try python-try]
	// attempt: ok []
	// success We have 6 Wayfarer in stock.
}
