package membership_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/internal/membership"
)

// Two starts of a process with the same hostname and PID (a container
// restarted in place) get different names that still read as the host.
func TestNameIsNewAtEveryStartUnderTheSameHostnameAndPID(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		n := membership.Name("pod-0", 1)
		require.True(t, strings.HasPrefix(n, "pod-0-1-"), n)
		require.False(t, seen[n], "name %s repeated", n)
		seen[n] = true
	}
	host, err := os.Hostname()
	require.NoError(t, err)
	prefix := host + "-" + strconv.Itoa(os.Getpid()) + "-"
	require.True(t, strings.HasPrefix(membership.DefaultName(), prefix), "want %s<token>", prefix)
	require.NotEqual(t, membership.DefaultName(), membership.DefaultName())
}
