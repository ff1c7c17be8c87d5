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

// A type in rollout splits its live nodes by version: the canary side is
// the nodes of the canary version, the stable side every other version;
// each side's ring spreads that side's tasks over its own nodes only.
func TestVersionOwnerSplitsByVersion(t *testing.T) {
	nodes := []contracts.Node{
		{Name: "s1", Version: "v1", Types: []string{"x"}, Alive: true},
		{Name: "s2", Version: "dev", Types: []string{"x"}, Alive: true},
		{Name: "c1", Version: "v2", Types: []string{"x"}, Alive: true},
		{Name: "c2", Version: "v2", Types: []string{"x"}, Alive: true},
		{Name: "c3", Version: "v2", Types: []string{"x"}, Alive: false},
		{Name: "o1", Version: "v2", Types: []string{"y"}, Alive: true},
	}
	table := Build(nodes, ring.Config{})
	for _, tc := range []struct {
		name     string
		typ      string
		onCanary bool
		want     map[string]bool
	}{
		{"canary side", "x", true, map[string]bool{"c1": true, "c2": true}},
		{"stable side: every other version", "x", false, map[string]bool{"s1": true, "s2": true}},
		{"a type with no stable node", "y", false, map[string]bool{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[string]bool{}
			for id := int64(1); id <= 500; id++ {
				owner, ok := table.VersionOwner(tc.typ, "v2", tc.onCanary, id)
				if ok != (len(tc.want) > 0) {
					t.Fatalf("task %d: ok = %v", id, ok)
				}
				if ok {
					if !tc.want[owner] {
						t.Fatalf("task %d went to %s, not a node of its side %v", id, owner, tc.want)
					}
					seen[owner] = true
				}
			}
			if len(seen) != len(tc.want) {
				t.Fatalf("tasks reached %v, want every node of %v", seen, tc.want)
			}
		})
	}
	if v := table.Versions("x"); !v["v1"] || !v["v2"] || !v["dev"] || len(v) != 3 {
		t.Fatalf("versions of x = %v", v)
	}
}
