package ready

import "testing"

func TestGateOpensAfterEveryPart(t *testing.T) {
	tests := []struct {
		parts, done int
		open        bool
	}{
		{0, 0, true},
		{1, 0, false},
		{1, 1, true},
		{3, 2, false},
		{3, 3, true},
		{2, 5, true}, // extra reports are harmless
	}
	for _, tc := range tests {
		g := New(tc.parts)
		for range tc.done {
			g.Done()
		}
		if g.Open() != tc.open {
			t.Errorf("parts %d, done %d: open = %v", tc.parts, tc.done, g.Open())
		}
	}
}
