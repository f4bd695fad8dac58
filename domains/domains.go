// Package domains holds the domains that ship with starplan, one directory each, embedded in the
// binary. A domain is nothing but its directory: every layer reads its own file from it, through
// one fs.FS, and no Go code anywhere names what is inside.
//
//	domain.json   name, doc, tables: fields, types, keys, key generation, bounds   (package store)
//	seed.json     the rows of a new store (optional)                                (package store)
//	policy.json   the output contract, the run limits and the mutation rules         (package contracts)
//	prompt.json   what each STATUS means and sounds like                             (package prompts)
//	example.star  the worked example plan the prompt shows (optional)                (package prompts)
//	helpers.star  the functions plans may call, in Starlark (optional)              (package sandbox)
//	invariants.star  the functions of the policy's starlark rules (optional)        (package engine)
//
// A store records the files of its domain when it is created (store.Domain.Definition), so a
// store made from any directory (`starplan db init --domain DIR`) needs no flag afterwards.
// This package imports nothing of starplan's: the layers import it for the built-in domains.
package domains

import (
	"embed"
	"io/fs"
	"slices"
)

//go:embed inventory library
var builtin embed.FS

// The domains that ship with starplan.
const (
	// Inventory is the default domain: a sunglasses shop with its stock and its register.
	Inventory = "inventory"
	// Library is a lending library (members, books, loans, fines): a second example, whose
	// rules are mostly Starlark (its invariants.star), to show a domain unlike the shop.
	Library = "library"
)

// Builtin returns the directory of a domain that ships with starplan, by name.
func Builtin(name string) (fs.FS, bool) {
	if !slices.Contains(Names(), name) {
		return nil, false
	}
	sub, err := fs.Sub(builtin, name)
	if err != nil {
		return nil, false
	}
	return sub, true
}

// Names lists the domains that ship with starplan.
func Names() []string { return []string{Inventory, Library} }
