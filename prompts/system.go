package prompts

import (
	"bytes"
	"cmp"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"unicode/utf8"

	"go.starlark.net/starlark"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/contracts"
	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/domains"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/sandbox/pycompat"
	"github.com/starplan/starplan/table"
)

//go:embed templates
var templateFS embed.FS

// templates holds system.tmpl, user.tmpl and repair.tmpl, parsed once.
var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"join": strings.Join,
}).ParseFS(templateFS, "templates/*.tmpl"))

// MaxSampleRows is the most sample rows the schema block shows per table.
const MaxSampleRows = 3

// MaxSampleChars is the most characters a sample row's string value keeps; a longer one is cut
// and ends with "…".
const MaxSampleChars = 24

// MaxSampleItems is the most elements of a list, or keys of a dict, a sample row's nested value
// shows; the rest is one string saying how many were left out. With MaxSampleChars it keeps a
// sample of any value (up to 64 KiB) a line long.
const MaxSampleItems = 3

// TableInfo is one table of the live store as the schema block shows it.
type TableInfo struct {
	Schema *table.Schema
	// Rows is the table's row count.
	Rows int
	// Samples are up to MaxSampleRows rows (more are ignored), shown as compact JSON in the
	// schema's field order.
	Samples []table.Row
}

// Input is what the system prompt is rendered from.
type Input struct {
	// Tables are the store's tables, in the order the prompt lists them.
	Tables []TableInfo
	// Registry is the sandbox's registry ((*sandbox.Env).Registry()); hidden names are skipped.
	Registry builtins.Registry
	// Policy is the domain's output contract and mutation policy; required.
	Policy *contracts.Domain
	// Definition is the domain's definition files (store.Domain.Definition), which hold its
	// status notes (prompt.json) and example plan (example.star). nil: those of the built-in
	// domain named Policy.Name, if there is one.
	Definition map[string]string
}

// System renders the system prompt: the role, the output format, the Starlark dialect, the
// schema block, the helper reference, the contract with the meaning and tone of each STATUS, the
// mutation policy and, when the domain ships one, an example plan. The error reports a missing
// Policy or a broken embedded domain file.
func System(in Input) (string, error) {
	if in.Policy == nil {
		return "", errors.New("prompts: Input.Policy is nil")
	}
	def := in.Definition
	if def == nil {
		def = builtinDefinition(in.Policy.Name)
	}
	dom, err := notesFromDefinition(def)
	if err != nil {
		return "", err
	}
	data := systemData{
		Role:     cmp.Or(strings.TrimSpace(dom.Role), DefaultRole),
		Domain:   strings.TrimSpace(in.Policy.Doc),
		Rewrites: rewrites(in.Registry),
		Rejected: rejected(),
		Universe: universe(),
		Tables:   tableBlocks(in.Tables, in.Registry),
		Groups:   helperGroups(in.Registry, in.Tables),
		Example:  dom.Example,
	}
	for _, d := range in.Policy.Describe() {
		if d.Kind == "contract" {
			data.Contract = append(data.Contract, d.Doc)
		} else {
			data.Policy = append(data.Policy, d.Doc)
		}
	}
	for _, s := range in.Policy.Contract.Statuses {
		n := dom.Statuses[s]
		data.Statuses = append(data.Statuses, statusNote{Name: s, When: n.When, Answer: n.Answer})
	}
	var b bytes.Buffer
	if err := templates.ExecuteTemplate(&b, "system.tmpl", data); err != nil {
		return "", fmt.Errorf("prompts: rendering the system prompt: %w", err)
	}
	return tidy(b.String()), nil
}

// systemData is what system.tmpl renders.
type systemData struct {
	Role     string
	Domain   string
	Rewrites []string
	Rejected []string
	Universe []string
	Tables   []tableBlock
	Groups   []helperGroup
	Contract []string
	Statuses []statusNote
	Policy   []string
	Example  string
}

type tableBlock struct {
	Name    string // the table value plans use, such as inventory_tbl; else the table's name
	Doc     string
	Rows    int
	Key     string
	KeyGen  string // "SG + 3 digits" when Insert generates missing keys
	Fields  []fieldLine
	Samples []string
}

type fieldLine struct {
	Name, Type, Doc string
}

type helperGroup struct {
	Title   string
	Inline  bool // signatures on one line, without docs
	Helpers []helperLine
}

type helperLine struct {
	Signature, Doc string // Doc is empty for the Python-compatible builtins
}

type statusNote struct {
	Name, When, Answer string
}

// rewriteDocs describes each pycompat rule for the model, in the order the prompt lists them.
var rewriteDocs = []struct{ rule, doc string }{
	{pycompat.RuleFString, "f-strings"},
	{pycompat.RulePercentFormat, "% formatting"},
	{pycompat.RuleStrFormat, "str.format specs"},
	{pycompat.RuleIsNone, "is None/True/False"},
	{pycompat.RuleGenexp, "generator expressions in calls"},
	{pycompat.RuleChainedCompare, "a < b < c"},
	{pycompat.RuleImport, "import %s"},
}

// rewrites lists what pycompat rewrites, naming the registry's modules for the import rule.
func rewrites(reg builtins.Registry) []string {
	var modules []string
	for _, h := range reg.Documented() {
		if h.Group == builtins.GroupModule {
			modules = append(modules, h.Name)
		}
	}
	out := make([]string, 0, len(rewriteDocs))
	for _, r := range rewriteDocs {
		if r.rule == pycompat.RuleImport {
			if len(modules) == 0 {
				continue
			}
			out = append(out, fmt.Sprintf(r.doc, strings.Join(modules, "/")))
			continue
		}
		out = append(out, r.doc)
	}
	return out
}

// rejected lists the words of sandbox.Pythonisms, those of one code joined by "/". The hints are
// left to the repair message, where the checker gives them with the position: the prompt stays
// short.
func rejected() []string {
	var out []string
	index := map[string]int{}
	for _, p := range sandbox.Pythonisms {
		if i, ok := index[p.Code]; ok {
			out[i] += "/" + p.Word
			continue
		}
		index[p.Code] = len(out)
		out = append(out, p.Word)
	}
	return out
}

// universe lists Starlark's own builtin functions, sorted.
func universe() []string {
	var names []string
	for name, v := range starlark.Universe {
		if _, ok := v.(*starlark.Builtin); ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// tableValueName returns the documented table value of the registry for schema s.
func tableValueName(reg builtins.Registry, s *table.Schema) (string, bool) {
	name := s.Name + "_tbl"
	h, ok := reg.Lookup(name)
	return name, ok && !h.Hidden && h.Group == builtins.GroupTable
}

func tableBlocks(infos []TableInfo, reg builtins.Registry) []tableBlock {
	out := make([]tableBlock, 0, len(infos))
	for _, ti := range infos {
		s := ti.Schema
		if s == nil {
			continue
		}
		name, ok := tableValueName(reg, s)
		if !ok {
			name = s.Name
		}
		tb := tableBlock{
			Name: name,
			Doc:  strings.TrimSuffix(strings.TrimSpace(s.Doc), "."),
			Rows: ti.Rows,
			Key:  s.Key,
		}
		if s.KeyPrefix != "" {
			tb.KeyGen = s.KeyPrefix + " + digits"
			if s.KeyDigits > 0 {
				tb.KeyGen = fmt.Sprintf("%s + %d digits", s.KeyPrefix, s.KeyDigits)
			}
		}
		for _, f := range s.Fields {
			tb.Fields = append(tb.Fields, fieldLine{Name: f.Name, Type: fieldType(f), Doc: f.Doc})
		}
		for i, r := range ti.Samples {
			if i == MaxSampleRows {
				break
			}
			tb.Samples = append(tb.Samples, compactRow(s, r))
		}
		out = append(out, tb)
	}
	return out
}

// fieldType renders a field's type and constraints: "int >= 0", "string, optional". Fields are
// required unless marked optional, which is the rarer case. A list or object shows what it holds
// and how a filter reaches inside it: "list of string (an element: {"tags": {"$contains": x}})",
// "object {city: string; zip: string, optional} (a key: {"address.city": x})".
func fieldType(f table.Field) string {
	s := nestedType(f, true)
	switch {
	case f.Type == table.TypeList:
		s += fmt.Sprintf(` (an element: {%q: {"$contains": x}})`, f.Name)
	case f.Type == table.TypeObject && len(f.Fields) > 0:
		s += fmt.Sprintf(` (a key: {"%s.%s": x})`, f.Name, f.Fields[0].Name)
	case f.Type == table.TypeMap && f.Values != nil:
		path := f.Name + ".*"
		if f.Values.Type == table.TypeObject && len(f.Values.Fields) > 0 {
			path += "." + f.Values.Fields[0].Name
		}
		s += fmt.Sprintf(` (a dict by key; any entry: {%q: x}; .items() iterates it)`, path)
	}
	return s
}

// nestedType renders f's type and constraints; optional says whether to mark a field that is not
// required (a list's items are not marked).
func nestedType(f table.Field, optional bool) string {
	parts := []string{f.Type}
	switch f.Type {
	case table.TypeList:
		if f.Items != nil {
			parts[0] = "list of " + nestedType(*f.Items, false)
		}
	case table.TypeObject:
		keys := make([]string, len(f.Fields))
		for i, k := range f.Fields {
			keys[i] = k.Name + ": " + nestedType(k, true)
		}
		if f.Additional {
			keys = append(keys, "other keys: any")
		}
		if len(keys) > 0 {
			parts[0] = "object {" + strings.Join(keys, "; ") + "}"
		}
	case table.TypeMap:
		if f.Values != nil {
			parts[0] = "map of " + nestedType(*f.Values, false)
		}
		if f.Values != nil && f.Keys != nil && f.Keys.Pattern != "" {
			parts[0] = "map (keys matching " + f.Keys.Pattern + ") of " + nestedType(*f.Values, false)
		}
	}
	num := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	if f.Min != nil {
		parts[0] += " >= " + num(*f.Min)
	}
	if f.Max != nil {
		parts = append(parts, "<= "+num(*f.Max))
	}
	if f.MinLen > 0 {
		parts = append(parts, fmt.Sprintf("len >= %d", f.MinLen))
	}
	if f.MaxLen > 0 {
		parts = append(parts, fmt.Sprintf("len <= %d", f.MaxLen))
	}
	if len(f.Enum) > 0 {
		parts = append(parts, "one of "+strings.Join(f.Enum, ", "))
	}
	if f.Pattern != "" {
		parts = append(parts, "matching "+f.Pattern)
	}
	if optional && !f.Required {
		parts = append(parts, "optional")
	}
	if f.ReadOnly {
		parts = append(parts, "read-only")
	}
	return strings.Join(parts, ", ")
}

// compactRow renders a row as one line of JSON with the schema's fields first, in order, then
// any others sorted. Long strings are cut to MaxSampleChars; integral floats keep a ".0".
func compactRow(s *table.Schema, r table.Row) string {
	keys := s.FieldNames()
	var extra []string
	for k := range r {
		if s.Field(k) == nil {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	keys = append(keys, extra...)
	var b strings.Builder
	b.WriteByte('{')
	first := true
	for _, k := range keys {
		v, ok := r[k]
		if !ok {
			continue
		}
		if !first {
			b.WriteString(",")
		}
		first = false
		b.WriteString(jsonString(k))
		b.WriteString(":")
		b.WriteString(compactValue(v))
	}
	b.WriteByte('}')
	return b.String()
}

func compactValue(v any) string {
	switch v := v.(type) {
	case string:
		if utf8.RuneCountInString(v) > MaxSampleChars {
			v = string([]rune(v)[:MaxSampleChars-1]) + "…"
		}
		return jsonString(v)
	case float64:
		s := strconv.FormatFloat(v, 'f', -1, 64)
		if !strings.ContainsAny(s, ".eEIN") {
			s += ".0"
		}
		return s
	case []any:
		parts := make([]string, 0, min(len(v), MaxSampleItems+1))
		for i, e := range v {
			if i == MaxSampleItems {
				parts = append(parts, jsonString(fmt.Sprintf("… %d more", len(v)-i)))
				break
			}
			parts = append(parts, compactValue(e))
		}
		return "[" + strings.Join(parts, ",") + "]"
	case map[string]any:
		keys := slices.Sorted(maps.Keys(v))
		parts := make([]string, 0, min(len(keys), MaxSampleItems+1))
		for i, k := range keys {
			if i == MaxSampleItems {
				parts = append(parts, jsonString("…")+":"+jsonString(fmt.Sprintf("%d more keys", len(keys)-i)))
				break
			}
			parts = append(parts, compactValue(k)+":"+compactValue(v[k]))
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%q", fmt.Sprint(v))
	}
	return string(data)
}

// jsonString quotes s as JSON without escaping &; < and > are escaped so that data can never
// spell a tag of the prompt.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	out := strings.TrimSuffix(b.String(), "\n")
	return strings.NewReplacer("<", `\u003c`, ">", `\u003e`).Replace(out)
}

// groupTitles names the helper groups of the reference, in the order they are listed. The
// contract globals are rendered with the contract, the table values with the schema block.
var groupTitles = []struct {
	group builtins.Group
	title string
}{
	{builtins.GroupLanguage, "Builtins, as in Python"},
	{builtins.GroupModule, "Modules"},
	{builtins.GroupTable, "Table methods (tbl: any table value)"},
	{builtins.GroupDomain, "Domain helpers"},
	{builtins.GroupInput, "Inputs"},
}

// helperGroups renders the documented registry, grouped. Table values that the schema block
// shows are left out there; table methods appear once, as tbl.method.
func helperGroups(reg builtins.Registry, infos []TableInfo) []helperGroup {
	shown := map[string]bool{}
	for _, ti := range infos {
		if ti.Schema != nil {
			if name, ok := tableValueName(reg, ti.Schema); ok {
				shown[name] = true
			}
		}
	}
	byGroup := map[builtins.Group][]helperLine{}
	var others []builtins.Group
	known := map[builtins.Group]bool{builtins.GroupContract: true}
	for _, g := range groupTitles {
		known[g.group] = true
	}
	for _, h := range reg.Documented() {
		if h.Group == builtins.GroupContract || shown[h.Name] {
			continue
		}
		if !known[h.Group] && byGroup[h.Group] == nil {
			others = append(others, h.Group)
		}
		line := helperLine{Signature: h.Signature, Doc: strings.TrimSpace(h.Doc)}
		if line.Signature == "" {
			line.Signature = h.Name
		}
		if h.Group == builtins.GroupLanguage {
			line.Doc = "" // they work as in Python; the signature is what a model needs
		}
		byGroup[h.Group] = append(byGroup[h.Group], line)
	}
	var out []helperGroup
	for _, g := range groupTitles {
		if len(byGroup[g.group]) > 0 {
			out = append(out, helperGroup{Title: g.title, Inline: g.group == builtins.GroupLanguage, Helpers: byGroup[g.group]})
		}
	}
	for _, g := range others {
		out = append(out, helperGroup{Title: string(g), Helpers: byGroup[g]})
	}
	return out
}

// The files of a domain's directory that the prompt reads (see package domains).
const (
	// NotesFile holds what each STATUS means, with a one-line answer_text in the right tone.
	NotesFile = "prompt.json"
	// ExampleFile holds the example plan the prompt shows.
	ExampleFile = "example.star"
)

// Notes is what a domain's prompt.json holds: the per-domain text no code can derive, what each
// STATUS means with a one-line answer_text in the right tone. The example plan is example.star.
type Notes struct {
	// Role is who the model is, after "You are ": "a careful shop assistant" (default: a careful
	// assistant).
	Role     string                `json:"role,omitempty" jsonschema:"who the model is, after 'You are ', such as 'a careful shop assistant'"`
	Statuses map[string]StatusNote `json:"statuses" jsonschema:"one note per STATUS of the contract"`
}

// DefaultRole is the role of a domain whose notes name none.
const DefaultRole = "a careful assistant"

// StatusNote says when a plan sets a STATUS and how its answer sounds.
type StatusNote struct {
	When   string `json:"when" jsonschema:"when a plan sets this STATUS"`
	Answer string `json:"answer" jsonschema:"an answer_text in the right tone; it must itself keep the contract"`
}

// domainNotes are a domain's notes with its example plan.
type domainNotes struct {
	Notes
	Example string `json:"-"` // example.star, when present
}

// notesFromDefinition reads a domain's status notes and example plan from its definition files;
// a domain without them gets a prompt without those sections. The error names the file.
func notesFromDefinition(def map[string]string) (domainNotes, error) {
	var n domainNotes
	if text, ok := def[NotesFile]; ok {
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&n); err != nil {
			return n, diag.JSONError(NotesFile, text, err)
		}
	}
	n.Example = strings.TrimSpace(def[ExampleFile])
	return n, nil
}

// CheckNotes reports what is wrong with a domain's prompt files against its policy: a
// prompt.json that does not decode, a STATUS of the contract it says nothing about (or one it
// notes that the contract lacks), a note without "when", and a tone example that is not itself a
// valid answer under its STATUS. Each problem is one error naming the file. A nil policy (the
// domain's policy.json did not load) checks that prompt.json decodes, and nothing against it.
func CheckNotes(def map[string]string, policy *contracts.Domain) []error {
	n, err := notesFromDefinition(def)
	if err != nil {
		return []error{err}
	}
	if _, ok := def[NotesFile]; !ok || policy == nil {
		return nil
	}
	var errs []error
	for _, s := range policy.Contract.Statuses {
		if _, ok := n.Statuses[s]; !ok {
			errs = append(errs, fmt.Errorf("%s: STATUS %q of the contract has no note", NotesFile, s))
		}
	}
	for _, s := range slices.Sorted(maps.Keys(n.Statuses)) {
		note := n.Statuses[s]
		if !slices.Contains(policy.Contract.Statuses, s) {
			errs = append(errs, fmt.Errorf("%s: STATUS %q is not one of the contract's (%s)", NotesFile, s, strings.Join(policy.Contract.Statuses, ", ")))
			continue
		}
		if strings.TrimSpace(note.When) == "" {
			errs = append(errs, fmt.Errorf("%s: STATUS %q has no \"when\"", NotesFile, s))
		}
		ds, err := policy.Check(contracts.Input{Globals: map[string]any{contracts.AnswerGlobal: note.Answer, contracts.StatusGlobal: s}})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: STATUS %q: %w", NotesFile, s, err))
		}
		for _, d := range ds {
			errs = append(errs, fmt.Errorf("%s: the example answer for %q breaks the contract: %s", NotesFile, s, d.Message))
		}
	}
	return errs
}

// builtinDefinition returns the prompt files of the built-in domain called name; nil when there
// is none.
func builtinDefinition(name string) map[string]string {
	dir, ok := domains.Builtin(name)
	if !ok {
		return nil
	}
	def := map[string]string{}
	for _, f := range []string{NotesFile, ExampleFile} {
		if b, err := fs.ReadFile(dir, f); err == nil {
			def[f] = string(b)
		}
	}
	return def
}

// tidy trims trailing spaces, collapses runs of blank lines and ends the text with one newline.
func tidy(s string) string {
	lines := strings.Split(s, "\n")
	out := lines[:0]
	blank := true // drop leading blank lines
	for _, l := range lines {
		l = strings.TrimRight(l, " \t")
		if l == "" {
			if blank {
				continue
			}
			blank = true
		} else {
			blank = false
		}
		out = append(out, l)
	}
	return strings.TrimRight(strings.Join(out, "\n"), "\n") + "\n"
}

// TablesOf reads the schema block's input from a view of the store: each table's schema, row
// count and first MaxSampleRows rows in key order, in the view's name order. Pass a view used
// for nothing else (a fresh stage): Find records its reads. The error is the view's.
func TablesOf(v table.View) ([]TableInfo, error) {
	var out []TableInfo
	for _, name := range v.Names() {
		t, ok := v.Table(name)
		if !ok {
			continue
		}
		rows, err := t.Find(table.Query{Limit: MaxSampleRows})
		if err != nil {
			return nil, fmt.Errorf("prompts: sampling table %s: %w", name, err)
		}
		out = append(out, TableInfo{Schema: t.Schema(), Rows: t.Len(), Samples: rows})
	}
	return out, nil
}
