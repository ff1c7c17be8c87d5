package ring

import (
	"fmt"
	"testing"
)

// benchNodes is a typical cluster: ten executors.
func benchNodes() []string {
	nodes := make([]string, 10)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("executor-%02d", i)
	}
	return nodes
}

// BenchmarkShard measures hashing one task ID, done once per task.
func BenchmarkShard(b *testing.B) {
	for i := range b.N {
		Shard(int64(i), 256)
	}
}

// BenchmarkOwner measures the per-task lookup the executor does.
func BenchmarkOwner(b *testing.B) {
	r := ringOf(Config{Shards: 256}, benchNodes())
	b.ResetTimer()
	for i := range b.N {
		r.Owner(i & 255)
	}
}

// BenchmarkOwnerParallel measures lookups contending on the read lock.
func BenchmarkOwnerParallel(b *testing.B) {
	r := ringOf(Config{Shards: 256}, benchNodes())
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			r.Owner(i & 255)
		}
	})
}

// BenchmarkRebuild measures what every membership change costs: a full
// recomputation for 10 nodes × 100 virtual nodes × 256 shards.
func BenchmarkRebuild(b *testing.B) {
	cfg := Config{Shards: 256}.withDefaults()
	nodes := benchNodes()
	b.ReportAllocs()
	for range b.N {
		build(cfg, nodes)
	}
}
