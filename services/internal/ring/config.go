package ring

import (
	"errors"
	"fmt"
)

// Ring defaults. 100 virtual nodes per node keep each node's
// share of the hash circle within roughly ±10 % of fair; a load factor of
// 1.25 lets a node hold at most a quarter more than the mean, which bounds
// the busiest node while leaving enough slack that a membership change
// moves little beyond the shards it must.
const (
	DefaultVirtualNodes = 100
	DefaultLoad         = 1.25

	// maxVirtualNodes bounds the ring size so a typo cannot stall every
	// rebuild; beyond a few hundred, more points no longer improve balance.
	maxVirtualNodes = 10000
)

// Config shapes a Ring. Zero fields take the defaults, so Config{} is a
// valid 64-shard ring.
type Config struct {
	// VirtualNodes is the number of points each node gets on the hash
	// circle (default DefaultVirtualNodes).
	VirtualNodes int
	// Load is the bounded-load factor: no node holds more than
	// ceil(Shards/nodes × Load) shards (default DefaultLoad; at least 1).
	Load float64
	// Shards is the number of shards to place (default DefaultShards).
	Shards int
}

// withDefaults fills zero fields, so callers may state only what differs.
func (c Config) withDefaults() Config {
	if c.VirtualNodes == 0 {
		c.VirtualNodes = DefaultVirtualNodes
	}
	if c.Load == 0 {
		c.Load = DefaultLoad
	}
	if c.Shards == 0 {
		c.Shards = DefaultShards
	}
	return c
}

// Validate reports whether c, after defaults, describes a usable ring. A
// load factor below 1 is rejected because the nodes' total capacity would
// then fall short of the shard count and some shards would have no owner.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.VirtualNodes < 1 || c.VirtualNodes > maxVirtualNodes {
		errs = append(errs, fmt.Errorf("ring: virtual nodes %d outside 1..%d", c.VirtualNodes, maxVirtualNodes))
	}
	if !(c.Load >= 1) { // also rejects NaN
		errs = append(errs, fmt.Errorf("ring: load factor %v below 1", c.Load))
	}
	if err := ValidateShards(c.Shards); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
