package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// isTimestamp skips layouts by the string's shape; it must accept exactly what trying every
// layout with time.Parse accepts.
func TestIsTimestampSkipsOnlyLayoutsThatCannotParse(t *testing.T) {
	every := func(s string) bool {
		for _, layout := range timestampLayouts {
			if _, err := time.Parse(layout, s); err == nil {
				return true
			}
		}
		return false
	}
	dates := []string{"2025-01-02", "2025-02-30", "2025-1-02", "25-01-02", "2025/01/02", ""}
	times := []string{"", "T09:00", "T09:00:00", "T09:00:00.5", "T09:00:00,123456789", " 09:00:00", " 09:00", "T9:00", "t09:00", "X09:00:00", "T24:00:00", "T09:00:60"}
	zones := []string{"", "Z", "+01:00", "-05:30", "+0100", "+01", "z", "Z ", " ", "+01:00Z", "-", "+ab:cd", "+01:0"}
	n := 0
	for _, d := range dates {
		for _, tm := range times {
			for _, z := range zones {
				s := d + tm + z
				assert.Equal(t, every(s), isTimestamp(s), "%q", s)
				if every(s) {
					n++
				}
			}
		}
	}
	assert.Greater(t, n, 20) // the corpus holds timestamps of every layout
	for _, layout := range timestampLayouts {
		s := time.Date(2026, 11, 29, 6, 7, 8, 0, time.FixedZone("", 3600)).Format(layout)
		assert.True(t, isTimestamp(s), s)
	}
}
