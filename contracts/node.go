package contracts

import "time"

// Node is an executor as its heartbeats describe it.
type Node struct {
	Name     string   `json:"name"`
	Addr     string   `json:"addr"`
	Version  string   `json:"version"`
	Types    []string `json:"types"`
	Capacity int      `json:"capacity"`
	// Running lists the IDs of the tasks the node is running.
	Running       []string  `json:"running"`
	StartedAt     time.Time `json:"started_at"`
	LastHeartbeat time.Time `json:"last_heartbeat"`
	// Alive is false once the node missed three heartbeats.
	Alive bool `json:"alive"`
	// Shards are, for each task type the node serves, the shards it owns
	// on that type's consistent hash ring of the live nodes serving it:
	// the dispatcher sends each task to the owner of its shard (filled by
	// GET /v1/nodes, not by heartbeats).
	Shards map[string][]int `json:"shards,omitempty"`
}

// NodeList is the body of GET /v1/nodes.
type NodeList struct {
	Nodes []Node `json:"nodes"`
	// ShardCount is the number of shards on the ring.
	ShardCount int `json:"shard_count"`
}
