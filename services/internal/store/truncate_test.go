package store_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/internal/store"
)

func TestTruncateKeepsUTF8Whole(t *testing.T) {
	tests := []struct {
		name string
		s    string
		n    int
		want string
	}{
		{"short enough", "hello", 5, "hello"},
		{"ascii cut", "hello world", 8, "hello..."},
		{"two-byte rune not split", "ééééé", 8, "éé..."},  // 10 bytes; é is 2
		{"three-byte rune not split", "日本語です", 8, "日..."}, // 15 bytes; each is 3
		{"four-byte rune not split", "😀😀😀", 9, "😀..."},    // 12 bytes; each is 4
		{"cut falls on a boundary", "日本語です", 9, "日本..."},
		{"no room for the ellipsis", "日本語", 2, ""},
		{"no room at all", "abc", 0, ""},
		{"negative width", "abc", -1, ""},
		{"empty", "", 3, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := store.Truncate(tc.s, tc.n)
			require.Equal(t, tc.want, got)
			require.True(t, utf8.ValidString(got), "%q is not valid UTF-8", got)
			require.LessOrEqual(t, len(got), max(tc.n, 0))
		})
	}
	long := strings.Repeat("ß", 1000)
	require.Len(t, store.Truncate(long, 1500), 1499, "one byte short rather than half a ß")
}
