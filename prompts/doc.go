// Package prompts owns the code-as-plan prompt: the embedded text/template files under
// templates/ and their rendering into the system prompt, the user message for a request and the
// repair message after a failed attempt.
//
// Everything the system prompt promises is rendered from the values the sandbox and the contract
// checks use: the helper reference from the sandbox's builtins.Registry (so it can never name a
// helper the sandbox lacks), the dialect notes from sandbox.Pythonisms and the pycompat rules, the
// contract and mutation policy from contracts.Domain.Describe, and the schema block from the live
// store's schemas, row counts and sample rows, which the caller passes in as plain values.
// Per-domain text that no code can derive (what each STATUS means, a tone example for it, one
// example plan) lives in the domain's directory, prompt.json and example.star (package domains),
// which the caller passes as the domain's definition; a domain without them gets a prompt
// without those sections.
//
// It must not import the model client (llm) or store internals: the caller reads the store.
package prompts
