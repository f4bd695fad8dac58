package isolate_test

import (
	"context"
	"fmt"
	"os"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/isolate"
	"github.com/starplan/starplan/store/bolt"
)

// Isolated runs for an embedder: the program re-executes itself as its sandbox workers. In a
// real program, isolate.ServeWorkerIfAsked() is the first line of main; here the test binary's
// TestMain calls it.
func ExampleNewSelfPool() {
	pool, err := isolate.NewSelfPool(isolate.Options{Warm: 1})
	if err != nil {
		panic(err)
	}
	defer pool.Close() // after the engine

	dir, _ := os.MkdirTemp("", "starplan-example-")
	defer os.RemoveAll(dir)
	st, err := bolt.Open(dir, bolt.Options{})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	eng, err := engine.New(st, engine.Options{Runner: pool})
	if err != nil {
		panic(err)
	}
	defer eng.Close()

	res, err := eng.Run(context.Background(), engine.Request{Reply: `s = "x" * (1 << 40)`})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Outcome, res.Limit) // the worker's memory limit stopped it, not the parent
	// Output: limit_exceeded memory
}
