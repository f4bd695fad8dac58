package table

import "fmt"

// CompareKeys orders key values naturally: numbers before strings, numbers by value, strings with
// runs of digits compared as numbers ("TXN9" < "TXN10" < "txn10"). It returns -1, 0 or +1.
//
// TODO(keys): natural order; this placeholder compares the printed forms.
func CompareKeys(a, b any) int {
	sa, sb := fmt.Sprint(a), fmt.Sprint(b)
	switch {
	case sa < sb:
		return -1
	case sa > sb:
		return 1
	}
	return 0
}
