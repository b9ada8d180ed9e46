package config

import (
	"fmt"
	"time"

	"github.com/synod-dev/synod/shard"
)

// Placement configures the placement service's decisions for a sharded
// namespace (issue 33 item 2; shard.Decide, node/placer.go). Absent: the
// placement namespace only holds the slot map and migrations started by an
// operator; present: its leader decides splits, merges, replacements and
// leader balance, logs each decision, and carries out splits and merges
// as slot migrations. Zero fields take shard.DefaultPlaceParams' values.
//
//	namespaces:
//	  - name: default
//	    shards:
//	      - {name: s0, slots: 0-8191, nodes: [n1, n2, n3]}
//	      - {name: s1, slots: 8192-16383, nodes: [n4, n5, n6]}
//	      - {name: s2, slots: "", nodes: [n7, n8, n9]}   # a spare: splits go here
//	      - {name: s3, slots: "", nodes: []}             # unplaced: a split with no spare creates it
//	    placement: {split_ops: 2500, dead_after: 60s}
type Placement struct {
	SplitKeys  int64   `yaml:"split_keys,omitempty"`
	SplitBytes int64   `yaml:"split_bytes,omitempty"`
	SplitOps   float64 `yaml:"split_ops,omitempty"`
	MergeKeys  int64   `yaml:"merge_keys,omitempty"`
	MergeBytes int64   `yaml:"merge_bytes,omitempty"`
	MergeOps   float64 `yaml:"merge_ops,omitempty"`
	MinShards  int     `yaml:"min_shards,omitempty"`
	// NoMerge turns merges off (splits and replacements stay).
	NoMerge    bool   `yaml:"no_merge,omitempty"`
	DeadAfter  string `yaml:"dead_after,omitempty"`  // a duration, "60s"
	MergeDelay string `yaml:"merge_delay,omitempty"` // a duration, "5m"
	Cooldown   string `yaml:"cooldown,omitempty"`    // a duration, "30s"
	// BalanceOps: a node leading or hosting more than this many requests
	// per second has a leadership or a replica moved to a less loaded node
	// (0: shard.DefaultPlaceParams' 1,000; negative: no balance by load);
	// BalanceMargin: the fraction of its load a move must take off
	// (hysteresis; 0: 0.25).
	BalanceOps    float64 `yaml:"balance_ops,omitempty"`
	BalanceMargin float64 `yaml:"balance_margin,omitempty"`
	// BalanceBytes: a node holding more than this many bytes (the data
	// of the groups it hosts) has a replica moved to a node holding less
	// (0: shard.DefaultPlaceParams' 64 MiB; negative: no balance by data
	// size); the move takes BalanceMargin off as a load move does.
	BalanceBytes int64 `yaml:"balance_bytes,omitempty"`
	// Rate is the keys per second of the migrations it starts (0: the
	// default, 2,000: docs/SHARDING.md, an unlimited copy stalls the load).
	Rate float64 `yaml:"rate,omitempty"`
}

// DefaultPlacementRate is the copy rate of the migrations the placement
// service starts, in keys per second.
const DefaultPlacementRate = 2000

// Params returns p's thresholds, defaults filled in.
func (p *Placement) Params() (shard.PlaceParams, error) {
	d := shard.DefaultPlaceParams
	if p.SplitKeys > 0 {
		d.SplitKeys = p.SplitKeys
	}
	if p.SplitBytes > 0 {
		d.SplitBytes = p.SplitBytes
	}
	if p.SplitOps > 0 {
		d.SplitOps = p.SplitOps
	}
	if p.MergeKeys > 0 {
		d.MergeKeys = p.MergeKeys
	}
	if p.MergeBytes > 0 {
		d.MergeBytes = p.MergeBytes
	}
	if p.MergeOps > 0 {
		d.MergeOps = p.MergeOps
	}
	if p.MinShards > 0 {
		d.MinShards = p.MinShards
	}
	if p.BalanceOps > 0 {
		d.BalanceOps = p.BalanceOps
	} else if p.BalanceOps < 0 {
		d.BalanceOps = 0
	}
	if p.BalanceMargin > 0 {
		d.BalanceMargin = p.BalanceMargin
	}
	if p.BalanceBytes > 0 {
		d.BalanceBytes = p.BalanceBytes
	} else if p.BalanceBytes < 0 {
		d.BalanceBytes = 0
	}
	if p.NoMerge {
		d.MergeKeys, d.MergeBytes, d.MergeOps = 0, 0, 0
	}
	for _, f := range []struct {
		s   string
		dst *float64
	}{{p.DeadAfter, &d.DeadAfter}, {p.Cooldown, &d.Cooldown}, {p.MergeDelay, &d.MergeDelay}} {
		if f.s == "" {
			continue
		}
		v, err := time.ParseDuration(f.s)
		if err != nil || v < 0 {
			return d, fmt.Errorf("bad duration %q", f.s)
		}
		*f.dst = v.Seconds()
	}
	return d, nil
}

// shardSlots reads a shard's slots: "" is a spare shard, owning none.
func shardSlots(s string) ([]shard.Range, error) {
	if s == "" {
		return nil, nil
	}
	return shard.ParseSlots(s)
}
