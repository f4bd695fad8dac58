package prompts

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/sandbox"
)

// MaxRepairDiagnostics is the most diagnostics a repair message lists; it says how many more
// there were.
const MaxRepairDiagnostics = 20

// User renders the user message for a customer's request. The request is embedded as one JSON
// string, with <, > and line breaks escaped, so that nothing in it (a closing tag, an
// "ignore the instructions above", a forged instruction line) can read as part of the prompt.
func User(request string) string {
	return mustRender("user.tmpl", struct{ Request string }{jsonString(request)})
}

// Rejected renders the message that asks for a new plan after a reviewer rejected the last one,
// quoting their feedback as a JSON string.
func Rejected(feedback string) string {
	return mustRender("rejected.tmpl", struct{ Feedback string }{jsonString(feedback)})
}

// outcomeText says in words what each outcome of a failed attempt means. Outcomes not listed
// are shown as they are.
var outcomeText = map[string]string{
	string(sandbox.OutcomeCheckFailed):   "it did not pass the check, so nothing ran",
	string(sandbox.OutcomeRuntimeError):  "it stopped with an error while running",
	string(sandbox.OutcomeLimitExceeded): "it hit a limit of the sandbox",
	"contract_violation":                 "it ran, but its result breaks the contract",
}

// Repair renders the follow-up message after a failed attempt: the outcome (such as
// "check_failed" or "contract_violation"), every diagnostic (at most MaxRepairDiagnostics) as
// "line:col: code: message (hint: ...)" on one line (line breaks in a message are shown as \n),
// and the program with line numbers, which are the
// diagnostics' lines, asking for one corrected <execute_python> block. An empty program (the
// reply held none) is said so.
func Repair(program string, diags diag.List, outcome string) string {
	data := struct {
		Outcome     string
		Total       int
		Diagnostics []string
		More        int
		Lines       []string
	}{Outcome: outcome, Total: len(diags), Lines: numberLines(program)}
	if text, ok := outcomeText[outcome]; ok {
		data.Outcome = fmt.Sprintf("%s (%s)", text, outcome)
	}
	for i, d := range diags {
		if i == MaxRepairDiagnostics {
			data.More = len(diags) - i
			break
		}
		data.Diagnostics = append(data.Diagnostics, oneLine.Replace(d.String()))
	}
	return mustRender("repair.tmpl", data)
}

// oneLine keeps a diagnostic on its line: a message that quotes the plan's own text (fail("a\nb"))
// cannot start a line of the prompt.
var oneLine = strings.NewReplacer("\r\n", `\n`, "\n", `\n`, "\r", `\n`)

// numberLines prefixes each line of program with its right-aligned 1-based number and "| ".
// It returns nil for a program that is only white space.
func numberLines(program string) []string {
	program = strings.TrimRight(strings.ReplaceAll(program, "\r\n", "\n"), "\n")
	if strings.TrimSpace(program) == "" {
		return nil
	}
	lines := strings.Split(program, "\n")
	width := len(fmt.Sprint(len(lines)))
	for i, l := range lines {
		lines[i] = strings.TrimRight(fmt.Sprintf("%*d | %s", width, i+1, l), " ")
	}
	return lines
}

// mustRender executes one of the embedded message templates; they take only strings, so an
// error is a defect of the package.
func mustRender(name string, data any) string {
	var b bytes.Buffer
	if err := templates.ExecuteTemplate(&b, name, data); err != nil {
		panic(fmt.Sprintf("prompts: rendering %s: %v", name, err))
	}
	return b.String()
}
