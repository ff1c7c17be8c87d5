// Package membership is the executor registry. Every executor writes a
// heartbeat (its name, address, types, capacity and the IDs of the tasks it
// runs) into one Redis hash every Interval; a node whose last heartbeat is
// older than DeadAfter (three intervals) is dead, and the reaper hands its
// RUNNING tasks on at once instead of waiting for their leases to lapse.
//
// Redis losing the hash is harmless: each executor writes its whole entry
// on every heartbeat, so the registry is complete again one interval later,
// and a node missing from the registry is never declared dead.
package membership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/axsched/ax/contracts"
)

// Defaults.
const (
	IntervalDefault = 3 * time.Second
	// MissedBeats is how many heartbeats a node may miss before it is dead.
	MissedBeats = 3
)

// DeadAfter is how old a node's last heartbeat may be before it is dead.
func DeadAfter(interval time.Duration) time.Duration { return MissedBeats * interval }

// Beat writes one node's heartbeat.
func Beat(ctx context.Context, rdb redis.UniversalClient, key string, n contracts.Node) error {
	data, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("encode heartbeat of %s: %w", n.Name, err)
	}
	if err := rdb.HSet(ctx, key, n.Name, data).Err(); err != nil {
		return fmt.Errorf("heartbeat of %s: %w", n.Name, err)
	}
	return nil
}

// Leave removes a node (graceful shutdown) so it is never taken for dead.
func Leave(ctx context.Context, rdb redis.UniversalClient, key, name string) error {
	return rdb.HDel(ctx, key, name).Err()
}

// List returns every registered node, marking those whose heartbeat is
// older than deadAfter at now (scheduler clock) as not alive, sorted by
// name. Entries that cannot be decoded are skipped.
func List(ctx context.Context, rdb redis.UniversalClient, key string, now time.Time, deadAfter time.Duration) ([]contracts.Node, error) {
	all, err := rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("read node registry: %w", err)
	}
	out := make([]contracts.Node, 0, len(all))
	for _, v := range all {
		var n contracts.Node
		if json.Unmarshal([]byte(v), &n) != nil {
			continue
		}
		n.Alive = now.Sub(n.LastHeartbeat) <= deadAfter
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Alive reports whether node is registered with a heartbeat no older than
// deadAfter at now (scheduler clock). A node missing from the registry is
// not alive: it left, was forgotten, or never joined. Callers that act on
// "not alive" must be safe when the registry itself was lost; the claim
// that takes over a dead claimant's lease is, because MySQL's fenced
// transfer lets only one claim of an attempt commit.
func Alive(ctx context.Context, rdb redis.UniversalClient, key, name string, now time.Time, deadAfter time.Duration) (bool, error) {
	v, err := rdb.HGet(ctx, key, name).Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read heartbeat of %s: %w", name, err)
	}
	var n contracts.Node
	if json.Unmarshal([]byte(v), &n) != nil {
		return false, nil
	}
	return now.Sub(n.LastHeartbeat) <= deadAfter, nil
}

// DefaultName is the node name of a process started without one:
// "<hostname>-<pid>-<token>", the token random per process start. The
// hostname and PID keep it readable; the token keeps it unique when a
// container restarts under the same pod name with PID 1 again. Under a
// name of the old process's the new one would inherit its identity: the
// registry would count the old node alive, and its RUNNING tasks would
// wait for their leases instead of being handed on when it missed its
// heartbeats.
func DefaultName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return Name(host, os.Getpid())
}

// Name is DefaultName for a given hostname and PID.
func Name(host string, pid int) string {
	return host + "-" + strconv.Itoa(pid) + "-" + strconv.FormatUint(uint64(rand.Uint32()), 36)
}
