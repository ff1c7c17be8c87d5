package ring

import (
	"cmp"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
)

// table is one computed assignment: owners[s] indexes nodes, which is
// sorted. It is never modified after build, so readers may share it.
type table struct {
	nodes  []string
	owners []int32
}

// vnode is one point on the hash circle.
type vnode struct {
	hash uint64
	node int32 // index into the sorted node list
	idx  int32 // which of the node's virtual nodes
}

// build places shards 0..Shards-1 on nodes with consistent hashing with
// bounded loads (Mirrokni, Thorup, Zadimoghaddam 2016): each shard starts
// at its point on the circle and walks clockwise to the first virtual node
// whose node still has room below ceil(Shards/len(nodes) × Load).
//
// The result depends only on the set of nodes: they are sorted first, ties
// between equal hashes are broken by node then virtual-node index, and
// shards are placed in ascending order. That is what lets every process
// compute the same assignment from the same membership without talking.
func build(cfg Config, members []string) table {
	nodes := slices.Clone(members)
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	if len(nodes) == 0 {
		return table{}
	}

	points := make([]vnode, 0, len(nodes)*cfg.VirtualNodes)
	var key []byte
	for n, name := range nodes {
		for i := range cfg.VirtualNodes {
			key = strconv.AppendInt(append(append(key[:0], name...), '#'), int64(i), 10)
			points = append(points, vnode{hash: point(key), node: int32(n), idx: int32(i)})
		}
	}
	slices.SortFunc(points, func(a, b vnode) int {
		return cmp.Or(cmp.Compare(a.hash, b.hash), cmp.Compare(a.node, b.node), cmp.Compare(a.idx, b.idx))
	})

	limit := capacity(cfg.Shards, len(nodes), cfg.Load)
	load := make([]int, len(nodes))
	owners := make([]int32, cfg.Shards)
	for s := range owners {
		key = strconv.AppendInt(append(key[:0], "shard#"...), int64(s), 10)
		h := point(key)
		start, _ := slices.BinarySearchFunc(points, h, func(v vnode, h uint64) int { return cmp.Compare(v.hash, h) })
		// Total capacity is at least Shards, so a node with room exists
		// and the walk ends within one turn of the circle.
		for j := range len(points) {
			v := points[(start+j)%len(points)]
			if load[v.node] < limit {
				load[v.node]++
				owners[s] = v.node
				break
			}
		}
	}
	return table{nodes: nodes, owners: owners}
}

// capacity is the most shards one node may hold. The small epsilon keeps
// float error from turning an exact bound into the next integer: 64/10 ×
// 1.25 evaluates to 8.000000000000002, which must stay 8, not become 9.
func capacity(shards, nodes int, load float64) int {
	return int(math.Ceil(float64(shards)/float64(nodes)*load - 1e-9))
}

// point places a key on the circle. FNV-1a is in the standard library and
// fast, but keys like "node#17" and "node#18" differ in one trailing byte
// and FNV spreads that poorly; the murmur3 finalizer mixes every input bit
// into every output bit so neighbouring keys land far apart.
func point(key []byte) uint64 {
	f := fnv.New64a()
	f.Write(key) // never fails
	h := f.Sum64()
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
