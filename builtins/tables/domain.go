package tables

import "fmt"

// formatID renders prefix plus n zero-padded to digits: TXN002.
func formatID(prefix string, digits, n int) string {
	return fmt.Sprintf("%s%0*d", prefix, digits, n)
}
