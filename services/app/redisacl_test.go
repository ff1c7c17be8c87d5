package app_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/app"
	"github.com/axsched/ax/services/internal/testenv"
)

// TestServicesRunAsARedisACLUser runs the five services as a Redis ACL
// user with keys.ACLRules for the system's prefix: tasks due at once,
// later and after a retry run, and a cancel lands; the same user is
// refused a key outside the prefix and a command ax does not send.
func TestServicesRunAsARedisACLUser(t *testing.T) {
	admin, k := testenv.Redis(t)
	ctx := context.Background()
	user, password := "axtest-acl-"+testenv.Suffix(), "pw-"+testenv.Suffix()+testenv.Suffix()
	args := []any{"ACL", "SETUSER", user, "reset", "on", ">" + password}
	for _, r := range k.ACLRules() {
		args = append(args, r)
	}
	require.NoError(t, admin.Do(ctx, args...).Err())
	t.Cleanup(func() { admin.Do(context.Background(), "ACL", "DELUSER", user) })

	sys := startSystem(t, "127.0.0.1:6379", k.Prefix, func(c *app.Config) {
		c.RedisUser, c.RedisPassword = user, password
	})
	var ids []string
	for _, req := range []contracts.SubmitRequest{
		{Type: "ax.noop"}, {Type: "ax.noop", Delay: "1s"},
		{Type: "ax.flaky", Payload: json.RawMessage(`{"fail_times":1}`)},
	} {
		task, err := sys.api.Submit(ctx, req)
		require.NoError(t, err)
		ids = append(ids, task.ID)
	}
	later, err := sys.api.Submit(ctx, contracts.SubmitRequest{Type: "ax.noop", Delay: "1h"})
	require.NoError(t, err)
	for _, id := range ids {
		waitStatus(t, sys.api, id, contracts.StatusSuccess, 30*time.Second)
	}
	_, err = sys.api.Cancel(ctx, later.ID)
	require.NoError(t, err)
	waitStatus(t, sys.api, later.ID, contracts.StatusCancelled, 10*time.Second)
	n, err := admin.Exists(ctx, k.Nodes()).Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the services wrote under the prefix")

	limited := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", Username: user, Password: password})
	defer limited.Close()
	require.NoError(t, limited.Set(ctx, k.Prefix+":probe", "1", time.Minute).Err(), "a key under the prefix")
	for name, err := range map[string]error{
		"key outside the prefix": limited.Set(ctx, "elsewhere:"+k.Prefix, "1", time.Minute).Err(),
		"read outside":           limited.Get(ctx, "elsewhere:"+k.Prefix).Err(),
		"KEYS":                   limited.Keys(ctx, k.Prefix+":*").Err(),
		"FLUSHDB":                limited.Do(ctx, "FLUSHDB", "ASYNC").Err(),
		"CONFIG":                 limited.ConfigGet(ctx, "dir").Err(),
	} {
		require.ErrorContains(t, err, "NOPERM", name)
	}
}
