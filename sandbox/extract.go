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
	// Most replies a model writes for a new plan are bare programs: the tags and fences are
	// looked for with a cheap scan before their regular expressions run.
	if mayHoldTag(reply) {
		if blocks := tagged(reply); len(blocks) > 0 {
			return single(blocks, "<execute_python> blocks")
		}
	}
	if strings.Contains(reply, "```") {
		if blocks := fenced(reply); len(blocks) > 0 {
			return single(blocks, "fenced code blocks")
		}
	}
	for rest := reply; rest != ""; {
		line, after, _ := strings.Cut(rest, "\n")
		if codeLine.MatchString(line) {
			return tidy(reply), nil
		}
		rest = after
	}
	return "", noProgram("the reply has no <execute_python> block, no fenced code block and no line of code")
}

// mayHoldTag reports whether reply can hold an <execute_python> tag (any case): it has a '<'
// followed by an e or E. A reply for which it is false has no tag for tagOpen to find.
func mayHoldTag(reply string) bool {
	for i := strings.IndexByte(reply, '<'); i >= 0; {
		if i+1 < len(reply) && reply[i+1]|0x20 == 'e' {
			return true
		}
		j := strings.IndexByte(reply[i+1:], '<')
		if j < 0 {
			return false
		}
		i += 1 + j
	}
	return false
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
	if tidied(s) {
		return s
	}
	return retidy(s)
}

// retidy is tidy's work on a text that tidied does not vouch for.
func retidy(s string) string {
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

// tidied reports whether tidy would return s unchanged: its first line is not blank, it ends in
// exactly one line break after a line that is not blank, and some non-blank line has no
// indentation (then the common indentation is empty). It allocates nothing.
func tidied(s string) bool {
	if len(s) < 2 || s[len(s)-1] != '\n' {
		return false
	}
	first, _, _ := strings.Cut(s, "\n")
	body := s[:len(s)-1]
	last := body[strings.LastIndexByte(body, '\n')+1:]
	if strings.TrimSpace(first) == "" || strings.TrimSpace(last) == "" {
		return false
	}
	for rest := body; rest != ""; {
		line, after, _ := strings.Cut(rest, "\n")
		if line != "" && line[0] != ' ' && line[0] != '\t' && strings.TrimSpace(line) != "" {
			return true
		}
		rest = after
	}
	return false
}
