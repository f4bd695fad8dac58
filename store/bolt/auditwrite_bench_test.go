//go:build linux

package bolt

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/starplan/starplan/store"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// roomDoc is a document that leaves room for the store's header before its JSON, as the
// engine's queued audit records do (store.RoomEncoded).
type roomDoc struct{ buf []byte }

func (d roomDoc) EncodeJSON() ([]byte, error) { return d.buf[store.SysDocRoom:], nil }
func (d roomDoc) EncodeJSONRoom() ([]byte, int, error) {
	return d.buf, store.SysDocRoom, nil
}

// BenchmarkAuditBatch is the store's side of the audit log's background write: batches of 256
// new records (record=5.7KB: the size engine's BenchmarkDryRunStream reports as record-B; and
// half that), each with its index entry (ordered by time, in one group), and a chain entry and
// head per batch, each batch one PutSysDocs. It reports cpu-µs/record: the CPU of the writing
// thread (the store's encoding, index and digests, and bbolt's commit, its write and sync
// included), which is what the engine's audit-cpu-µs/run holds of the store. About half of it
// is the kernel's copy of the pages written into the file, which goes by whole pages: bbolt
// puts at least two values in a node of whole 4 KiB pages, so two records of up to about
// 1.9 KB take a page, of up to 3.9 KB two pages and of up to 5.9 KB three (strace: 6.9 KB
// written a record at 5.7KB, 4.8 KB at 2.8KB, index and commit included), and a record of
// half the size cost about four fifths. record=engine is a record of the engine's
// BenchmarkDryRunStream (its JSON compresses to half, where the repeated sentences of the others
// compress fifty-fold: it is the one to weigh an encoding or a codec with).
//
//	go test ./store/bolt -run '^$' -bench AuditBatch -benchtime 20000x -count 6
func BenchmarkAuditBatch(b *testing.B) {
	// A record of the engine's stream (testdata/audit_record.json), its run id made each record's.
	real, err := os.ReadFile(filepath.Join("testdata", "audit_record.json"))
	require.NoError(b, err)
	realBody := strings.Replace(string(real), "r_01a227809911f6404c2b8f71", "r_%s", 1)
	for _, size := range []struct {
		name string
		n    int // the request's sentences; 0: the engine's record
	}{{"5.7KB", 120}, {"2.8KB", 58}, {"engine", 0}} {
		b.Run("record="+size.name, func(b *testing.B) {
			s := openTemp(b)
			ctx := context.Background()
			body := `{"id":"%s","request":"` + strings.Repeat("I want to buy 3 pairs of classic sunglasses. ", size.n) + `"}`
			if size.n == 0 {
				body = realBody
			}
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
		})
	}
}

// threadCPU is the CPU time the calling OS thread has used, from its CPU clock (brought up to
// date when read; getrusage answers a running thread from its last tick or switch).
func threadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// BenchmarkBboltRecordLayout weighs, in bbolt alone, two layouts of the audit log's batches of
// 256 records of 5.8 KB: each record a value of its own (layout=each, as stored), or a batch's
// records one value (layout=segment, an index entry would name each record's offset). It
// reports cpu-µs/record, the process's CPU per record. A segment is written in one large write,
// which costs the kernel less per byte, but bbolt allocates each commit a fresh zeroed buffer
// the size of the segment and copies the segment into it, and that costs more than it saves
// (issue 32): the layout was not built.
//
//	go test ./store/bolt -run '^$' -bench BboltRecordLayout -benchtime 20000x -count 4
func BenchmarkBboltRecordLayout(b *testing.B) {
	const size, batch = 5800, 256
	rec := []byte(strings.Repeat("I want to buy 3 pairs of classic sunglasses. ", size/45+1)[:size])
	for _, layout := range []string{"each", "segment"} {
		b.Run("layout="+layout, func(b *testing.B) {
			db, err := bbolt.Open(filepath.Join(b.TempDir(), "db"), 0o600, nil)
			require.NoError(b, err)
			defer db.Close()
			var seg []byte
			c0 := processCPU()
			b.ResetTimer()
			for n := 0; n < b.N; n += batch {
				m := min(batch, b.N-n)
				require.NoError(b, db.Update(func(tx *bbolt.Tx) error {
					bk, err := tx.CreateBucketIfNotExists([]byte("records"))
					if err != nil {
						return err
					}
					bk.FillPercent = 1
					if layout == "segment" {
						seg = seg[:0]
						for range m {
							seg = append(seg, rec...)
						}
						return bk.Put(binary.BigEndian.AppendUint64(nil, uint64(n)), seg)
					}
					for i := range m {
						if err := bk.Put(binary.BigEndian.AppendUint64(nil, uint64(n+i)), rec); err != nil {
							return err
						}
					}
					return nil
				}))
			}
			b.ReportMetric((processCPU()-c0)*1e6/float64(b.N), "cpu-µs/record")
		})
	}
}
