package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/contracts/client"
)

// AwaitLiveExecutors waits until the API lists n live executors and
// returns the list.
func AwaitLiveExecutors(t testing.TB, api *client.Client, n int, within time.Duration) *contracts.NodeList {
	t.Helper()
	var list *contracts.NodeList
	Eventually(t, within, "live executors in the registry", func() bool {
		var err error
		list, err = api.ListNodes(context.Background())
		require.NoError(t, err)
		alive := 0
		for _, nd := range list.Nodes {
			if nd.Alive {
				alive++
			}
		}
		return alive == n
	})
	return list
}
