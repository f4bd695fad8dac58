package diffview

import (
	"strings"
	"unicode"
	"unicode/utf8"

	dmp "github.com/sergi/go-diff/diffmatchpatch"
)

// change is one step of a word diff: text both sides share (Del == Ins == "" and Same set), or
// words removed and words added at the same place.
type change struct {
	Same     string
	Del, Ins string
}

// maxWords bounds the distinct words a word diff maps to runes (every valid code point but the
// surrogates); longer texts are shown as a whole replacement.
const maxWords = utf8.MaxRune + 1 - 0x800

// wordDiff compares a and b word by word (a word is a run of non-space characters; the spaces
// between words are tokens too) and returns the steps that turn a into b. It maps each distinct
// token to one rune and diffs the rune strings with diff-match-patch, the word-level form of its
// DiffLinesToRunes trick, so edits never split a word.
func wordDiff(a, b string) []change {
	vocab := map[string]rune{}
	var words []string
	encode := func(s string) []rune {
		var out []rune
		for len(s) > 0 {
			n := tokenLen(s)
			tok := s[:n]
			s = s[n:]
			r, ok := vocab[tok]
			if !ok {
				r = rune(len(words))
				if r >= 0xd800 {
					r += 0x800 // skip the surrogates: they do not survive a string round trip
				}
				vocab[tok] = r
				words = append(words, tok)
			}
			out = append(out, r)
		}
		return out
	}
	ra, rb := encode(a), encode(b)
	if len(words) > maxWords {
		return []change{{Del: a, Ins: b}}
	}
	decode := func(s string) string {
		var sb strings.Builder
		for _, r := range s {
			if r >= 0xd800 {
				r -= 0x800
			}
			sb.WriteString(words[r])
		}
		return sb.String()
	}

	var out []change
	var cur change // pending removal and addition
	flush := func() {
		if cur.Del != "" || cur.Ins != "" {
			out = append(out, cur)
			cur = change{}
		}
	}
	for _, d := range dmp.New().DiffMainRunes(ra, rb, false) {
		text := decode(d.Text)
		switch d.Type {
		case dmp.DiffDelete:
			cur.Del += text
		case dmp.DiffInsert:
			cur.Ins += text
		default:
			flush()
			out = append(out, change{Same: text})
		}
	}
	flush()
	return joinEdits(out)
}

// joinEdits merges two edits separated only by spaces into one, so that "[-red wooden-]
// {+blue metal+}" reads as one replacement rather than two interleaved ones. The spaces go into
// both sides, which keeps each side an exact piece of its text.
func joinEdits(cs []change) []change {
	out := cs[:0]
	for i := 0; i < len(cs); i++ {
		c := cs[i]
		n := len(out)
		if c.Same == "" && n >= 2 && out[n-2].Same == "" && out[n-1].Same != "" &&
			strings.TrimSpace(out[n-1].Same) == "" {
			prev, gap := out[n-2], out[n-1].Same
			out[n-2] = change{Del: prev.Del + gap + c.Del, Ins: prev.Ins + gap + c.Ins}
			out = out[:n-1]
			continue
		}
		out = append(out, c)
	}
	return out
}

// tokenLen is the length in bytes of the token s starts with: a run of spaces or of non-spaces.
func tokenLen(s string) int {
	r, _ := utf8.DecodeRuneInString(s)
	space := unicode.IsSpace(r)
	for i, r := range s {
		if unicode.IsSpace(r) != space {
			return i
		}
	}
	return len(s)
}

// trimEdit splits the spaces that the removed and added text share at both ends off an edit, so
// that markers hug words: " [-red-]{+blue+} " rather than "[- red -]{+ blue +}". A side that is
// all spaces keeps them, so a change of spacing stays visible.
func trimEdit(c change) (lead, del, ins, trail string) {
	del, ins = c.Del, c.Ins
	if del != "" && strings.TrimSpace(del) == "" || ins != "" && strings.TrimSpace(ins) == "" {
		return "", del, ins, ""
	}
	lead = sharedSpace(del, ins, true)
	del, ins = strings.TrimPrefix(del, lead), strings.TrimPrefix(ins, lead)
	trail = sharedSpace(del, ins, false)
	del, ins = strings.TrimSuffix(del, trail), strings.TrimSuffix(ins, trail)
	return lead, del, ins, trail
}

// sharedSpace is the whitespace that the non-empty sides of an edit share at their start
// (leading) or end.
func sharedSpace(del, ins string, leading bool) string {
	space := func(s string) string {
		if leading {
			return s[:len(s)-len(strings.TrimLeftFunc(s, unicode.IsSpace))]
		}
		return s[len(strings.TrimRightFunc(s, unicode.IsSpace)):]
	}
	switch {
	case del == "":
		return space(ins)
	case ins == "":
		return space(del)
	}
	a, b := space(del), space(ins)
	if a == b {
		return a
	}
	return ""
}
