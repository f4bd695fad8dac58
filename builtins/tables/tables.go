// Package tables is the table half of a plan's builtins: one `<table>_tbl` value per schema
// (inventory_tbl, transactions_tbl, ...) with its methods, now(), the documentation of the per-run input
// user_request and of the contract globals answer_text and STATUS, and the lazy row values that
// the table methods hand to a plan.
//
// The values it builds are static: Registry makes them once per set of schemas, frozen, and
// concurrent runs share them. A run's data is reached only at call time, through the staged
// table.View and the timestamp that Bind installs on the run's thread. The package reads and
// writes data only through table.View: it must not import clover or the store.
package tables

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.starlark.net/starlark"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/table"
)

// TimestampLayout is how now() renders the run's timestamp: ISO-8601 to the second, without a
// zone, like the timestamps of the seeded transactions (2025-01-01T09:00:00).
const TimestampLayout = "2006-01-02T15:04:05"

// bindingKey is the thread-local key under which Bind stores a run's *binding.
const bindingKey = "starplan.tables.binding"

// binding is one run's data: its staged view and its fixed timestamp.
type binding struct {
	view table.View
	now  starlark.String
	via  map[string]map[string]string // table → row key → helper that wrote it (see Via)
}

// Via returns which helper wrote which row in the run on thread: table → row key (fmt.Sprint) →
// the public helper of helpers.star the plan called. Rows the plan wrote itself are absent.
func Via(thread *starlark.Thread) map[string]map[string]string {
	b, _ := thread.Local(bindingKey).(*binding)
	if b == nil || len(b.via) == 0 {
		return nil
	}
	return b.via
}

// ErrNotBound is returned (wrapped) by a table helper called on a thread without a view: the
// program embedding starplan forgot to call Bind. It is a defect of the host, not of the plan.
var ErrNotBound = errors.New("no database view is bound to this run (the host must call tables.Bind before running a plan)")

// Bind installs the run's staged view and its fixed timestamp on the thread. Table values and
// domain helpers look them up at call time, so the predeclared values stay static, frozen and
// shared by concurrent runs. now is rendered once with TimestampLayout, in now's own location.
func Bind(thread *starlark.Thread, v table.View, now time.Time) {
	thread.SetLocal(bindingKey, &binding{view: v, now: starlark.String(now.Format(TimestampLayout))})
}

func boundTo(thread *starlark.Thread) (*binding, error) {
	b, _ := thread.Local(bindingKey).(*binding)
	if b == nil || b.view == nil {
		return nil, ErrNotBound
	}
	return b, nil
}

// Names of the non-table entries of the registry.
const (
	NameNow         = "now"
	NameUserRequest = "user_request"
	NameAnswerText  = "answer_text"
	NameStatus      = "STATUS"
	NameLen         = "len"
)

// Registry returns, as builtins.Helper entries with a signature, one line of doc and an example:
//
//   - one `<schema.Name>_tbl` value per schema (GroupTable), followed by one documentation-only
//     entry per method, named "tbl.search" and so on (Value nil; the methods are reached through
//     the table values);
//   - now (GroupDomain), the run's timestamp (a domain's own helpers are Starlark, in its
//     helpers.star: see sandbox.Env.LoadHelpers);
//   - the per-run input user_request (GroupInput, Value nil: the sandbox supplies it);
//   - the contract globals answer_text and STATUS (GroupContract, Value nil: the plan sets them);
//   - a hidden `len` that extends Starlark's len to table values (len(inventory_tbl) needs the
//     run's view, which a plain Len method cannot reach). It behaves as the universal len on
//     every other value.
//
// The values are frozen and may be shared by concurrent runs; Bind supplies each run's data.
func Registry(schemas []*table.Schema) builtins.Registry {
	return RegistryWriters(schemas, nil)
}

// RegistryWriters is Registry whose table values name, in the hint of a plan's own write to a
// table only helpers may write, the helpers that write it (writers: table name → helper names).
func RegistryWriters(schemas []*table.Schema, writers map[string][]string) builtins.Registry {
	var reg builtins.Registry
	for _, s := range schemas {
		tv := NewTableValue(s)
		tv.writers = writers[s.Name]
		reg = append(reg, builtins.Helper{
			Name:      tv.name,
			Group:     builtins.GroupTable,
			Signature: fmt.Sprintf("%s: table (key %s; fields %s)", tv.name, s.Key, strings.Join(s.FieldNames(), ", ")),
			Doc:       tableDoc(s),
			Example:   tableExample(tv),
			Value:     tv,
			Check:     tv.checkCall,
		})
	}
	if len(schemas) > 0 {
		reg = append(reg, methodDocs(NewTableValue(schemas[0]))...)
	}
	reg = append(reg,
		function(NameNow, nil, "str",
			"Returns the run's timestamp, ISO-8601 to the second (2025-01-01T09:00:00); the same on every call.",
			`row["timestamp"] = now()`,
			nowBuiltin),
		builtins.Helper{
			Name:      NameUserRequest,
			Group:     builtins.GroupInput,
			Signature: "user_request: str",
			Doc:       "The customer's request for this run, verbatim.",
			Example:   `wants_return = "return" in user_request.lower()`,
		},
		builtins.Helper{
			Name:      NameAnswerText,
			Group:     builtins.GroupContract,
			Signature: "answer_text: str",
			Doc:       "The plan must set it: the reply to the customer, in plain sentences.",
			Example:   `answer_text = "Done: 2 items for $30.00."`,
		},
		builtins.Helper{
			Name:      NameStatus,
			Group:     builtins.GroupContract,
			Signature: "STATUS: str",
			Doc:       "The plan must set it to one of the contract's statuses, such as \"success\"; a plan that is not a success must change nothing.",
			Example:   `STATUS = "success"`,
		},
		builtins.Helper{
			Name:      NameLen,
			Group:     builtins.GroupLanguage,
			Signature: "len(x)",
			Doc:       "Returns the length of x; for a table value, its number of rows.",
			Example:   lenExample(schemas),
			Value:     starlark.NewBuiltin(NameLen, lenBuiltin),
			Hidden:    true,
		},
	)
	for i := range reg {
		if reg[i].Value != nil {
			reg[i].Value.Freeze()
		}
	}
	return reg
}

// function is a domain helper: its signature and the static check of its calls both come from
// params, which fn unpacks at run time.
func function(name string, params builtins.Params, returns, doc, example string,
	fn func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error)) builtins.Helper {
	signature := fmt.Sprintf("%s(%s) -> %s", name, params, returns)
	return builtins.Helper{
		Name:      name,
		Group:     builtins.GroupDomain,
		Signature: signature,
		Doc:       doc,
		Example:   example,
		Value:     starlark.NewBuiltin(name, fn),
		Check:     params.Check(name, signature),
	}
}

func tableDoc(s *table.Schema) string {
	doc := strings.TrimSpace(s.Doc)
	if doc == "" {
		doc = fmt.Sprintf("The %s table", s.Name)
	}
	doc = strings.TrimSuffix(doc, ".")
	return fmt.Sprintf("%s; rows are dicts keyed by field name, in %s order; len(tbl) counts its rows.", doc, s.Key)
}

func tableExample(tv *TableValue) string {
	for _, f := range tv.schema.Fields {
		if f.Name != tv.schema.Key && f.Type == table.TypeString {
			return fmt.Sprintf("row = %s.get({%q: %q})", tv.name, f.Name, "...")
		}
	}
	return fmt.Sprintf("rows = %s.all()", tv.name)
}

// lenBuiltin is Starlark's len, extended to values that need the thread (table values).
func lenBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &x); err != nil {
		return nil, err
	}
	if t, ok := x.(interface {
		ThreadLen(*starlark.Thread) (int, error)
	}); ok {
		n, err := t.ThreadLen(thread)
		if err != nil {
			return nil, fmt.Errorf("len: %w", err)
		}
		return starlark.MakeInt(n), nil
	}
	n := starlark.Len(x)
	if n < 0 {
		return nil, fmt.Errorf("len: value of type %s has no len", x.Type())
	}
	return starlark.MakeInt(n), nil
}

func nowBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
		return nil, err
	}
	bnd, err := boundTo(thread)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.Name(), err)
	}
	return bnd.now, nil
}

// lenExample is len's example on the first table.
func lenExample(schemas []*table.Schema) string {
	if len(schemas) == 0 {
		return "n = len([1, 2])"
	}
	return fmt.Sprintf("n = len(%s)", NewTableValue(schemas[0]).name)
}
