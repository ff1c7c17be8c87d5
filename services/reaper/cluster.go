package reaper

import (
	"context"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/ring"
	"github.com/axsched/ax/services/internal/route"
)

// typesEvery is how often the registered task types are read from MySQL
// for the cluster gauges: types change rarely, passes run every second.
const typesEvery = 5 * time.Second

// clusterView is what the cluster gauges showed last, so a node or type
// that is gone can have its series removed rather than frozen.
type clusterView struct {
	types   []string // registered in MySQL, as last read
	typesAt time.Time
	shards  map[[2]string]bool // node, type
	served  map[string]bool
}

// observeCluster sets the cluster gauges from one read of the membership
// registry: executors alive and dead, live executors per type (0 for a
// registered type nobody serves: AxNoLiveExecutor), and the shards each
// live node owns on each type's ring (the dispatcher's routing). Every
// reaper replica exports the same view; aggregate with max.
func (r *Reaper) observeCluster(ctx context.Context, nodes []contracts.Node) {
	r.viewMu.Lock()
	defer r.viewMu.Unlock()
	v := &r.view
	if time.Since(v.typesAt) >= typesEvery {
		if types, err := r.store.ListTypes(ctx); err == nil {
			v.types, v.typesAt = v.types[:0], time.Now()
			for _, t := range types {
				v.types = append(v.types, t.Name)
			}
		} else if ctx.Err() == nil {
			r.logger.Debug("read task types for the cluster gauges", "err", err)
		}
	}
	served := map[string]int{}
	for _, t := range v.types {
		served[t] = 0
	}
	alive := 0
	for _, n := range nodes {
		for _, t := range n.Types {
			if n.Alive {
				served[t]++
			} else if _, ok := served[t]; !ok {
				served[t] = 0
			}
		}
		if n.Alive {
			alive++
		}
	}
	metrics.ClusterExecutors.WithLabelValues("alive").Set(float64(alive))
	metrics.ClusterExecutors.WithLabelValues("dead").Set(float64(len(nodes) - alive))
	for t := range v.served {
		if _, ok := served[t]; !ok {
			metrics.ClusterTypeExecutors.DeleteLabelValues(t)
		}
	}
	v.served = map[string]bool{}
	for t, n := range served {
		metrics.ClusterTypeExecutors.WithLabelValues(t).Set(float64(n))
		v.served[t] = true
	}
	table := route.Build(nodes, ring.Config{Shards: r.cfg.Shards})
	owned := map[[2]string]bool{}
	for _, n := range nodes {
		for t, shards := range table.TypeShards(n.Name) {
			owned[[2]string{n.Name, t}] = true
			metrics.ClusterShardsOwned.WithLabelValues(n.Name, t).Set(float64(len(shards)))
		}
	}
	for k := range v.shards {
		if !owned[k] {
			metrics.ClusterShardsOwned.DeleteLabelValues(k[0], k[1])
		}
	}
	v.shards = owned
}
