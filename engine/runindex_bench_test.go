package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/store"
)

// BenchmarkListRuns is issue 26's target for the audit log: listing the newest run, and a page
// of pending runs, on a log of 20,000 records (of about 1.6 KB, as the reviewed store's were)
// costs what it costs on a log of one, within 2x:
//
//	go test ./engine -run '^$' -bench ListRuns -benchtime 2000x
func BenchmarkListRuns(b *testing.B) {
	for _, n := range []int{1, 100, 20_000} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			st := openStore(b, b.TempDir())
			b.Cleanup(func() { st.Close() })
			program := strings.Repeat("x = inventory_tbl.search({}) # a plan line\n", 30)
			var docs []store.SysDoc
			for i := range n {
				r := synthRecord(i)
				r.Program = program
				docs = append(docs, recordDoc(r, false))
				if len(docs) == 1000 || i == n-1 {
					require.NoError(b, st.PutSysDocs(context.Background(), docs...))
					docs = docs[:0]
				}
			}
			e, err := New(st, Options{})
			require.NoError(b, err)
			b.Cleanup(func() { e.Close() })
			for _, c := range []struct {
				name string
				opts ListOptions
			}{
				{"newest", ListOptions{Limit: 1}},
				{"pending20", ListOptions{State: StatePending, Limit: 20}},
			} {
				b.Run(c.name, func(b *testing.B) {
					for b.Loop() {
						page, err := e.ListRuns(c.opts)
						if err != nil || len(page.Runs) == 0 {
							b.Fatal(err, page)
						}
					}
				})
			}
		})
	}
}
