package server

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/starplan/starplan/builtins"
	"github.com/starplan/starplan/contracts"
	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// Description is what a planner needs to write a plan for this store: its tables and field
// types, the helpers a plan can call, the output contract and the mutation policy, the limits,
// the reference text a model writes plans from, and JSON Schemas of the API's documents.
type Description struct {
	Domain   string              `json:"domain"`
	Doc      string              `json:"doc"`
	Tables   []TableDescription  `json:"tables"`
	Helpers  []HelperDescription `json:"helpers"`
	Contract contracts.Contract  `json:"contract"`
	Rules    []contracts.RuleDoc `json:"rules" jsonschema:"the output contract's items, then the mutation policy's rules, in the order they are checked"`
	// Approval is who must approve a run's changes and what may go through without a person.
	Approval  []contracts.RuleDoc `json:"approval" jsonschema:"the domain's approval rules in words: four eyes, approvals needed, pending_ttl, then each auto rule"`
	Limits    LimitsDescription   `json:"limits"`
	RunLimits contracts.RunLimits `json:"run_limits" jsonschema:"what one run may make the store do: table calls, rows read, rows written"`
	States    []string            `json:"states" jsonschema:"the states of a run"`
	PlanTools []string            `json:"plan_tools" jsonschema:"the tools a plan_json step may call, besides respond"`
	Reference string              `json:"reference" jsonschema:"the reference a model writes plans from: dialect, tables with sample rows, helpers, contract, policy"`
	Schemas   map[string]any      `json:"schemas" jsonschema:"JSON Schemas of run_request, check_request, apply_request, reject_request, ask_request, run (the result document), check and error"`
	AuditLog  AuditLogDescription `json:"audit_log" jsonschema:"the audit log's size and how long it keeps runs"`
}

// TableDescription is one table: its schema, the value plans use for it, and its row count.
type TableDescription struct {
	table.Schema
	Value string `json:"value" jsonschema:"the name a plan uses for the table, such as inventory_tbl"`
	Rows  int    `json:"rows"`
}

// HelperDescription is one name a plan can use.
type HelperDescription struct {
	Name      string `json:"name"`
	Group     string `json:"group" jsonschema:"language, module, table, domain, input or contract"`
	Signature string `json:"signature"`
	Doc       string `json:"doc"`
	Example   string `json:"example,omitempty"`
}

// LimitsDescription are the default limits of a run; a run request may lower them.
type LimitsDescription struct {
	MaxSteps   uint64 `json:"max_steps"`
	TimeoutMS  int64  `json:"timeout_ms"`
	MaxOutput  int    `json:"max_output"`
	MaxMemory  int64  `json:"max_memory"`
	MaxProgram int    `json:"max_program"`
	MaxNesting int    `json:"max_nesting"`
	MaxBody    int64  `json:"max_body" jsonschema:"the largest request body the server accepts, in bytes"`
}

// Describe describes the store, its helpers and its rules as they are now.
func (s *Server) Describe() (*Description, error) {
	d, err := Describe(s.eng, s.opts.MaxBody)
	if err != nil {
		return nil, err
	}
	s.retention.mu.Lock()
	d.AuditLog.LastPrune = s.retention.last
	if s.retention.err != nil {
		d.AuditLog.LastPruneError = s.retention.err.Error()
	}
	s.retention.mu.Unlock()
	return d, nil
}

// Describe describes eng's store, its helpers and its rules as they are now, for a server that
// takes request bodies of at most maxBody bytes (what `starplan describe` prints, and GET
// /v1/describe answers).
func Describe(eng *engine.Engine, maxBody int64) (*Description, error) {
	st := eng.Store()
	policy := eng.Policy()
	reg := eng.Env().Registry()
	ref, err := eng.SystemPrompt()
	if err != nil {
		return nil, internal(fmt.Errorf("rendering the plan reference: %w", err))
	}
	schemas, err := apiSchemasOnce()
	if err != nil {
		return nil, internal(err)
	}
	d := &Description{
		Domain: policy.Name, Doc: policy.Doc, Contract: policy.Contract, Rules: policy.Describe(),
		Approval:  policy.DescribeApproval(),
		RunLimits: policy.Limits.WithDefaults(), States: States, Reference: ref, Schemas: schemas,
		PlanTools: eng.PlanTools(),
		Tables:    []TableDescription{}, Helpers: []HelperDescription{},
		Limits: LimitsDescription{
			MaxSteps: sandbox.DefaultMaxSteps, TimeoutMS: sandbox.DefaultTimeout.Milliseconds(),
			MaxOutput: sandbox.DefaultMaxOutput, MaxMemory: sandbox.DefaultMaxMemory,
			MaxProgram: sandbox.DefaultMaxProgram, MaxNesting: sandbox.DefaultMaxNesting, MaxBody: maxBody,
		},
	}
	if d.AuditLog, err = auditLogOf(eng); err != nil {
		return nil, internal(fmt.Errorf("reading the audit log's counts: %w", err))
	}
	view := st.StageFor(context.Background(), store.RunLimits{})
	for _, name := range st.Names() {
		t, ok := view.Table(name)
		if !ok {
			continue
		}
		td := TableDescription{Schema: *t.Schema(), Value: name, Rows: t.Len()}
		if h, ok := reg.Lookup(name + "_tbl"); ok && h.Group == builtins.GroupTable {
			td.Value = h.Name
		}
		d.Tables = append(d.Tables, td)
	}
	for _, h := range reg {
		if h.Hidden {
			continue
		}
		d.Helpers = append(d.Helpers, HelperDescription{Name: h.Name, Group: string(h.Group), Signature: h.Signature, Doc: h.Doc, Example: h.Example})
	}
	return d, nil
}

// apiSchemasOnce derives the schemas once per process: they depend only on Go types.
// It is set in init: apiSchemas reads Operations, whose handlers reach Describe.
var apiSchemasOnce func() (map[string]any, error)

func init() { apiSchemasOnce = sync.OnceValues(apiSchemas) }

// apiSchemas returns the JSON Schemas of the API's documents, derived from the Go types the
// server decodes and encodes, so they cannot drift from them: "<operation>_request" for each
// operation of Operations that takes a body, and the run, check and error documents.
func apiSchemas() (map[string]any, error) {
	types := map[string]reflect.Type{
		"run":   reflect.TypeFor[RunDocument](),
		"check": reflect.TypeFor[CheckReport](),
		"error": reflect.TypeFor[ErrorBody](),
	}
	for _, op := range Operations {
		if op.Body != nil {
			types[op.Name+"_request"] = op.Body
		}
	}
	out := map[string]any{}
	for name, t := range types {
		sc, err := jsonschema.ForType(t, &jsonschema.ForOptions{})
		if err != nil {
			return nil, fmt.Errorf("the JSON Schema of %s: %w", name, err)
		}
		out[name] = sc
	}
	return out, nil
}

// fieldDecl has table.Field's shape under another name, so its schema can be derived with the
// nested declarations (items, fields) left open: jsonschema-go infers no recursive type.
type fieldDecl table.Field

// descriptionSchema is the JSON Schema of a Description (describe's output). A field
// declaration's schema is table.Field's, one level deep: its items and fields are field
// declarations too, described as open objects.
var descriptionSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	open := &jsonschema.Schema{Type: "object", Description: "a field declaration, of the same shape as this one"}
	field, err := jsonschema.ForType(reflect.TypeFor[fieldDecl](), &jsonschema.ForOptions{
		TypeSchemas: map[reflect.Type]*jsonschema.Schema{reflect.TypeFor[table.Field](): open},
	})
	if err != nil {
		return nil, err
	}
	return jsonschema.For[Description](&jsonschema.ForOptions{
		TypeSchemas: map[reflect.Type]*jsonschema.Schema{reflect.TypeFor[table.Field](): field},
	})
})
