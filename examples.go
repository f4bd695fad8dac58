// Package starplan holds the assets that ship inside the starplan binary and live at the top of
// the repository: the hand-written example plans of testdata/examples, which `starplan demo`
// walks through. The code is in the packages below (see ARCHITECTURE.md).
package starplan

import "embed"

// Examples holds testdata/examples/*.star: hand-written plans (not model output), each with a
// "# request:" line giving the customer request it answers.
//
//go:embed testdata/examples/*.star
var Examples embed.FS
