package submitter

import (
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/keys"
	"github.com/axsched/ax/services/internal/membership"
	"github.com/axsched/ax/services/internal/ring"
	"github.com/axsched/ax/services/internal/route"
)

// registry is where GET /v1/nodes reads executor membership.
type registry struct {
	rdb       redis.UniversalClient
	keys      keys.Keys
	heartbeat time.Duration
	shards    int
}

// ServeNodes lets the submitter answer GET /v1/nodes from the membership
// registry; without it the route answers 503.
func (s *Submitter) ServeNodes(rdb redis.UniversalClient, k keys.Keys, heartbeat time.Duration, shards int) {
	if heartbeat <= 0 {
		heartbeat = membership.IntervalDefault
	}
	s.nodes = &registry{rdb: rdb, keys: k, heartbeat: heartbeat, shards: shards}
}

func (s *Submitter) nodeRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/nodes", s.handleNodes)
}

func (s *Submitter) handleNodes(w http.ResponseWriter, r *http.Request) {
	if s.nodes == nil {
		writeProblem(w, http.StatusServiceUnavailable, contracts.CodeUnavailable, "this submitter has no membership registry")
		return
	}
	nodes, err := membership.List(r.Context(), s.nodes.rdb, s.nodes.keys.Nodes(), s.clock.Now(), membership.DeadAfter(s.nodes.heartbeat))
	if err != nil {
		s.internal(w, "list nodes", err)
		return
	}
	table := route.Build(nodes, ring.Config{Shards: s.nodes.shards})
	for i := range nodes {
		if shards := table.TypeShards(nodes[i].Name); len(shards) > 0 {
			nodes[i].Shards = shards
		}
	}
	writeJSON(w, http.StatusOK, contracts.NodeList{Nodes: nodes, ShardCount: table.Shards()})
}
