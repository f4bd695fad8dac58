package bolt

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/starplan/starplan/store"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/internal/testtier"
)

// A damaged file never makes Check or Open panic, whatever byte is damaged: db check once died
// with a Go stack from tx.Check's own goroutine after page 0's flags were zeroed. Positions are
// fixed (every 64th byte of the first pages, every page's header and body, and random bytes from
// a fixed seed), so a failure repeats. A panic on tx.Check's goroutine ends the test binary; any
// other fails the case. And the two agree: a store that Check finds sound opens.
func TestDamagedFilesNeverPanic(t *testing.T) {
	t.Parallel() // with the package's other long tests and its run on disk
	dir, _ := damagedStore(t, 40, func(b []byte) []byte { return b })
	s := openAt(t, dir)
	docs := make([]store.SysDoc, 20)
	for i := range docs {
		docs[i] = store.SysDoc{Collection: "runs", ID: fmt.Sprintf("r%02d", i), Value: map[string]string{"pad": fmt.Sprintf("%0300d", i)}}
	}
	require.NoError(t, s.PutSysDocs(bg, docs...))
	require.NoError(t, s.Close())
	orig, err := os.ReadFile(filepath.Join(dir, dbFileName))
	require.NoError(t, err)
	const page = 4096
	pages := len(orig) / page

	type damage struct {
		name string
		fn   func(b []byte)
	}
	var cases []damage
	xor := func(off int) damage {
		return damage{fmt.Sprintf("byte %d", off), func(b []byte) { b[off] ^= 0xFF }}
	}
	zero := func(what string, from, to int) damage {
		return damage{fmt.Sprintf("%s zeroed", what), func(b []byte) { clear(b[from:to]) }}
	}
	step := testtier.Size(256, 64)
	for off := 0; off < min(4*page, len(orig)); off += step {
		cases = append(cases, xor(off))
	}
	for p := range pages {
		cases = append(cases,
			zero(fmt.Sprintf("page %d's header", p), p*page, p*page+16),
			zero(fmt.Sprintf("page %d's flags", p), p*page+8, p*page+10),
			zero(fmt.Sprintf("page %d's body", p), p*page+16, (p+1)*page))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range testtier.Size(50, 150) {
		cases = append(cases, xor(rng.IntN(len(orig))))
	}

	for _, c := range cases {
		b := append([]byte(nil), orig...)
		c.fn(b)
		d := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(d, dbFileName), b, 0o644))
		var rep *store.CheckReport
		var checkErr, readErr error
		assert.NotPanics(t, func() { rep, checkErr = Check(d, store.CheckOptions{}) }, c.name)
		assert.NotPanics(t, func() {
			s, err := Open(d, Options{MustExist: true})
			if err == nil {
				_, err = s.ListSys("runs")
				s.Close()
			}
			readErr = err
		}, c.name)
		assert.NotPanics(t, func() {
			if s, err := Open(d, Options{}); err == nil {
				s.Close()
			}
		}, c.name)
		if checkErr == nil && rep.OK() && readErr != nil {
			t.Errorf("%s: db check finds nothing wrong, but reading fails: %v", c.name, readErr)
		}
		if readErr != nil && errors.Is(readErr, store.ErrNoStore) {
			t.Errorf("%s: a damaged file is reported as no store: %v", c.name, readErr)
		}
	}
}
