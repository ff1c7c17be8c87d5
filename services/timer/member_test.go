package timer

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
)

func TestLaneMembers(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, tc := range []struct {
		name   string
		ref    store.DueRef
		member string
	}{
		{"ready", store.DueRef{ID: 42, Type: "ax.noop", Attempt: 0, Status: contracts.StatusReady}, "42:0:ready:ax.noop"},
		{"retrying", store.DueRef{ID: 7, Type: "mail.send-v2", Attempt: 3, Status: contracts.StatusRetrying}, "7:3:retrying:mail.send-v2"},
		{"no type: bare ID", store.DueRef{ID: 9, Status: contracts.StatusReady}, "9"},
		{"no state: bare ID", store.DueRef{ID: 9, Type: "ax.noop"}, "9"},
		{"traced", store.DueRef{ID: 5, Type: "ax.noop", Attempt: 1, Status: contracts.StatusReady, TraceParent: tp},
			"5:1:ready:ax.noop/" + tp},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.member, member(tc.ref))
			back, err := parseMember(tc.member)
			require.NoError(t, err)
			want := store.DueRef{ID: tc.ref.ID}
			if tc.member != "9" {
				want = store.DueRef{ID: tc.ref.ID, Type: tc.ref.Type, Attempt: tc.ref.Attempt, Status: tc.ref.Status,
					TraceParent: tc.ref.TraceParent}
			}
			require.Equal(t, want, back)
		})
	}
	for _, bad := range []string{"", "x", "-1", "0", "5:", "5:1:ready", "5:1:ready:", "5:x:ready:t", "5:-1:ready:t", "5:1:running:t"} {
		_, err := parseMember(bad)
		require.Error(t, err, "member %q", bad)
	}
}
