package diag

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// JSONError names the file and, when err says where (a syntax error, a value of the wrong
// type), the line and column in text where decoding it failed: "domain.json:12:5: ...".
func JSONError(file, text string, err error) error {
	var offset int64 = -1
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		offset = syn.Offset
	case errors.As(err, &typ):
		offset = typ.Offset
	}
	if offset < 0 || offset > int64(len(text)) {
		return fmt.Errorf("%s: %w", file, err)
	}
	before := text[:offset]
	line := strings.Count(before, "\n") + 1
	col := int(offset) - strings.LastIndex(before, "\n")
	return fmt.Errorf("%s:%d:%d: %w", file, line, col, err)
}
