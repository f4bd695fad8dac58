package contracts_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/contracts"
)

func TestOutputContract(t *testing.T) {
	d := loadInventory(t)
	const good = "We have 3 Mystique in stock at $70.00 each, e.g. for a gift."
	tests := []struct {
		name    string
		globals map[string]any
		want    []string
		mention []string
	}{
		{name: "valid", globals: globals("success", good), want: []string{}},
		{name: "every allowed STATUS", globals: globals("unsupported_intent", "Sorry, we only sell sunglasses."), want: []string{}},
		{name: "two sentences", globals: globals("insufficient_stock", "Sorry, we only have 3 Mystique in stock. Would you like those?"), want: []string{}},
		{name: "exactly the character limit", globals: globals("success", strings.Repeat("a", 400)), want: []string{}},
		{name: "surrounding space is trimmed", globals: globals("success", "  \n"+good+"\n"), want: []string{}},
		{name: "nothing set", globals: map[string]any{},
			want: []string{contracts.CodeAnswerMissing, contracts.CodeStatusMissing}},
		{name: "nil globals", globals: nil,
			want: []string{contracts.CodeAnswerMissing, contracts.CodeStatusMissing}},
		{name: "answer is None", globals: map[string]any{"STATUS": "success", "answer_text": nil},
			want: []string{contracts.CodeAnswerType}, mention: []string{"None"}},
		{name: "answer is a number", globals: map[string]any{"STATUS": "success", "answer_text": int64(3)},
			want: []string{contracts.CodeAnswerType}, mention: []string{"int 3"}},
		{name: "answer is a list", globals: map[string]any{"STATUS": "success", "answer_text": []any{"Aviator"}},
			want: []string{contracts.CodeAnswerType}, mention: []string{"list"}},
		{name: "answer is blank", globals: globals("success", " \t\n"),
			want: []string{contracts.CodeAnswerEmpty}},
		{name: "answer too long", globals: globals("success", strings.Repeat("a", 401)),
			want: []string{contracts.CodeAnswerTooLong}, mention: []string{"401", "400"}},
		{name: "characters, not bytes", globals: globals("success", strings.Repeat("é", 400)), want: []string{}},
		{name: "three sentences", globals: globals("success", "We have Aviator. It costs $80.00. Enjoy!"),
			want: []string{contracts.CodeAnswerSentences}, mention: []string{"3 sentences", "at most 2"}},
		{name: "dict repr", globals: globals("success", "Found: {'item_id': 'SG005', 'price': 60.0}"),
			want: []string{contracts.CodeAnswerNotCustomer}, mention: []string{"dict repr"}},
		{name: "list of dicts", globals: globals("no_match", "Results: [{...}]"),
			want: []string{contracts.CodeAnswerNotCustomer}, mention: []string{"list repr"}},
		{name: "traceback", globals: globals("invalid_request", "Traceback (most recent call last): KeyError"),
			want: []string{contracts.CodeAnswerNotCustomer}, mention: []string{"traceback"}},
		{name: "log lines", globals: globals("success", "step 1: found SG001\nstep 2: updated stock"),
			want: []string{contracts.CodeAnswerNotCustomer}, mention: []string{"2 lines"}},
		{name: "STATUS is a number", globals: map[string]any{"STATUS": int64(1), "answer_text": good},
			want: []string{contracts.CodeStatusType}, mention: []string{"int 1"}},
		{name: "STATUS is None", globals: map[string]any{"STATUS": nil, "answer_text": good},
			want: []string{contracts.CodeStatusType}},
		{name: "STATUS misspelt", globals: globals("sucess", good),
			want: []string{contracts.CodeStatusInvalid}, mention: []string{`did you mean STATUS = "success"?`}},
		{name: "STATUS in capitals", globals: globals("SUCCESS", good),
			want: []string{contracts.CodeStatusInvalid}, mention: []string{`did you mean STATUS = "success"?`}},
		{name: "STATUS with a space", globals: globals("insufficient stock", good),
			want: []string{contracts.CodeStatusInvalid}, mention: []string{`"insufficient_stock"?`}},
		{name: "STATUS far from any", globals: globals("ok", good),
			want: []string{contracts.CodeStatusInvalid}, mention: []string{"one of success, no_match, insufficient_stock, invalid_request, unsupported_intent"}},
		{name: "ESC in the answer", globals: globals("success", "Done. \x1b]0;pwned\x07\x1b[2J\x1b[8m"),
			want: []string{contracts.CodeAnswerControl}, mention: []string{"4 control characters", "U+001B at character 7"}},
		{name: "C1 CSI in the answer", globals: globals("success", "Done \u009b2J"),
			want: []string{contracts.CodeAnswerControl}, mention: []string{"U+009B at character 6"}},
		{name: "bidi override in the answer", globals: globals("success", "Total \u202e00.08$"),
			want: []string{contracts.CodeAnswerControl}, mention: []string{"U+202E"}},
		{name: "NUL in the answer", globals: globals("success", "Done\x00 really"),
			want: []string{contracts.CodeAnswerControl}, mention: []string{"U+0000 at character 5"}},
		{name: "a tab in the answer", globals: globals("success", "Aviator\t$80.00"),
			want: []string{contracts.CodeAnswerControl}, mention: []string{"U+0009"}},
		{name: "a carriage return in the answer", globals: globals("success", "Approved\rRejected"),
			want: []string{contracts.CodeAnswerControl}, mention: []string{"U+000D"}},
		{name: "a byte that is not UTF-8", globals: globals("success", "Caf\xe9"),
			want: []string{contracts.CodeAnswerControl}, mention: []string{"the byte 0xe9 at character 4"}},
		{name: "a line break and emoji are text", globals: globals("success", "Done! 👨\u200d👩\u200d👧 Thanks.\r\n"), want: []string{}},
		{name: "everything wrong at once", globals: map[string]any{"STATUS": "done", "answer_text": "Aa. Bb. Cc.\n" + strings.Repeat("x", 400)},
			want: []string{contracts.CodeAnswerTooLong, contracts.CodeAnswerSentences, contracts.CodeAnswerNotCustomer, contracts.CodeStatusInvalid}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := d.Check(contracts.Input{Globals: tt.globals, Committed: seeded})
			require.NoError(t, err)
			assert.Equal(t, tt.want, codes(got), "diagnostics:\n%s", got)
			assertWellFormed(t, got)
			for _, m := range tt.mention {
				assert.Contains(t, got.String(), m)
			}
			if strings.Contains(tt.name, "far from any") {
				assert.NotContains(t, got.String(), "did you mean")
			}
		})
	}
}

func TestCountSentences(t *testing.T) {
	tests := []struct {
		text string
		want int
	}{
		{"", 0},
		{"...", 0},
		{"!?", 0},
		{"We have 3 Aviator sunglasses in stock at $80.00 each.", 1},
		{"We have 3 Aviator sunglasses in stock", 1},
		{"Sold! Thanks.", 2},
		{"It costs $80. It ships today. Enjoy!", 3},
		{"Really?! Yes.", 2},
		{"No. We do not.", 2},
		{"Price: 80.00", 1},
		{"Version 1.2.3 is out.", 1},
		{"e.g. Aviator costs approx. 80.00 dollars.", 1},
		{"Mr. Smith bought 2. Enjoy!", 2},
		{"Dr. J. Smith, etc. are here.", 1},
		{"We open at 9 a.m. tomorrow.", 1},
		{"Our store (U.S.) ships fast.", 1},
		{"Wait... we have it.", 1},
		{"Wait… we have it.", 1},
		{`He said "done." Then he left.`, 2},
		{"(Sold out.) Sorry.", 2},
		{"Thanks!!! Come again.", 2},
		{"Mail info@shop.example for help.", 1},
		{"Sold 2.Thanks", 1},
		{"Total: 260.00. Thank you.", 2},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, contracts.CountSentences(tt.text), "%q", tt.text)
	}
}

// Ordinary customer prose never trips the dump heuristics.
func TestAnswerHeuristicsAcceptProse(t *testing.T) {
	d := loadInventory(t)
	for _, s := range []string{
		"We have {3} Aviator left.",
		"Use code [SAVE10] at checkout.",
		"The 'Aviator' is $80.00.",
		`The "Classic" (SG005) costs $60.00: a great pick.`,
		"It's great: 'cool', really.",
		"Options: Aviator, Classic and Moon [round].",
		"Our bestseller is the Aviator; we have 23 in stock.",
	} {
		got, err := d.Check(contracts.Input{Globals: globals("success", s)})
		require.NoError(t, err)
		assert.Empty(t, got, "%q: %s", s, got)
	}
	for _, s := range []string{
		`Found [{"item_id": "SG001"}]`,
		`Items: ['Aviator', 'Classic']`,
		`Items: ["Aviator"]`,
		`{"name": "Aviator"}`,
		"<function main at 0x1>",
		"Sold.\n\nThanks.",
	} {
		got, err := d.Check(contracts.Input{Globals: globals("success", s)})
		require.NoError(t, err)
		assert.Equal(t, []string{contracts.CodeAnswerNotCustomer}, codes(got), "%q", s)
	}
}

func FuzzAnswer(f *testing.F) {
	for _, s := range []string{"", "a. b. c.", "80.00!", "e.g.", "…", "{'a': 1}", "[{", "[\"", "x\ny", "\xff.", "Mr.", "'", "{'"} {
		f.Add(s)
	}
	d := loadInventory(f)
	allowed := map[string]bool{
		contracts.CodeAnswerEmpty: true, contracts.CodeAnswerTooLong: true,
		contracts.CodeAnswerSentences: true, contracts.CodeAnswerNotCustomer: true, contracts.CodeAnswerControl: true,
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := contracts.CountSentences(s)
		if n < 0 || n > len(s) {
			t.Fatalf("CountSentences(%q) = %d", s, n)
		}
		got, err := d.Check(contracts.Input{Globals: globals("success", s)})
		if err != nil {
			t.Fatal(err)
		}
		for _, dg := range got {
			if !allowed[dg.Code] {
				t.Fatalf("%q: unexpected %s", s, dg)
			}
		}
	})
}
