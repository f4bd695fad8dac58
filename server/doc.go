// Package server makes one engine reachable by other planners, over HTTP (a JSON API under /v1
// and Server-Sent Events of run lifecycles) and over MCP (stdio and streamable HTTP, with the
// official Go SDK). Both transports call the same operations, written once in Operations: describe,
// check, a dry run that returns the result document with the digest of its change set, apply (only
// with the digest the reviewer saw, exactly once), reject with feedback, list, show and replay;
// ask and the event stream are HTTP only (Operations says why).
//
// The server owns no run logic: runs, applies, rejections and the audit log are the engine's.
// What it adds is what a network caller needs: the change-set digest (Digest), one error shape
// (Error), bounded request bodies, bearer-token auth (LoadToken) and the sessions of the review
// page at / (auth.go, review.go), an event stream (Events), and a drain on shutdown. It must not know about flags or terminals: the `starplan serve` command in
// internal/cli wires it to a listener, a token file and signals.
package server
