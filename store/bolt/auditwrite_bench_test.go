package bolt

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/starplan/starplan/store"
	"github.com/stretchr/testify/require"
)

// roomDoc is a document that leaves room for the store's header before its JSON, as the
// engine's queued audit records do (store.RoomEncoded).
type roomDoc struct{ buf []byte }

func (d roomDoc) EncodeJSON() ([]byte, error) { return d.buf[store.SysDocRoom:], nil }
func (d roomDoc) EncodeJSONRoom() ([]byte, int, error) {
	return d.buf, store.SysDocRoom, nil
}

// BenchmarkAuditBatch is the store's side of the audit log's background write: batches of 256
// new records of about 5.7 KB (the size engine's BenchmarkDryRunStream reports as record-B),
// each with its index entry (ordered by time, in one group), and a chain entry and head per
// batch, each batch one PutSysDocs. It reports cpu-µs/record: the CPU of the writing thread
// (the store's encoding, index and digests, and bbolt's commit, its write and sync included),
// which is what the engine's audit-cpu-µs/run holds of the store.
//
//	go test ./store/bolt -run '^$' -bench AuditBatch -benchtime 20000x -count 6
func BenchmarkAuditBatch(b *testing.B) {
	s := openTemp(b)
	ctx := context.Background()
	body := `{"id":"%s","request":"` + strings.Repeat("I want to buy 3 pairs of classic sunglasses. ", 120) + `"}`
	const batch = 256
	seq := 0
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cpu time.Duration
	b.ResetTimer()
	for n := 0; n < b.N; n += batch {
		m := min(batch, b.N-n)
		docs := make([]store.SysDoc, 0, m+2)
		for i := range m {
			id := fmt.Sprintf("%012x%012x", n+i, 7)
			js := fmt.Sprintf(body, id)
			buf := append(make([]byte, store.SysDocRoom, store.SysDocRoom+len(js)), js...)
			at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(n+i) * time.Millisecond)
			docs = append(docs, store.SysDoc{Collection: "runs", ID: id, Value: roomDoc{buf},
				Index: &store.SysIndex{Order: at.Format("2006-01-02T15:04:05.000000000Z"), Group: "pending"}})
		}
		seq++
		docs = append(docs,
			store.SysDoc{Collection: "audit_chain", ID: fmt.Sprintf("%016d", seq), Value: map[string]any{"seq": seq}, Create: true},
			store.SysDoc{Collection: "audit_chain", ID: "head", Value: map[string]any{"seq": seq}})
		before := threadCPU()
		require.NoError(b, s.PutSysDocs(ctx, docs...))
		cpu += threadCPU() - before
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-µs/record")
}

// threadCPU is the CPU time the calling OS thread has used.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
