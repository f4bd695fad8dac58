package sandbox

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/starplan/starplan/diag"
)

// Diagnostic codes of the extract stage.
const (
	CodeNoProgram        = "no-program"
	CodeAmbiguousProgram = "ambiguous-program"
)

var (
	tagOpen   = regexp.MustCompile(`(?i)<execute_python>`)
	tagClose  = regexp.MustCompile(`(?i)</execute_python>`)
	fenceLine = regexp.MustCompile("^\\s*```+\\s*([A-Za-z0-9_+-]*)\\s*$")
	// codeLine recognises a line that only a program would contain, so a bare reply made of prose
	// is reported as "no program" instead of as a pile of syntax errors.
	codeLine = regexp.MustCompile(`^\s*(?:(?:def|for|while|if|elif|else|return|class|with|try|except|raise|assert|async|await|import|from|del|global|nonlocal|pass|yield)\b|@\w|[A-Za-z_][\w.]*(?:\[[^\]]*\])?\s*(?:[-+*/%]?=[^=]|\()|#)`)
)

// Extract finds the program in a model reply: the text between <execute_python> and
// </execute_python> (any case), else the one fenced code block (```python, ```starlark, ```),
// else the whole reply when it looks like a program. The program's first line is line 1 of
// every later diagnostic. A reply with no program, or with two different programs, is a
// diagnostic rather than a guess.
func Extract(reply string) (string, diag.List) {
	reply = strings.ReplaceAll(reply, "\r\n", "\n")
	if strings.TrimSpace(reply) == "" {
		return "", noProgram("the reply is empty")
	}
	if blocks := tagged(reply); len(blocks) > 0 {
		return single(blocks, "<execute_python> blocks")
	}
	if blocks := fenced(reply); len(blocks) > 0 {
		return single(blocks, "fenced code blocks")
	}
	for _, line := range strings.Split(reply, "\n") {
		if codeLine.MatchString(line) {
			return tidy(reply), nil
		}
	}
	return "", noProgram("the reply has no <execute_python> block, no fenced code block and no line of code")
}

// tagged returns the contents of every <execute_python> block. An unclosed last block runs to
// the end of the reply (a reply cut off by a token limit then fails the check, not extraction).
func tagged(reply string) []string {
	var blocks []string
	for {
		open := tagOpen.FindStringIndex(reply)
		if open == nil {
			return blocks
		}
		reply = reply[open[1]:]
		body := reply
		if end := tagClose.FindStringIndex(reply); end != nil {
			body, reply = reply[:end[0]], reply[end[1]:]
		} else {
			reply = ""
		}
		if inner := fenced(body); len(inner) == 1 {
			body = inner[0] // a fence inside the tags
		}
		blocks = append(blocks, tidy(body))
	}
}

// fenced returns the contents of the fenced blocks that can hold a program. Blocks tagged with
// another language (```json, ```text) are ignored; when some blocks are tagged python or
// starlark, untagged ones are taken for output samples and ignored too.
func fenced(reply string) []string {
	var tagged, untagged []string
	lines := strings.Split(reply, "\n")
	for i := 0; i < len(lines); i++ {
		if !isFence(lines[i]) {
			continue
		}
		lang := strings.ToLower(fenceLine.FindStringSubmatch(lines[i])[1])
		end := i + 1
		for end < len(lines) && !isFence(lines[end]) {
			end++
		}
		body := tidy(strings.Join(lines[i+1:min(end, len(lines))], "\n"))
		switch lang {
		case "python", "py", "python3", "starlark", "star", "bzl":
			tagged = append(tagged, body)
		case "":
			untagged = append(untagged, body)
		}
		i = end
	}
	if len(tagged) > 0 {
		return tagged
	}
	return untagged
}

// isFence reports whether line is a fence line. Most lines have no "```": they are passed over
// without the regular expression, whose matcher a pool keeps only loosely (under the race
// detector, not at all), so that a long bare program costs a few allocations, not one or more
// per line. The isolate pool's parent extracts every reply and is held to a small bound.
func isFence(line string) bool {
	return strings.Contains(line, "```") && fenceLine.MatchString(line)
}

// single returns the one distinct non-empty block, or a diagnostic. It takes time linear in the
// total size of the blocks: a reply is untrusted, and one with 200,000 distinct blocks took a
// minute when each block was compared with every earlier one.
func single(blocks []string, what string) (string, diag.List) {
	var first string
	seen := map[string]struct{}{}
	for _, b := range blocks {
		if strings.TrimSpace(b) == "" {
			continue
		}
		if len(seen) == 0 {
			first = b
		}
		seen[b] = struct{}{}
	}
	switch len(seen) {
	case 0:
		return "", noProgram("the reply's " + what + " are empty")
	case 1:
		return first, nil
	}
	return "", diag.List{{
		Stage:   diag.StageExtract,
		Code:    CodeAmbiguousProgram,
		Message: "the reply has " + strconv.Itoa(len(seen)) + " different " + what + "; it must have exactly one program",
		Hint:    "put the whole plan in a single <execute_python> block",
	}}
}

func noProgram(msg string) diag.List {
	return diag.List{{
		Stage:   diag.StageExtract,
		Code:    CodeNoProgram,
		Message: msg,
		Hint:    "reply with the plan between <execute_python> and </execute_python>",
	}}
}

// tidy drops blank lines around a block and its common indentation, so that line 1 is the
// program's first line and a block indented inside the reply still parses.
func tidy(s string) string {
	lines := strings.Split(s, "\n")
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	prefix := ""
	first := true
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if first {
			prefix, first = indent, false
			continue
		}
		n := 0
		for n < len(prefix) && n < len(indent) && prefix[n] == indent[n] {
			n++
		}
		prefix = prefix[:n]
	}
	if prefix != "" {
		for i, l := range lines {
			lines[i] = strings.TrimPrefix(l, prefix)
		}
	}
	return strings.Join(lines, "\n") + "\n"
}
