package contracts

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/starplan/starplan/internal/termsafe"
)

// contractItem is one built-in item of the output contract; its doc is rendered from the
// domain's Contract parameters ("" when the item does not apply to the domain).
type contractItem struct {
	name  string
	doc   func(c *Contract) string
	check func(p *pass)
}

// contractItems are checked first, in this order, for every domain.
var contractItems = []contractItem{
	{AnswerGlobal, answerDoc, checkAnswer},
	{StatusGlobal, statusDoc, checkStatus},
	{"status_permits_writes", writesDoc, checkWrites},
	{"status_requires_change", changesDoc, checkChanges},
}

func answerDoc(c *Contract) string {
	return fmt.Sprintf("answer_text: a non-empty string for the customer, at most %s and %d characters, on one line, plain text (no control characters); no data dumps, reprs or tracebacks",
		plural(c.MaxSentences, "sentence"), c.MaxChars)
}

func checkAnswer(p *pass) {
	c := p.contract
	v, ok := p.in.Globals[AnswerGlobal]
	if !ok {
		p.report(CodeAnswerMissing, "answer_text is not set; every plan must set it",
			fmt.Sprintf(`set answer_text = "..." before the plan ends: at most %s for the customer`, plural(c.MaxSentences, "sentence")))
		return
	}
	s, ok := v.(string)
	if !ok {
		p.reportf(CodeAnswerType, `make answer_text a string, e.g. answer_text = "Done: 2 items for $30.00."`,
			"answer_text is %s; it must be a string", describeValue(v))
		return
	}
	text := strings.TrimSpace(s)
	if text == "" {
		p.report(CodeAnswerEmpty, "answer_text is empty; it must say something to the customer",
			fmt.Sprintf("write at most %s that answer the request, also when nothing was done", plural(c.MaxSentences, "sentence")))
		return
	}
	if n, first, what := controlChars(s); n > 0 {
		p.reportf(CodeAnswerControl, `write plain text: a space instead of a tab, no escape sequences such as "\x1b[...", no carriage returns or direction overrides; leave such characters in the data out of the answer`,
			"answer_text has %s, the first %s at character %d; only letters, punctuation, spaces and line breaks are allowed", plural(n, "control character"), what, first)
	}
	if n := utf8.RuneCountInString(text); n > c.MaxChars {
		p.reportf(CodeAnswerTooLong, "shorten it: state the outcome and the key figure, not every row",
			"answer_text has %d characters; at most %d allowed", n, c.MaxChars)
	}
	if n := CountSentences(text); n > c.MaxSentences {
		p.reportf(CodeAnswerSentences, "say it in at most "+plural(c.MaxSentences, "sentence"),
			"answer_text has %d sentences; at most %d allowed", n, c.MaxSentences)
	}
	if why := notForCustomer(text); why != "" {
		p.reportf(CodeAnswerNotCustomer, "write plain sentences for the customer on one line; print() diagnostics instead",
			"answer_text %s; it must be a reply for a customer, not a log", why)
	}
}

// controlChars counts the characters of s, apart from the white space around it, that a customer
// must not get and a terminal would act on: control characters other than a line break (tabs,
// carriage returns, ESC, NUL, DEL, C1 included), bidi formatting characters, line and paragraph
// separators, and bytes that are not UTF-8. It returns their number, the 1-based character
// position of the first in s, and what the first is ("U+001B", "the byte 0xff").
func controlChars(s string) (n, first int, what string) {
	start := len(s) - len(strings.TrimLeftFunc(s, unicode.IsSpace))
	end := len(strings.TrimRightFunc(s, unicode.IsSpace))
	pos := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		pos++
		bad := i >= start && i < end &&
			(r == utf8.RuneError && size == 1 || r != '\n' && termsafe.IsControl(r) || termsafe.IsBidi(r) || termsafe.IsLineSeparator(r))
		if bad {
			if n == 0 {
				first, what = pos, fmt.Sprintf("U+%04X", r)
				if r == utf8.RuneError {
					what = fmt.Sprintf("the byte 0x%02x", s[i])
				}
			}
			n++
		}
		i += size
	}
	return n, first, what
}

// describeValue names the kind of a plain Go value in Python terms, with a short preview.
func describeValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "None"
	case bool:
		return fmt.Sprintf("the bool %v", pyBool(v))
	case int64, int:
		return fmt.Sprintf("the int %v", v)
	case float64:
		return fmt.Sprintf("the float %v", v)
	case []any:
		return fmt.Sprintf("a list of %d items", len(v))
	case map[string]any:
		return fmt.Sprintf("a dict of %d keys", len(v))
	case string:
		return fmt.Sprintf("%q", v)
	default:
		return fmt.Sprintf("a %T", v)
	}
}

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// abbreviations end with a dot that does not end a sentence (compared in lower case, without the
// final dot). Words with inner dots (e.g, i.e, U.S, a.m) are recognised by shape instead. "No." is
// deliberately absent: it is as often a whole sentence as a number sign.
var abbreviations = map[string]bool{
	"mr": true, "mrs": true, "ms": true, "dr": true, "prof": true, "sr": true, "jr": true, "st": true,
	"vs": true, "approx": true, "etc": true, "incl": true, "excl": true, "est": true, "min": true,
	"max": true, "pcs": true, "qty": true, "ea": true, "ca": true, "cf": true, "inc": true, "ltd": true,
}

// CountSentences counts the sentences of text, the way the answer_text contract does.
//
// A sentence ends at a run of '.', '!' or '?' (optionally followed by closing quotes or
// brackets) that is followed by white space or the end of the text; the sentences are the pieces
// between ends that contain at least one letter or digit, so a trailing piece without a final
// full stop counts too. These dots end nothing:
//   - a dot followed by a non-space, as in decimals (80.00), versions or e-mail addresses;
//   - two or more dots, or '…' (an ellipsis);
//   - the dot after a known abbreviation ("Mr.", "approx.", "etc.", see abbreviations) or after a
//     word with inner dots ("e.g.", "i.e.", "U.S.", "a.m.");
//   - the dot after a single letter (an initial, "J. Smith").
//
// The rule errs towards counting fewer sentences: a reply is rejected only when it plainly has
// too many.
func CountSentences(text string) int {
	n := 0
	content := false // the current sentence has a letter or digit
	wordStart := 0   // byte offset where the current word began
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case r == '.' || r == '!' || r == '?':
			j, dots, other := i, 0, 0
			for j < len(text) && (text[j] == '.' || text[j] == '!' || text[j] == '?') {
				if text[j] == '.' {
					dots++
				} else {
					other++
				}
				j++
			}
			word := text[wordStart:i]
			// skip closing quotes and brackets
			for j < len(text) {
				c, cs := utf8.DecodeRuneInString(text[j:])
				if !strings.ContainsRune(`"')]}’”»`, c) {
					break
				}
				j += cs
			}
			atBoundary := j == len(text)
			if !atBoundary {
				c, _ := utf8.DecodeRuneInString(text[j:])
				atBoundary = unicode.IsSpace(c)
			}
			ends := atBoundary && content
			if ends && other == 0 {
				ends = dots == 1 && !isAbbreviation(word)
			}
			if ends {
				n++
				content = false
			}
			if atBoundary {
				wordStart = j
			}
			i = j
			continue
		case r == '…':
			// an ellipsis ends nothing
		case unicode.IsSpace(r):
			wordStart = i + size
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			content = true
		}
		i += size
	}
	if content {
		n++
	}
	return n
}

// isAbbreviation reports whether the word before a single dot makes the dot part of the word.
func isAbbreviation(word string) bool {
	word = strings.TrimLeft(word, `"'([{‘“«`)
	if word == "" {
		return false
	}
	if r, size := utf8.DecodeRuneInString(word); size == len(word) && unicode.IsLetter(r) {
		return true // an initial
	}
	if strings.Contains(word, ".") {
		// e.g, i.e, U.S, a.m: letters separated by single dots
		for _, part := range strings.Split(word, ".") {
			if part == "" || utf8.RuneCountInString(part) > 2 {
				return false
			}
			for _, r := range part {
				if !unicode.IsLetter(r) {
					return false
				}
			}
		}
		return true
	}
	return abbreviations[strings.ToLower(word)]
}

// notForCustomer returns why text reads as a log or a data dump rather than a reply, or "". The
// heuristics are deliberately narrow so that ordinary prose never trips them:
//   - more than one non-blank line;
//   - a Python or Starlark traceback ("Traceback (most recent call last)");
//   - the repr of a dict ('{' then a quoted key then ':', as in {'item_id': ...}), of a list of
//     dicts or tuples ("[{" or "[("), or of a list of strings ("['" or `["` then a quoted
//     item then ',' or ']');
//   - the repr of a function or builtin ("<function " or "<built-in ").
func notForCustomer(text string) string {
	if lines := nonBlankLines(text); lines > 1 {
		return fmt.Sprintf("has %d lines", lines)
	}
	if strings.Contains(text, "Traceback (most recent call last)") {
		return "contains a traceback"
	}
	if strings.Contains(text, "<function ") || strings.Contains(text, "<built-in ") {
		return "contains the repr of a function"
	}
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '{':
			if quotedThen(text[i+1:], ":") {
				return fmt.Sprintf("contains a dict repr (%s)", excerpt(text[i:]))
			}
		case '[':
			rest := strings.TrimLeft(text[i+1:], " ")
			if strings.HasPrefix(rest, "{") || strings.HasPrefix(rest, "(") {
				return fmt.Sprintf("contains a list repr (%s)", excerpt(text[i:]))
			}
			if quotedThen(text[i+1:], ",]") {
				return fmt.Sprintf("contains a list repr (%s)", excerpt(text[i:]))
			}
		}
	}
	return ""
}

// quotedThen reports whether s starts (after spaces) with a short single- or double-quoted
// string followed (after spaces) by one of the bytes in next.
func quotedThen(s, next string) bool {
	s = strings.TrimLeft(s, " ")
	if s == "" || (s[0] != '\'' && s[0] != '"') {
		return false
	}
	end := strings.IndexByte(s[1:], s[0])
	if end < 0 || end > 80 {
		return false
	}
	rest := strings.TrimLeft(s[end+2:], " ")
	return rest != "" && strings.IndexByte(next, rest[0]) >= 0
}

// excerpt returns the first characters of s for a message.
func excerpt(s string) string {
	const max = 24
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max]) + "…"
}

func nonBlankLines(text string) int {
	n := 0
	for line := range strings.Lines(text) {
		if strings.TrimSpace(line) != "" {
			n++
		}
	}
	return n
}

// plural renders "1 sentence" or "2 sentences".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
