package config

import (
	"strings"
	"testing"
)

// A spare shard (slots "") is valid and owns nothing; a placement block is
// read with defaults filled in; a bad duration, and a placement block on
// an unsharded namespace, are refused.
func TestPlacementConfig(t *testing.T) {
	c, err := Parse([]byte(sharded("0-16383", `""`, "[n2, n3, n4]") + "    placement: {split_ops: 100, dead_after: 3s}\n"))
	if err == nil {
		t.Fatal("a placement block on the unsharded namespace plain was accepted")
	}
	file := strings.Replace(sharded("0-16383", `""`, "[n2, n3, n4]"), "  - name: plain", "    placement: {split_ops: 100, dead_after: 3s}\n  - name: plain", 1)
	if c, err = Parse([]byte(file)); err != nil {
		t.Fatal(err)
	}
	gs := c.ShardGroups(c.Namespaces[0])
	if len(gs[1].Slots) != 0 || len(gs[0].Slots) != 1 {
		t.Fatalf("groups' slots: %v, %v", gs[0].Slots, gs[1].Slots)
	}
	p, err := c.Namespaces[0].Placement.Params()
	if err != nil || p.SplitOps != 100 || p.DeadAfter != 3 || p.SplitKeys == 0 || p.Cooldown == 0 {
		t.Fatalf("params %+v, %v", p, err)
	}
	bad := strings.Replace(file, "dead_after: 3s", "dead_after: soon", 1)
	if _, err := Parse([]byte(bad)); err == nil || !strings.Contains(err.Error(), "placement") {
		t.Fatalf("a bad duration: %v", err)
	}
}

// An unplaced shard (no nodes, no slots: a split creates it) is valid in a
// namespace with a placement block and a protocol with membership changes;
// refused without a placement block, and with slots. balance_ops and
// balance_bytes: a negative value turns balance by load (by data size)
// off; balance_bytes absent is 64 MiB.
func TestPlacementUnplacedShard(t *testing.T) {
	withPlace := func(f string) string {
		return strings.Replace(f, "  - name: plain", "    placement: {split_ops: 100, balance_ops: -1, balance_bytes: -1}\n  - name: plain", 1)
	}
	c, err := Parse([]byte(withPlace(sharded("0-16383", `""`, "[]"))))
	if err != nil {
		t.Fatal(err)
	}
	if gs := c.ShardGroups(c.Namespaces[0]); len(gs[1].Nodes) != 0 || len(gs[1].Slots) != 0 {
		t.Fatalf("the unplaced shard: %+v", gs[1])
	}
	if p, _ := c.Namespaces[0].Placement.Params(); p.BalanceOps != 0 || p.BalanceBytes != 0 {
		t.Fatalf("balance_ops -1, balance_bytes -1: %v %v", p.BalanceOps, p.BalanceBytes)
	}
	if p, _ := (&Placement{}).Params(); p.BalanceBytes != 64<<20 {
		t.Fatalf("balance_bytes absent: %v", p.BalanceBytes)
	}
	if _, err := Parse([]byte(sharded("0-16383", `""`, "[]"))); err == nil || !strings.Contains(err.Error(), "unplaced") {
		t.Fatalf("an unplaced shard without a placement block: %v", err)
	}
	if _, err := Parse([]byte(withPlace(sharded("0-8191", "8192-16383", "[]")))); err == nil {
		t.Fatal("an unplaced shard owning slots was accepted")
	}
}

// A placement block on a sharded namespace whose protocol has a fixed
// membership (pbpaxos here) is refused at start, naming why; the same
// namespace sharded statically (no placement block) is accepted
// (shardks49, session 49; node TestShardedOtherProtocols runs such shards).
func TestPlacementNeedsMembership(t *testing.T) {
	static := strings.Replace(sharded("0-8191", "8192-16383", "[n2, n3, n4]"), "    protocol: paxos\n    service: kv\n    shards:", "    protocol: pbpaxos\n    service: kv\n    shards:", 1)
	if !strings.Contains(static, "protocol: pbpaxos") {
		t.Fatal("the file did not change")
	}
	if _, err := Parse([]byte(static)); err != nil {
		t.Fatalf("static pbpaxos shards: %v", err)
	}
	placed := strings.Replace(static, "  - name: plain", "    placement: {split_ops: 100}\n  - name: plain", 1)
	if _, err := Parse([]byte(placed)); err == nil || !strings.Contains(err.Error(), "protocol pbpaxos has a fixed membership") {
		t.Fatalf("placement on pbpaxos shards: %v, want refused", err)
	}
}
