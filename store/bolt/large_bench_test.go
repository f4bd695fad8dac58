package bolt

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
)

// The large-store import target (issue 15) is carried by this benchmark, never by a test:
//
//	go test ./store/bolt -run '^$' -bench ImportLarge -benchtime 1x -count 3
//
// Importing 1,000,000 inventory rows from JSON into an empty store takes at most 12 s and at
// most 10 times the 100,000-row import, with the process's resident memory growing by at most
// 500 MiB while it runs.
//
// bbolt holds every page a transaction writes in memory until it commits, so one transaction of
// 1,000,000 of these rows held 2.9 GiB (issue 32); Import stages a large import into an empty
// table over several commits and makes it live by one small commit (staged.go), and meets the
// memory target so, as ImportBatches (sorted-batches) does by committing its batches.

var importLargeSizes = []int{100_000, 300_000, 1_000_000}

// BenchmarkImportLarge imports a JSON file of n generated inventory rows (benchItem) into a
// fresh store created empty (NoSeed), one store per iteration, in one atomic Import.
//
// Besides ns/op it reports, from Linux's /proc/self/status, peak-RSS-MiB: the highest resident
// set size of the process during the Import (VmHWM, whose peak is reset through
// /proc/self/clear_refs just before the Import starts, after a GC that returns free memory), and
// RSS-growth-MiB: that peak less the resident size just before the Import (the store is open and
// empty then, the file is on disk and not in memory). The figures are of the whole process, so
// they include the Go runtime's slack and the benchmark binary; they are 0 where /proc is missing.
// live-heap-after-MiB is the Go heap still live after the Import and a GC: mostly the imported
// table, which the store holds in memory (the floor under any import's peak). cpu-s/op is the
// processor time of the process during the Import (/proc/self/stat), which a loaded machine
// changes far less than ns/op.
func BenchmarkImportLarge(b *testing.B) {
	for _, n := range importLargeSizes {
		for _, order := range []string{"sorted", "shuffled"} {
			b.Run(fmt.Sprintf("rows=%d/order=%s", n, order), func(b *testing.B) { importLarge(b, n, order == "shuffled", 0) })
		}
		b.Run(fmt.Sprintf("rows=%d/order=sorted-batches", n), func(b *testing.B) { importLarge(b, n, false, largeImportBatch) })
	}
}

// largeImportBatch is the batch of the sorted-batches sub-benchmarks (ImportBatches), as the
// README suggests for large files.
const largeImportBatch = 20_000

// importLarge is one sub-benchmark of BenchmarkImportLarge: the file's rows in key order, or
// shuffled (each row lands between others, which must not cost rows × rows), imported in one
// commit or, when batch > 0, in commits of batch rows.
func importLarge(b *testing.B, n int, shuffled bool, batch int) {
	path := importLargeFile(b, n, shuffled)
	b.ResetTimer() // the file is written once per test binary run, outside the figure
	var peak, growth, live, cpu float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir := b.TempDir()
		s, err := Open(dir, Options{NoSeed: true})
		if err != nil {
			b.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		debug.FreeOSMemory()
		before := resetPeakRSS()
		cpuBefore := processCPU()
		b.StartTimer()
		var res ImportResult
		if batch > 0 {
			res, err = s.ImportBatches(bg, "inventory", f, JSON, batch)
		} else {
			res, err = s.Import(bg, "inventory", f, JSON, Upsert)
		}
		b.StopTimer()
		cpu += processCPU() - cpuBefore
		hwm := peakRSS()
		runtime.GC()
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(sample)
		live = max(live, float64(sample[0].Value.Uint64())/(1<<20))
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		if res.Inserted != n {
			b.Fatalf("inserted %d rows, want %d", res.Inserted, n)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		os.RemoveAll(dir)
		peak = max(peak, hwm)
		growth = max(growth, hwm-before)
		b.StartTimer()
	}
	b.ReportMetric(peak, "peak-RSS-MiB")
	b.ReportMetric(growth, "RSS-growth-MiB")
	b.ReportMetric(live, "live-heap-after-MiB")
	b.ReportMetric(cpu/float64(b.N), "cpu-s/op")
}

// importLargeFile writes a JSON array of n benchItem rows, one per line as Export writes them,
// once per test binary run, and returns its path.
func importLargeFile(b *testing.B, n int, shuffled bool) string {
	b.Helper()
	benchMu.Lock()
	defer benchMu.Unlock()
	if benchRoot == "" {
		var err error
		if benchRoot, err = os.MkdirTemp("", "starplan-bench-"); err != nil {
			b.Fatal(err)
		}
	}
	path := filepath.Join(benchRoot, fmt.Sprintf("import-%d-%v.json", n, shuffled))
	if _, err := os.Stat(path); err == nil {
		return path
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	rng := rand.New(rand.NewPCG(15, uint64(n)))
	ids := make([]int, n)
	for i := range ids {
		ids[i] = i + 1
	}
	if shuffled {
		rng.Shuffle(n, func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	}
	w.WriteString("[")
	for i, id := range ids {
		if i > 0 {
			w.WriteString(",")
		}
		line, err := json.Marshal(benchItem(rng, id))
		if err != nil {
			b.Fatal(err)
		}
		w.WriteString("\n  ")
		w.Write(line)
	}
	w.WriteString("\n]\n")
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return path
}

// resetPeakRSS resets the process's peak resident size (VmHWM) to its current size and returns
// that size in MiB.
func resetPeakRSS() float64 {
	os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	return procStatusMiB("VmRSS:")
}

// processCPU is the processor time the process has used (user and system, all threads), in
// seconds, from /proc/self/stat (0 where it is missing). On a machine that other work loads,
// an import's processor time varies far less than its wall time.
func processCPU() float64 {
	data, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(data, ')') // the command's name may hold spaces
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(data[i+1:])) // from field 3 (state) on
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return (utime + stime) / 100 // clock ticks: USER_HZ, 100 on Linux
}

// peakRSS is the process's peak resident size (VmHWM) in MiB.
func peakRSS() float64 { return procStatusMiB("VmHWM:") }

func procStatusMiB(field string) float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range bytes.Lines(data) {
		if rest, ok := bytes.CutPrefix(line, []byte(field)); ok {
			kb, err := strconv.ParseFloat(string(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte(" kB"))), 64)
			if err != nil {
				return 0
			}
			return kb / 1024
		}
	}
	return 0
}
