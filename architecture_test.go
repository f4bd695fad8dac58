package starplan

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/starplan/starplan"

// pkgInfo is what go list says of one package.
type pkgInfo struct {
	std     bool
	imports []string // direct
	deps    []string // direct and through others
}

// listPackages runs go list once over the module and its dependencies.
func listPackages(t *testing.T) map[string]*pkgInfo {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}|{{.Standard}}|{{join .Imports \",\"}}|{{join .Deps \",\"}}", "./...").Output()
	require.NoError(t, err)
	pkgs := map[string]*pkgInfo{}
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		require.Len(t, f, 4, line)
		pkgs[f[0]] = &pkgInfo{std: f[1] == "true", imports: split(f[2]), deps: split(f[3])}
	}
	return pkgs
}

// archRow is one row of ARCHITECTURE.md's package table.
type archRow struct {
	dirs     []string // `diag/`, `llm/llmtest/`, `cmd/starplan/`
	mustNot  string   // the last column, as written
	fileLine int
}

// readArchTable reads the package table of ARCHITECTURE.md.
func readArchTable(t *testing.T) []archRow {
	t.Helper()
	f, err := os.Open("ARCHITECTURE.md")
	require.NoError(t, err)
	defer f.Close()
	var rows []archRow
	inTable := false
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.HasPrefix(line, "| package | owns | must not import |") {
			inTable = true
			continue
		}
		if !inTable {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		if strings.HasPrefix(line, "|---") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		require.GreaterOrEqual(t, len(cells), 3, "ARCHITECTURE.md:%d", n)
		var dirs []string
		for _, m := range regexp.MustCompile("`([a-z0-9_/]+)/`").FindAllStringSubmatch(cells[0], -1) {
			dirs = append(dirs, m[1])
		}
		require.NotEmpty(t, dirs, "ARCHITECTURE.md:%d names no package", n)
		rows = append(rows, archRow{dirs: dirs, mustNot: strings.TrimSpace(cells[len(cells)-1]), fileLine: n})
	}
	require.NotEmpty(t, rows, "ARCHITECTURE.md has no package table")
	return rows
}

// forbidden is one entry of the last column: what it names, and whether only direct imports count.
type forbidden struct {
	word   string
	match  func(path string, info *pkgInfo) bool
	direct bool
}

// parseMustNot reads the last column with the vocabulary ARCHITECTURE.md states under the table.
func parseMustNot(t *testing.T, row archRow, pkgs map[string]*pkgInfo) []forbidden {
	t.Helper()
	text := row.mustNot
	if strings.HasPrefix(text, "nothing") {
		return nil
	}
	inModule := func(prefix string) func(string, *pkgInfo) bool {
		return func(p string, _ *pkgInfo) bool { return p == prefix || strings.HasPrefix(p, prefix+"/") }
	}
	own := func(p string) bool { return p == module || strings.HasPrefix(p, module+"/") }
	var out []forbidden
	for _, entry := range strings.Split(text, ",") {
		entry = strings.TrimSpace(entry)
		f := forbidden{word: entry}
		if w, ok := strings.CutSuffix(entry, " (directly)"); ok {
			f.direct, entry = true, w
		}
		switch {
		case entry == "starlark":
			f.match = func(p string, _ *pkgInfo) bool { return p == "go.starlark.net/starlark" }
		case entry == "clover":
			f.match = inModule("github.com/ostafen/clover/v2")
		case entry == "bbolt":
			f.match = inModule("go.etcd.io/bbolt")
		case entry == "pgx":
			f.match = inModule("github.com/jackc/pgx/v5")
		case entry == "net" || entry == "net/http" || entry == "os/exec":
			name := entry
			f.match = func(p string, _ *pkgInfo) bool { return p == name }
		case slices.Contains([]string{"store", "sandbox", "llm", "engine", "builtins"}, entry):
			f.match = inModule(module + "/" + entry)
		case entry == "transports":
			f.match = func(p string, _ *pkgInfo) bool {
				return inModule(module+"/server")(p, nil) || inModule(module+"/internal/cli")(p, nil)
			}
		case entry == "any starplan package":
			self := row.dirs
			f.match = func(p string, _ *pkgInfo) bool {
				for _, d := range self {
					if inModule(module+"/"+d)(p, nil) {
						return false
					}
				}
				return own(p)
			}
		case entry == "anything":
			f.match = func(p string, info *pkgInfo) bool { return !info.std && !own(p) }
		case strings.HasPrefix(entry, "anything but "):
			allowed := map[string]bool{}
			mod := strings.TrimPrefix(entry, "anything but ")
			for p, info := range pkgs {
				if p == mod || strings.HasPrefix(p, mod+"/") {
					allowed[p] = true
					for _, d := range info.deps {
						allowed[d] = true
					}
				}
			}
			require.NotEmpty(t, allowed, "ARCHITECTURE.md:%d: no package of %s is used", row.fileLine, mod)
			f.match = func(p string, info *pkgInfo) bool { return !info.std && !own(p) && !allowed[p] }
		default:
			t.Errorf("ARCHITECTURE.md:%d: %q is not a word of the table's vocabulary (see the paragraph under it)", row.fileLine, entry)
			continue
		}
		out = append(out, f)
	}
	return out
}

// TestArchitectureTable checks every row of ARCHITECTURE.md's package table against the code:
// each package of a row exists, and none depends on what its last column forbids. A package of
// the module that no row names fails too, so the table stays the whole map.
func TestArchitectureTable(t *testing.T) {
	pkgs := listPackages(t)
	covered := map[string]bool{}
	for _, row := range readArchTable(t) {
		rules := parseMustNot(t, row, pkgs)
		for _, dir := range row.dirs {
			path := module + "/" + dir
			info, ok := pkgs[path]
			if !assert.True(t, ok, "ARCHITECTURE.md:%d names %s/, which is not a package", row.fileLine, dir) {
				continue
			}
			covered[path] = true
			for _, r := range rules {
				list := info.deps
				if r.direct {
					list = info.imports
				}
				for _, dep := range list {
					if r.match(dep, pkgs[dep]) {
						t.Errorf("%s/ must not import %s (ARCHITECTURE.md:%d), but it reaches %s", dir, r.word, row.fileLine, dep)
					}
				}
			}
		}
	}
	for path := range pkgs {
		if path == module || !strings.HasPrefix(path, module+"/") || covered[path] {
			continue
		}
		// A package inside a row's directory (builtins/tables is its own row; internal/... too)
		// must have a row of its own.
		t.Errorf("%s has no row in ARCHITECTURE.md's package table", strings.TrimPrefix(path, module+"/"))
	}
}
