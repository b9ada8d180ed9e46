package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/shard"
)

// The placement service replaces a dead node's replica: s0 on n1-n3, s1
// on n4-n6, n7 in no group. n6 stops; after dead_after the placement
// leader decides "replace group=1 node=n6 with=n7" and carries it out:
// n7 starts s1's replica at run time, is added (caught up by the group's
// leader), n6 is removed, and the members record names n4 n5 n7. Routing
// follows (CLUSTER SHARDS names n7, not n6), every write acknowledged
// before and after reads back, each step is in the decision log, and a
// leadership transfer to n7 moves s1's leader there.
func TestPlacementReplacesDeadNode(t *testing.T) {
	ns := config.Namespace{Name: "default", Protocol: "paxos", Service: "kv", Shards: []config.Shard{
		{Name: "s0", Slots: "0-8191", Nodes: []string{"n1", "n2", "n3"}},
		{Name: "s1", Slots: "8192-16383", Nodes: []string{"n4", "n5", "n6"}},
	}, Placement: &config.Placement{DeadAfter: "1s", NoMerge: true}}
	cfg, ls := mkCluster(t, 7, config.Memory, ns)
	var nodes []*Node
	for i, l := range ls {
		nodes = append(nodes, startNode(t, cfg, fmt.Sprintf("n%d", i+1), l, Options{}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	plain := redis.NewClient(&redis.Options{Addr: cfg.Nodes[0].Client})
	defer plain.Close()
	admin := redis.NewClient(&redis.Options{Addr: cfg.Nodes[0].Client})
	defer admin.Close()
	var keys []string // keys of s1's slots
	for i := 0; len(keys) < 100; i++ {
		if k := fmt.Sprintf("k%d", i); shard.KeySlot(k) >= 8192 {
			keys = append(keys, k)
		}
	}
	acked := map[string]string{}
	write := func(round int) {
		for _, k := range keys {
			v := fmt.Sprintf("%s-%d", k, round)
			if err := plain.Set(ctx, k, v, 0).Err(); err != nil {
				t.Fatalf("SET %s: %v", k, err)
			}
			acked[k] = v
		}
	}
	write(1)
	nodes[5].Close() // n6
	s := nodes[0].shards["default"]
	want := []automaton.NodeID{"n4", "n5", "n7"}
	for ctx.Err() == nil {
		ok := true
		for _, n := range []*Node{nodes[0], nodes[3], nodes[6]} {
			ok = ok && slices.Equal(n.shards["default"].members(1), want)
		}
		if ok {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	log := nodes[0].placementLog(ctx, s, placeLogLen)
	if ctx.Err() != nil {
		t.Fatalf("s1's members never became %v (n1 sees %v); log:\n%s", want, s.members(1), log)
	}
	t.Logf("decision log:\n%s", log)
	for _, step := range []string{"replace group=1 node=n6 with=n7", "step joining", "step added", "step removed", "step recorded"} {
		if !strings.Contains(log, step) {
			t.Errorf("the decision log lacks %q", step)
		}
	}
	if !nodes[6].serves("default#s1") {
		t.Fatal("n7 does not serve s1 after the replacement")
	}
	shards, _ := nodes[1].ClusterShards("default")
	var names []string
	for _, n := range shards[1].Nodes {
		names = append(names, n.ID)
	}
	if slices.Contains(names, "n6") || !slices.Contains(names, "n7") {
		t.Fatalf("CLUSTER SHARDS at n2 names %v for s1", names)
	}
	write(2)
	for k, v := range acked {
		if got, err := plain.Get(ctx, k).Result(); err != nil || got != v {
			t.Fatalf("GET %s = %q %v, want %q", k, got, err, v)
		}
	}
	// n7 alone with n4 down: still a majority (n5, n7), the writes read back.
	nodes[3].Close()
	write(3)
	for k, v := range acked {
		if got, err := plain.Get(ctx, k).Result(); err != nil || got != v {
			t.Fatalf("with n4 down: GET %s = %q %v, want %q", k, got, err, v)
		}
	}
	// A leadership transfer (the leader-balance action) to n7.
	d := shard.Decision{Kind: shard.DecLeader, From: 1, With: "n7"}
	for ctx.Err() == nil {
		err := nodes[0].transferLeader(ctx, s, d)
		if p := nodes[6].loop("default#s1").leader.Load(); err == nil && p != nil && *p == "n7" {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if ctx.Err() != nil {
		t.Fatal("s1's leadership never moved to n7")
	}
	write(4)
}

// The members record round-trips; a group it does not name has the
// file's nodes; malformed records are refused.
func TestMembersRecord(t *testing.T) {
	groups := []config.Group{{Nodes: []automaton.NodeID{"n1", "n2", "n3"}}, {Nodes: []automaton.NodeID{"n4", "n5", "n6"}}}
	mem := [][]automaton.NodeID{{"n1", "n2", "n3"}, {"n4", "n6"}}
	join := [][]automaton.NodeID{nil, {"n7"}}
	former := [][]automaton.NodeID{nil, {"n5"}}
	text := formatMembersRecord(mem, join, []automaton.NodeID{"", "n6"}, former, nil, nil)
	if text != "0:n1,n2,n3 1:n4,n6/n7>n6!n5" {
		t.Fatalf("record %q", text)
	}
	r, err := parseMembersRecord(text, groups)
	if err != nil || !slices.Equal(r.members[1], mem[1]) || !slices.Equal(r.hosts[1], []automaton.NodeID{"n4", "n6", "n7"}) || !slices.Equal(r.former[1], former[1]) || r.leaving[1] != "n6" {
		t.Fatalf("parsed %+v %v", r, err)
	}
	r, err = parseMembersRecord("1:n4,n6,n7", groups)
	if err != nil || r.members[0] != nil || !slices.Equal(r.hosts[0], groups[0].Nodes) || !slices.Equal(r.members[1], []automaton.NodeID{"n4", "n6", "n7"}) {
		t.Fatalf("partial record: %+v %v", r, err)
	}
	for _, bad := range []string{"2:n1", "x:n1", "1:", "1"} {
		if _, err := parseMembersRecord(bad, groups); err == nil {
			t.Errorf("record %q accepted", bad)
		}
	}
}

// Replica balance, carried out like a replacement: n1 hosts replicas of
// s0 and s1, n6 and n7 none; the placement leader moves n1's replica of s0
// to n6 (n6 starts it, is added, n1 is removed from s0 though alive), and
// stops there (every node then hosts 1 or 0). Writes before and after
// read back.
func TestPlacementBalancesReplicas(t *testing.T) {
	ns := config.Namespace{Name: "default", Protocol: "paxos", Service: "kv", Shards: []config.Shard{
		{Name: "s0", Slots: "0-8191", Nodes: []string{"n1", "n2", "n3"}},
		{Name: "s1", Slots: "8192-16383", Nodes: []string{"n1", "n4", "n5"}},
	}, Placement: &config.Placement{DeadAfter: "60s", NoMerge: true}}
	cfg, ls := mkCluster(t, 7, config.Memory, ns)
	var nodes []*Node
	for i, l := range ls {
		nodes = append(nodes, startNode(t, cfg, fmt.Sprintf("n%d", i+1), l, Options{}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	plain := redis.NewClient(&redis.Options{Addr: cfg.Nodes[1].Client})
	defer plain.Close()
	acked := map[string]string{}
	for i := 0; i < 200; i++ {
		k, v := fmt.Sprintf("k%d", i), fmt.Sprint(i)
		if err := plain.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		acked[k] = v
	}
	s := nodes[1].shards["default"]
	want := []automaton.NodeID{"n2", "n3", "n6"}
	for ctx.Err() == nil && !slices.Equal(s.members(0), want) {
		time.Sleep(100 * time.Millisecond)
	}
	log := nodes[0].placementLog(ctx, s, placeLogLen)
	if ctx.Err() != nil {
		t.Fatalf("s0's members never became %v (%v); log:\n%s", want, s.members(0), log)
	}
	if !strings.Contains(log, "balance group=0 node=n1 with=n6") || !strings.Contains(log, "step recorded group=0 node=n1 with=n6") {
		t.Fatalf("the decision log lacks the balance move:\n%s", log)
	}
	// n1, removed from s0, stops its replica of s0 once it reads the
	// record (groups.go, retireGroups); its replica of s1 runs on.
	ended := func(l *nsLoop) bool {
		l.pass.Lock()
		defer l.pass.Unlock()
		return l.dead
	}
	old := nodes[0].loop("default#s0")
	for ctx.Err() == nil && !(old.retired.Load() && ended(old)) {
		time.Sleep(50 * time.Millisecond)
	}
	if ctx.Err() != nil {
		t.Fatalf("n1 still runs its replica of s0 after the move (retired %v)", old.retired.Load())
	}
	if l := nodes[0].loop("default#s1"); l.retired.Load() || ended(l) {
		t.Fatal("n1 stopped its replica of s1, which it still is a member of")
	}
	time.Sleep(2 * time.Second) // a second move would be decided by now
	if log2 := nodes[0].placementLog(ctx, s, placeLogLen); strings.Count(log2, "balance ") != 1 {
		t.Fatalf("more than one balance move:\n%s", log2)
	}
	for k, v := range acked {
		if err := plain.Set(ctx, k, v+"b", 0).Err(); err != nil {
			t.Fatalf("SET %s after the move: %v", k, err)
		}
		acked[k] = v + "b"
	}
	for k, v := range acked {
		if got, err := plain.Get(ctx, k).Result(); err != nil || got != v {
			t.Fatalf("GET %s = %q %v, want %q", k, got, err, v)
		}
	}
	if p := old.leader.Load(); p != nil {
		t.Fatalf("n1's stopped replica of s0 still names a leader (%s)", *p)
	}
	t.Logf("decision log:\n%s", log)
}

// The placement namespace's own members are replaced too: with 7 nodes it
// runs on n1, n3 and n5. A member that is not its leader stops; after
// dead_after the placement leader decides "replace group=0 node=X with=Y"
// for #placement and carries it out in the data groups' steps (Y starts
// the replica at run time, is added, X removed, mem/#placement
// recorded). Every live node then routes to the new members and INFO
// shards (what `synod cluster status` prints) names them; the placement
// namespace takes writes; and with the leader stopped as well, the two
// members left (Y among them) still elect a leader and take writes, so Y
// votes.
func TestPlacementReplacesOwnMember(t *testing.T) {
	ns := config.Namespace{Name: "default", Protocol: "paxos", Service: "kv", Shards: []config.Shard{
		{Name: "s0", Slots: "0-8191", Nodes: []string{"n1", "n2", "n3"}},
		{Name: "s1", Slots: "8192-16383", Nodes: []string{"n4", "n5", "n6"}},
	}, Placement: &config.Placement{DeadAfter: "1s", NoMerge: true}}
	cfg, ls := mkCluster(t, 7, config.Memory, ns)
	if g, _ := cfg.PlacementGroup(); !slices.Equal(g.Nodes, []automaton.NodeID{"n1", "n3", "n5"}) {
		t.Fatalf("placement group on %v", g.Nodes)
	}
	var nodes []*Node
	for i, l := range ls {
		nodes = append(nodes, startNode(t, cfg, fmt.Sprintf("n%d", i+1), l, Options{}))
	}
	byID := func(id automaton.NodeID) *Node { return nodes[int(id[1]-'1')] }
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	leader := func(among []*Node) *Node {
		for _, n := range among {
			if n.leadsPlacement() {
				return n
			}
		}
		return nil
	}
	var l *Node
	for ctx.Err() == nil && l == nil {
		l = leader(nodes)
		time.Sleep(50 * time.Millisecond)
	}
	if l == nil {
		t.Fatal("the placement namespace never elected a leader")
	}
	// The victim: a member that does not lead (never two of one data
	// group with the leader's later stop).
	x := automaton.NodeID("n5")
	if l.id == "n5" {
		x = "n3"
	}
	byID(x).Close()
	var live []*Node
	for _, n := range nodes {
		if n.id != x {
			live = append(live, n)
		}
	}
	var members []automaton.NodeID
	settled := func() bool {
		members = live[0].shards[config.PlacementName].members(0)
		for _, n := range live {
			m := n.shards[config.PlacementName].members(0)
			if len(m) != 3 || slices.Contains(m, x) || !slices.Equal(m, members) {
				return false
			}
		}
		return true
	}
	settleBy := time.Now().Add(60 * time.Second)
	for time.Now().Before(settleBy) && !settled() {
		time.Sleep(100 * time.Millisecond)
	}
	ps := l.shards["default"]
	log := l.placementLog(ctx, ps, placeLogLen)
	if !settled() {
		t.Fatalf("the placement namespace's members never left %s (n1 sees %v); log:\n%s", x, live[0].shards[config.PlacementName].members(0), log)
	}
	t.Logf("placement members %v; log:\n%s", members, log)
	var y automaton.NodeID
	for _, m := range members {
		if !slices.Contains([]automaton.NodeID{"n1", "n3", "n5"}, m) {
			y = m
		}
	}
	for _, step := range []string{fmt.Sprintf("replace group=0 node=%s with=%s", x, y), "step joining group=0", "step added group=0", "step removed group=0", "step recorded group=0"} {
		if !strings.Contains(log, "placement group decision: ") || !strings.Contains(log, step) {
			t.Errorf("the decision log lacks %q", step)
		}
	}
	if !byID(y).serves(config.PlacementName) {
		t.Fatalf("%s does not serve the placement namespace", y)
	}
	var names []string
	for _, m := range members {
		names = append(names, string(m))
	}
	for _, n := range live {
		if f := n.shardsInfo()[config.PlacementName]; !strings.Contains(f, "nodes="+strings.Join(names, " ")+",") {
			t.Fatalf("INFO shards at %s: %s = %q, want nodes %v", n.id, config.PlacementName, f, names)
		}
	}
	write := func(from *Node, v string) error {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := from.placementDo(wctx, kvOp("set", "test/k", v)); err != nil {
			return err
		}
		rs, err := from.placementDo(wctx, kvOp("get", "test/k"))
		if err == nil && string(rs[0].Bytes) != v {
			err = fmt.Errorf("read back %q, want %q", rs[0].Bytes, v)
		}
		return err
	}
	if err := write(byID("n2"), "after-replace"); err != nil {
		t.Fatalf("placement write through n2 after the replacement: %v", err)
	}
	// The leader stops too: the other original member and y are a
	// majority of the new configuration.
	l.Close()
	var err error
	for ctx.Err() == nil {
		if err = write(byID(y), "after-leader-stop"); err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if ctx.Err() != nil {
		t.Fatalf("with %s and %s down, the placement namespace (members %v) took no write: %v", x, l.id, members, err)
	}
}
