package route

import (
	"testing"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/ring"
)

func TestTableRoutesEachTypeOverItsOwnLiveNodes(t *testing.T) {
	nodes := []contracts.Node{
		{Name: "a", Types: []string{"x", "y"}, Alive: true},
		{Name: "b", Types: []string{"x"}, Alive: true},
		{Name: "c", Types: []string{"x", "y"}, Alive: false, LastHeartbeat: time.Unix(0, 0)},
	}
	table := Build(nodes, ring.Config{})
	tests := []struct {
		name    string
		typ     string
		wantAny []string // owners allowed
		ok      bool
	}{
		{"served by two live nodes", "x", []string{"a", "b"}, true},
		{"served by one live node", "y", []string{"a"}, true},
		{"served by nobody", "z", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[string]int{}
			for id := int64(1); id <= 2000; id++ {
				owner, ok := table.Owner(tc.typ, id)
				if ok != tc.ok {
					t.Fatalf("task %d: ok = %v", id, ok)
				}
				if ok {
					seen[owner]++
				}
			}
			if !tc.ok {
				return
			}
			for _, n := range tc.wantAny {
				if seen[n] == 0 {
					t.Errorf("%s got no tasks of %s: %v", n, tc.typ, seen)
				}
			}
			if len(seen) != len(tc.wantAny) {
				t.Errorf("owners %v, want only %v (a dead node or a node not serving the type got work)", seen, tc.wantAny)
			}
		})
	}

	// What GET /v1/nodes shows is what Owner routes by.
	shards := table.TypeShards("b")
	if len(shards) != 1 || len(shards["x"]) == 0 {
		t.Fatalf("b's shards: %v", shards)
	}
	for _, s := range shards["x"] {
		for id := int64(1); id <= 5000; id++ {
			if ring.Shard(id, table.Shards()) == s {
				if owner, _ := table.Owner("x", id); owner != "b" {
					t.Fatalf("task %d in b's shard %d routed to %s", id, s, owner)
				}
				break
			}
		}
	}
	if got := table.TypeShards("c"); len(got) != 0 {
		t.Errorf("dead node owns %v", got)
	}
}
