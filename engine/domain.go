package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"
	"strings"

	"github.com/starplan/starplan/contracts"
	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/internal/termsafe"
	"github.com/starplan/starplan/prompts"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// DomainFiles are the files a domain's directory may hold (see package domains), with what each
// is; README.md may document the domain.
var DomainFiles = []struct{ Name, Doc string }{
	{store.DomainFile, "name, doc and tables: fields, types, keys, key generation, bounds"},
	{store.SeedFile, "the rows of a new store (optional)"},
	{contracts.PolicyFile, "the output contract (statuses, which may write, answer bounds), run limits and rules"},
	{prompts.NotesFile, "what each STATUS means, with an answer in the right tone (optional)"},
	{sandbox.HelpersFile, "the domain's helpers, Starlark functions every plan may call, with docstrings (optional)"},
	{InvariantsFile, "the functions its starlark rules name: each gets the change set, returns what is wrong (optional)"},
	{prompts.ExampleFile, "an example plan the prompt shows (optional; it must pass the check)"},
	{"README.md", "notes for people (optional; not read)"},
}

// LoadDomain reads a domain's directory and checks it as a whole, before any store is made of
// it: each file by the layer that reads it (the tables and seed rows by the store, the policy by
// contracts, the status notes by prompts), then across them: every table and field a rule names
// exists, every function a starlark rule names is defined, every STATUS has its note and the
// notes' example answers keep the contract, the example plan passes the check against the
// domain's own tables, and no file is one starplan does not read (a misspelt name would be
// silently ignored). It returns every problem it finds, each once, naming the file that holds
// it; the domain is nil when there is any.
//
// A problem is reported where it is, and what it makes uncheckable is not reported again: a
// domain.json that does not load leaves seed.json, helpers.star and example.star unchecked (they
// are about its tables) and policy.json, invariants.star and prompt.json checked without them; a
// policy.json that does not parse leaves invariants.star and prompt.json checked each by itself;
// an invariants.star that does not load, or lacks a function a rule names, leaves the notes'
// examples checked without it; a helpers.star that does not load leaves example.star checked
// but for the names it may define.
func LoadDomain(fsys fs.FS) (*store.Domain, []error) {
	var errs []error
	if entries, err := fs.ReadDir(fsys, "."); err == nil {
		known := make([]string, len(DomainFiles))
		for i, f := range DomainFiles {
			known[i] = f.Name
		}
		for _, e := range entries {
			if !e.IsDir() && !slices.Contains(known, e.Name()) && !strings.HasPrefix(e.Name(), ".") {
				errs = append(errs, fmt.Errorf("%s: not a file of a domain (%s)", e.Name(), strings.Join(known, ", ")))
			}
		}
	}
	dom, err := store.LoadDomain(fsys)
	if err != nil {
		// Without seed.json, does the rest load? Then the problems are the seed's rows, and the
		// other files are checked too.
		rest, rerr := store.LoadDomain(withoutSeed{fsys})
		if rerr != nil {
			// domain.json: what is about its tables cannot be checked, the rest can.
			errs = append(errs, err)
			def := readDefinition(fsys)
			var policy *contracts.Domain
			if text, ok := def[contracts.PolicyFile]; ok {
				if policy, err = contracts.Parse(strings.NewReader(text)); err != nil {
					errs = append(errs, diag.JSONError(contracts.PolicyFile, text, err))
				}
			}
			return nil, append(errs, checkRules(def, policy)...)
		}
		errs = append(errs, seedErrors(err)...)
		dom = rest
	}
	for _, name := range slices.Sorted(maps.Keys(dom.Definition)) {
		if at, r, ok := unsafeText(dom.Definition[name]); ok {
			errs = append(errs, fmt.Errorf("%s:%s: a control or bidirectional character (%U): a domain's text reaches terminals and the model, and must read as it is", name, at, r))
		}
	}
	policy, err := contracts.FromDefinition(dom.Name, dom.Definition)
	if err != nil {
		errs = append(errs, err)
		policy = nil
	}
	if policy != nil {
		fields := map[string][]string{}
		for _, t := range dom.Tables {
			for _, f := range t.Fields {
				fields[t.Name] = append(fields[t.Name], f.Name)
			}
		}
		for _, err := range policy.CheckSchema(fields) {
			errs = append(errs, fmt.Errorf("%s: %w", contracts.PolicyFile, err))
		}
	}
	errs = append(errs, checkRules(dom.Definition, policy)...)
	errs = append(errs, checkWrites(dom)...)
	env, ds := sandbox.NewDomainEnv(dom.Tables, dom.Definition[sandbox.HelpersFile])
	for _, d := range ds {
		errs = append(errs, fmt.Errorf("%s:%d:%d: %s", sandbox.HelpersFile, d.Line, d.Col, d.Message))
	}
	if ex := dom.Definition[prompts.ExampleFile]; ex != "" {
		check := env
		if check == nil { // helpers.star did not load: the example is checked without its helpers
			check, _ = sandbox.NewDomainEnv(dom.Tables, "")
		}
		for _, d := range check.CheckProgram(ex, sandbox.Limits{}).Diagnostics {
			if env == nil && d.Code == sandbox.CodeUnknownName {
				continue // maybe a helper of the helpers.star reported above
			}
			errs = append(errs, fmt.Errorf("%s:%d:%d: %s", prompts.ExampleFile, d.Line, d.Col, d.Message))
		}
	}
	if len(errs) == 0 && env != nil {
		// The prompt a model gets for this domain, with empty tables: its docs must not flood it.
		infos := make([]prompts.TableInfo, len(dom.Tables))
		for i, t := range dom.Tables {
			infos[i] = prompts.TableInfo{Schema: t}
		}
		text, err := prompts.System(prompts.Input{Tables: infos, Registry: env.Registry(), Policy: policy, Definition: dom.Definition})
		switch {
		case err != nil:
			errs = append(errs, err)
		case len(text) > MaxDomainPrompt:
			errs = append(errs, fmt.Errorf("the system prompt of this domain is %d bytes with empty tables, more than %d: shorten its docs, docstrings, notes or example", len(text), MaxDomainPrompt))
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return dom, nil
}

// checkRules checks invariants.star and prompt.json, against the policy when it loaded (nil
// when it did not: each file is then checked by itself). A starlark rule whose function
// invariants.star lacks is reported once, as the file's; the notes' examples are checked with a
// stand-in for it that finds nothing, so that they are not each failed for it.
func checkRules(def map[string]string, policy *contracts.Domain) []error {
	var errs []error
	bound := newCheckBound(policy) // the rules' calls in this check, on the example answers
	if src := def[InvariantsFile]; src != "" || (policy != nil && len(policy.InvariantFunctions())+len(policy.Approval.NeedsPersonFunctions()) > 0) {
		fns, ds := loadInvariants(src, bound)
		for _, d := range ds {
			errs = append(errs, fmt.Errorf("%s:%d:%d: %s", InvariantsFile, d.Line, d.Col, d.Message))
		}
		if policy != nil {
			if fns == nil {
				fns = map[string]contracts.Invariant{}
			}
			for _, r := range policy.Rules {
				fn, _ := r.Params["function"].(string)
				if r.Kind != "starlark" || fns[fn] != nil {
					continue
				}
				if len(ds) == 0 { // when the file does not load, its functions are not missing
					errs = append(errs, fmt.Errorf("%s: defines no function %s, which rule %q of %s names", InvariantsFile, fn, r.Name, contracts.PolicyFile))
				}
				fns[fn] = func(context.Context, table.ChangeSet, table.View) ([]contracts.Finding, error) { return nil, nil }
			}
			for _, fn := range policy.Approval.NeedsPersonFunctions() {
				if fns[fn] == nil && len(ds) == 0 {
					errs = append(errs, fmt.Errorf("%s: defines no function %s, which an approval rule of kind needs_person in %s names", InvariantsFile, fn, contracts.PolicyFile))
				}
			}
			if err := policy.BindInvariants(fns); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", contracts.PolicyFile, err))
			}
		}
	}
	errs = append(errs, prompts.CheckNotes(def, policy)...)
	if err := bound.err(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// checkWrites checks each table's "writes": empty, or "helpers" with a helper that writes the
// table (else nothing could).
func checkWrites(dom *store.Domain) []error {
	var errs []error
	var writers map[string][]string
	for _, t := range dom.Tables {
		switch t.Writes {
		case "":
		case table.WritesHelpers:
			if writers == nil {
				writers = sandbox.HelperWriters(dom.Definition[sandbox.HelpersFile])
			}
			if len(writers[t.Name]) == 0 {
				errs = append(errs, fmt.Errorf("%s: table %s may be written only by helpers (\"writes\": \"helpers\"), but no helper of %s writes it", store.DomainFile, t.Name, sandbox.HelpersFile))
			}
		default:
			errs = append(errs, fmt.Errorf("%s: table %s: \"writes\" is %q; the one value is \"helpers\" (only the domain's helpers write the table), or leave it out", store.DomainFile, t.Name, t.Writes))
		}
	}
	return errs
}

// readDefinition reads the files of a domain that are not about its tables (each at most
// store.MaxDefinition bytes), for checking them when domain.json does not load. A file that is
// missing or cannot be read is left out: the store reported what it could not read.
func readDefinition(fsys fs.FS) map[string]string {
	def := map[string]string{}
	for _, name := range []string{contracts.PolicyFile, prompts.NotesFile, InvariantsFile} {
		f, err := fsys.Open(name)
		if err != nil {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(f, store.MaxDefinition+1))
		f.Close()
		if err == nil && len(b) <= store.MaxDefinition {
			def[name] = string(b)
		}
	}
	return def
}

// withoutSeed is a domain's directory as if it had no seed.json.
type withoutSeed struct{ fsys fs.FS }

func (w withoutSeed) Open(name string) (fs.File, error) {
	if name == store.SeedFile {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return w.fsys.Open(name)
}

func (w withoutSeed) ReadDir(name string) ([]fs.DirEntry, error) {
	entries, err := fs.ReadDir(w.fsys, name)
	if name == "." {
		entries = slices.DeleteFunc(entries, func(e fs.DirEntry) bool { return e.Name() == store.SeedFile })
	}
	return entries, err
}

// seedErrors splits the error of a seed with several bad rows (joined by the store) into one
// error for each, naming seed.json.
func seedErrors(err error) []error {
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		return []error{err}
	}
	var out []error
	for _, e := range joined.Unwrap() {
		out = append(out, fmt.Errorf("%s: %w", store.SeedFile, e))
	}
	return out
}

// MaxDomainPrompt is the largest system prompt a domain may make (with empty tables), in bytes:
// every question sends it to the model.
const MaxDomainPrompt = 32 << 10

// unsafeText finds the first character of s that a terminal would act on or that reads
// differently from how it runs (termsafe.Unsafe), tabs and line ends excepted.
func unsafeText(s string) (at string, r rune, found bool) {
	line, col := 1, 0
	for _, r := range s {
		col++
		switch {
		case r == '\n':
			line, col = line+1, 0
		case r == '\t' || r == '\r':
		case termsafe.Unsafe(r):
			return fmt.Sprintf("%d:%d", line, col), r, true
		}
	}
	return "", 0, false
}
