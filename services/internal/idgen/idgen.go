// Package idgen makes task IDs: snowflakes, time ordered and unique per
// node ID. Time order is why shards hash the ID (md5) instead of taking it
// modulo the shard count.
package idgen

import (
	"fmt"
	"time"

	"github.com/bwmarrin/snowflake"
)

// Generator makes IDs for one node.
type Generator struct {
	node *snowflake.Node
}

// New returns a generator for node (0..1023). Two live submitters must not
// share a node ID; a collision is caught by the primary key and retried.
func New(node int64) (*Generator, error) {
	n, err := snowflake.NewNode(node)
	if err != nil {
		return nil, fmt.Errorf("snowflake node %d: %w", node, err)
	}
	return &Generator{node: n}, nil
}

// Next returns a new ID.
func (g *Generator) Next() int64 { return g.node.Generate().Int64() }

// FirstAt is the smallest ID any generator makes at t or later: IDs are
// milliseconds since snowflake.Epoch shifted above the node and sequence
// bits. It turns a creation time into an ID bound, so that lists filter by
// creation time on the primary key. A time before the epoch gives 0.
func FirstAt(t time.Time) int64 {
	ms := t.UnixMilli() - snowflake.Epoch
	if ms <= 0 {
		return 0
	}
	return ms << (snowflake.NodeBits + snowflake.StepBits)
}
