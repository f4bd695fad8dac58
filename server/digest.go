package server

import (
	"bytes"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/starplan/starplan/engine"
	"github.com/starplan/starplan/table"
)

// Digest returns the digest of a change set: the engine's (engine.Digest), which a run document
// carries and an apply must be given.
func Digest(cs table.ChangeSet) (string, error) { return engine.Digest(cs) }

// digestPrefix starts every digest (engine.DigestPrefix).
const digestPrefix = engine.DigestPrefix

// documentText is a tool's answer carrying a run's document as text in the bytes every transport
// prints (engine.Document.WriteJSON), beside its structured content; nil (the SDK's own text) when
// there is no document.
func documentText(doc *RunDocument) *mcp.CallToolResult {
	var b bytes.Buffer
	if doc == nil || doc.WriteJSON(&b, "") != nil {
		return nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}
}
