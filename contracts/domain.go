package contracts

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/domains"
	"github.com/starplan/starplan/table"
)

// The names of the globals every plan must set. The sandbox predeclares no value for them; the
// plan assigns them.
const (
	AnswerGlobal = "answer_text"
	StatusGlobal = "STATUS"
)

// Domain is one domain's output contract and mutation policy. Build it with Load or Parse, which
// validate it and resolve its rules; treat the result as read-only. A loaded Domain is safe for
// concurrent use.
type Domain struct {
	Name     string   `json:"name"`
	Doc      string   `json:"doc,omitempty"`
	Contract Contract `json:"contract"`
	// Limits bound what one run may make the store do (its blast radius); see RunLimits.
	Limits RunLimits `json:"limits"`
	Rules  []Rule    `json:"rules"`
	// Approval is who must approve a run's changes, and what may go through without a person
	// (approval.go); the zero value is the default.
	Approval Approval `json:"approval,omitempty"`
	// Subject is what the domain asks of the subject a run acts for (subject.go).
	Subject SubjectPolicy `json:"subject,omitempty"`

	ready bool // validated and resolved by Parse
	// invariants are the functions the domain's starlark rules name (BindInvariants).
	invariants map[string]Invariant
	// needsPerson are the functions the domain's needs_person auto rules name (BindNeedsPerson).
	needsPerson map[string]NeedsPerson
}

// Contract holds the parameters of the output contract: what answer_text and STATUS must be.
type Contract struct {
	// Statuses lists the values STATUS may take, in the order the prompt shows them.
	Statuses []string `json:"statuses"`
	// WriteStatus is the one STATUS under which a plan may stage changes. Empty means no STATUS
	// may write (a read-only domain).
	WriteStatus string `json:"write_status"`
	// MaxSentences is the most sentences answer_text may hold (see CountSentences); > 0.
	MaxSentences int `json:"answer_max_sentences"`
	// MaxChars is the most characters (Unicode code points, after trimming spaces) answer_text
	// may hold; > 0.
	MaxChars int `json:"answer_max_chars"`
	// RequiresChange says, for the statuses it names, whether a plan that ends with that STATUS
	// must have staged changes (true: "success" of a purchase that staged nothing is a
	// violation) or must have staged none (false: only the write status can say so, since no
	// other may write at all). A status it does not name may do either.
	RequiresChange map[string]bool `json:"requires_change,omitempty"`
}

// RunLimits are the blast radius of one run, set per domain next to the sandbox's steps, time
// and memory: table calls, rows handed to the plan, rows changed (in total and per table). A run
// that crosses one ends as limit_exceeded, naming it. Zero fields take the defaults below.
type RunLimits struct {
	HelperCalls         int            `json:"helper_calls,omitempty"`
	RowsRead            int            `json:"rows_read,omitempty"`
	RowsWritten         int            `json:"rows_written,omitempty"`
	RowsWrittenPerTable map[string]int `json:"rows_written_per_table,omitempty"`
}

// The run limits of a domain that sets none: generous for any real request, and still bounded.
const (
	DefaultHelperCalls = 100_000
	DefaultRowsRead    = 10_000_000
	DefaultRowsWritten = 10_000
)

// WithDefaults returns l with every zero field set to its default.
func (l RunLimits) WithDefaults() RunLimits {
	if l.HelperCalls == 0 {
		l.HelperCalls = DefaultHelperCalls
	}
	if l.RowsRead == 0 {
		l.RowsRead = DefaultRowsRead
	}
	if l.RowsWritten == 0 {
		l.RowsWritten = DefaultRowsWritten
	}
	return l
}

func (l RunLimits) validate() error {
	if l.HelperCalls < 0 || l.RowsRead < 0 || l.RowsWritten < 0 {
		return errors.New("limits: helper_calls, rows_read and rows_written must be >= 0 (0: the default)")
	}
	for name, n := range l.RowsWrittenPerTable {
		if n <= 0 {
			return fmt.Errorf("limits.rows_written_per_table[%q] must be > 0", name)
		}
	}
	return nil
}

// Rule is one policy rule: a name, a one-line doc for the prompt, and a check kind with its
// parameters. Parse resolves Kind and validates Params; the resolved check is kept unexported.
type Rule struct {
	Name   string         `json:"name"`
	Doc    string         `json:"doc"`
	Kind   string         `json:"kind"`
	Params map[string]any `json:"params,omitempty"`

	check checkFunc
}

// RuleDoc is the name and one-line doc of a contract item or a rule, for rendering.
type RuleDoc struct {
	Name string `json:"name"`
	Kind string `json:"kind"` // "contract" for the output contract's items, else the rule's kind
	Doc  string `json:"doc"`
}

// Input is what Check evaluates.
type Input struct {
	// Globals are the plan's final globals as plain Go values (nil, bool, int64, float64, string,
	// []any, map[string]any). Only answer_text and STATUS are read.
	Globals map[string]any
	// Changes are the run's staged changes.
	Changes table.ChangeSet
	// Committed reads data as committed before the run. Only rules that need it call it (the
	// balance chain, once, when the run adds ledger rows); nil is then an error.
	Committed Committed
	// Data is the data as it would be after the change (a run's staged view), read by the
	// domain's reading rules (kind starlark, def rule(changes, data)); reads through it are the
	// run's and recorded with its own, so nil where no read may be recorded (an apply: the reads
	// recorded at the dry run vouch for those rules there). No other rule reads it.
	Data table.View
	// Deadline bounds the domain's starlark rules together (each also has its own bound); the
	// zero time means no shared bound. An apply checks outside the store's write lock, and again
	// under it when what the check read moved (store.ApplyPending).
	Deadline time.Time
	// Subject is who the run acts for ("" for nobody): the domain may require one for writes
	// (SubjectPolicy), and its starlark rules read it with run_subject().
	Subject string
}

// Committed reads committed data for the checks. Implementations must not see the run's staged
// changes and must not record reads: the checks are not part of the plan.
type Committed interface {
	// LastRow returns the committed row of table tbl with the highest key in natural order
	// (table.CompareKeys), or ok == false when the table is empty or does not exist.
	LastRow(tbl string) (row table.Row, ok bool, err error)
}

// LastRows is a Committed held in memory: the last committed row of each table, by table name.
// A table that is absent is empty.
type LastRows map[string]table.Row

// LastRow implements Committed.
func (m LastRows) LastRow(tbl string) (table.Row, bool, error) {
	r, ok := m[tbl]
	return r, ok, nil
}

// PolicyFile is the file of a domain's directory that holds its contract, run limits and rules
// (see package domains).
const PolicyFile = "policy.json"

// Names lists the domains that ship with starplan.
func Names() []string { return domains.Names() }

// Load returns the policy of a domain that ships with starplan, by name (see Names). An unknown
// name is an error that lists the known ones.
func Load(name string) (*Domain, error) {
	dir, ok := domains.Builtin(name)
	if !ok {
		return nil, fmt.Errorf("contracts: no built-in domain %q (have %s)", name, strings.Join(Names(), ", "))
	}
	data, err := fs.ReadFile(dir, PolicyFile)
	if err != nil {
		return nil, fmt.Errorf("contracts: domain %s: %w", name, err)
	}
	return FromDefinition(name, map[string]string{PolicyFile: string(data)})
}

// FromDefinition returns the policy of the domain called name from its definition files (a
// store's store.Domain.Definition): policy.json, whose name must be the domain's. A nil
// definition (a domain built in Go) means the built-in domain of that name.
func FromDefinition(name string, def map[string]string) (*Domain, error) {
	if def == nil {
		return Load(name)
	}
	text, ok := def[PolicyFile]
	if !ok {
		return nil, fmt.Errorf("contracts: domain %s has no %s", name, PolicyFile)
	}
	d, err := Parse(strings.NewReader(text))
	if err != nil {
		return nil, diag.JSONError(PolicyFile, text, err)
	}
	if d.Name != name {
		return nil, fmt.Errorf("contracts: %s declares the domain %q, not %q", PolicyFile, d.Name, name)
	}
	return d, nil
}

// Parse reads a domain from JSON, validates the contract, resolves every rule's kind and checks its
// parameters. Unknown fields, unknown kinds, unknown, missing or mistyped parameters, duplicate rule
// names and docs that are not one line are errors that name the rule.
func Parse(r io.Reader) (*Domain, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	dec.UseNumber()
	var d Domain
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("contracts: decoding domain: %w", err)
	}
	if dec.More() {
		return nil, errors.New("contracts: decoding domain: trailing data after the JSON object")
	}
	if err := d.validate(); err != nil {
		return nil, fmt.Errorf("contracts: domain %q: %w", d.Name, err)
	}
	return &d, nil
}

func (d *Domain) validate() error {
	if d.Name == "" {
		return errors.New("name is empty")
	}
	c := &d.Contract
	if len(c.Statuses) == 0 {
		return errors.New("contract.statuses is empty")
	}
	seen := map[string]bool{}
	for _, s := range c.Statuses {
		if s == "" || seen[s] {
			return fmt.Errorf("contract.statuses: empty or duplicate value %q", s)
		}
		seen[s] = true
	}
	if c.WriteStatus != "" && !seen[c.WriteStatus] {
		return fmt.Errorf("contract.write_status %q is not one of contract.statuses", c.WriteStatus)
	}
	for _, s := range slices.Sorted(maps.Keys(c.RequiresChange)) {
		switch {
		case !seen[s]:
			return fmt.Errorf("contract.requires_change names %q, which is not one of contract.statuses", s)
		case c.RequiresChange[s] && s != c.WriteStatus:
			return fmt.Errorf("contract.requires_change: %q requires a change, but only the write status %q may change data", s, c.WriteStatus)
		}
	}
	if c.MaxSentences <= 0 || c.MaxChars <= 0 {
		return errors.New("contract.answer_max_sentences and contract.answer_max_chars must be > 0")
	}
	if err := d.Limits.validate(); err != nil {
		return err
	}
	if err := d.Approval.validate(); err != nil {
		return err
	}
	starlarkRules := 0
	for _, r := range d.Rules {
		if r.Kind == "starlark" {
			starlarkRules++
		}
	}
	if starlarkRules > MaxStarlarkRules {
		return fmt.Errorf("%d rules of kind starlark; at most %d are allowed: join checks into fewer functions", starlarkRules, MaxStarlarkRules)
	}
	names := map[string]bool{}
	for _, it := range contractItems {
		names[it.name] = true
	}
	for i := range d.Rules {
		r := &d.Rules[i]
		if err := checkNamed("rule", i, r.Name, r.Doc, names); err != nil {
			return err
		}
		k, ok := lookupKind(r.Kind)
		if !ok {
			return fmt.Errorf("rule %q: unknown kind %q (known: %s)", r.Name, r.Kind, strings.Join(KindNames(), ", "))
		}
		p := &params{m: r.Params, rule: r.Name}
		check := k.build(p)
		if err := p.finish(); err != nil {
			return fmt.Errorf("rule %q (kind %s): %w", r.Name, r.Kind, err)
		}
		r.check = check
	}
	d.ready = true
	return nil
}

// Describe returns the name and one-line doc of each output-contract item, then of every rule, in
// the order Check applies them, for the prompt and --help to render.
func (d *Domain) Describe() []RuleDoc {
	docs := make([]RuleDoc, 0, len(contractItems)+len(d.Rules))
	for _, it := range contractItems {
		if doc := it.doc(&d.Contract); doc != "" { // "": the item does not apply to this domain
			docs = append(docs, RuleDoc{Name: it.name, Kind: "contract", Doc: doc})
		}
	}
	if d.Subject.RequiredForWrites {
		docs = append(docs, RuleDoc{Name: subjectItem.name, Kind: "contract", Doc: subjectItem.doc(&d.Contract)})
	}
	for _, r := range d.Rules {
		docs = append(docs, RuleDoc{Name: r.Name, Kind: r.Kind, Doc: r.Doc})
	}
	return docs
}

// Check evaluates the output contract and every rule on in and returns every violation, one
// Diagnostic each, in rule order (the order of Describe); an empty list means the run may be
// applied. The error is for failures of starplan itself: a Committed read that fails, or one that
// is needed but missing.
func (d *Domain) Check(in Input) (diag.List, error) {
	if !d.ready {
		return nil, fmt.Errorf("contracts: domain %q was not validated; build domains with Load or Parse", d.Name)
	}
	p := &pass{in: in, contract: &d.Contract, invariants: d.invariants, subjectPolicy: d.Subject}
	for _, it := range contractItems {
		it.check(p)
	}
	subjectItem.check(p)
	for i := range d.Rules {
		r := &d.Rules[i]
		if err := r.check(p); err != nil {
			return nil, fmt.Errorf("contracts: rule %q: %w", r.Name, err)
		}
	}
	return p.out, nil
}

// pass is the state of one Check: the input and the diagnostics found so far.
type pass struct {
	in         Input
	contract   *Contract
	invariants map[string]Invariant
	// subjectPolicy is the domain's SubjectPolicy.
	subjectPolicy SubjectPolicy
	out           diag.List
	changed       []string // see tables
}

func (p *pass) report(code, msg, hint string) {
	p.out = append(p.out, diag.Diagnostic{Stage: diag.StageContract, Code: code, Message: msg, Hint: hint})
}

// reportf reports a diagnostic whose message is formatted; the hint is given as is.
func (p *pass) reportf(code, hint, format string, args ...any) {
	p.report(code, fmt.Sprintf(format, args...), hint)
}

// changes returns the changes of one table, or nil.
func (p *pass) changes(tbl string) *table.TableChanges {
	return p.in.Changes[tbl]
}

// tables returns the names of the tables with changes, sorted. It is computed once per pass.
func (p *pass) tables() []string {
	if p.changed == nil {
		p.changed = p.in.Changes.Tables()
	}
	return p.changed
}

// lastCommitted reads the last committed row of tbl.
func (p *pass) lastCommitted(tbl string) (table.Row, bool, error) {
	if p.in.Committed == nil {
		return nil, false, fmt.Errorf("needs the last committed row of %s but Input.Committed is nil", tbl)
	}
	return p.in.Committed.LastRow(tbl)
}

// checkNamed checks the name and doc every rule has (a policy rule, an auto-approval rule):
// what names the list in errors ("rule", "approval.auto rule"), i the rule's index; names holds
// the names taken so far and gets this one.
func checkNamed(what string, i int, name, doc string, names map[string]bool) error {
	if name == "" {
		return fmt.Errorf("%s %d: name is empty", what, i+1)
	}
	if names[name] {
		return fmt.Errorf("%s %q: duplicate name", what, name)
	}
	names[name] = true
	if doc == "" || strings.ContainsAny(doc, "\r\n") {
		return fmt.Errorf("%s %q: doc must be one non-empty line", what, name)
	}
	return nil
}
