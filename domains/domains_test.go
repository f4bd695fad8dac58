package domains_test

import (
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/domains"
)

// inventoryWords are what only the inventory domain knows: its tables, fields, keys and wares.
var inventoryWords = regexp.MustCompile(`(?i)inventory|transactions|quantity_in_stock|balance_after_transaction|transaction_id|item_id|\bTXN|\bSG0|sunglass|aviator|wayfarer`)

// The inventory domain is its directory: no Go code of the engine, the builtins, the prompt or
// the contracts names anything in it (comments may, as examples). A new domain therefore needs
// no Go either.
func TestNoInventoryGoOutsideItsDirectory(t *testing.T) {
	for _, pkg := range []string{"engine", "builtins", "prompts", "contracts"} {
		err := filepath.WalkDir(filepath.Join("..", pkg), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			require.NoError(t, err)
			var s scanner.Scanner
			fset := token.NewFileSet()
			s.Init(fset.AddFile(path, -1, len(src)), src, nil, 0) // comments are skipped
			for {
				pos, tok, lit := s.Scan()
				if tok == token.EOF {
					break
				}
				if (tok == token.STRING || tok == token.IDENT) && inventoryWords.MatchString(lit) {
					assert.Fail(t, "inventory in Go", "%s: %s", fset.Position(pos), lit)
				}
			}
			return nil
		})
		require.NoError(t, err)
	}
}

// Every built-in domain is reachable by name, and an unknown name is not.
func TestBuiltin(t *testing.T) {
	assert.Equal(t, []string{domains.Inventory, domains.Library}, domains.Names())
	for _, name := range domains.Names() {
		dir, ok := domains.Builtin(name)
		require.True(t, ok, name)
		b, err := fs.ReadFile(dir, "domain.json")
		require.NoError(t, err)
		assert.Contains(t, string(b), `"name": "`+name+`"`)
	}
	_, ok := domains.Builtin("garden")
	assert.False(t, ok)
	_, ok = domains.Builtin(".")
	assert.False(t, ok)
}
