package livetest

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/config"
)

// TestPlacementReplacesOwnMemberLive: 6 processes, fsync, two shards (s0 on
// n1-n3, s1 on n4-n6) with the placement service on (dead_after 3 s); the
// placement namespace #placement runs on n1, n3 and n5. A member of it
// that does not lead is killed -9; its leader replaces it (a node outside
// it starts a replica, is added, the dead one removed, mem/#placement
// recorded), `synod cluster status` shows #placement's new members, and
// the placement namespace takes writes: a slot migration (whose record,
// driver token and map live there) runs to its end. Then its leader is
// killed -9 too: the two members left, the new one among them, elect a
// leader and another migration runs to its end.
func TestPlacementReplacesOwnMemberLive(t *testing.T) {
	if testing.Short() {
		t.Skip("6 processes")
	}
	c := upCluster(t, cluster.UpOptions{Nodes: 6, Shards: 2, Protocol: "paxos", Service: "kv", Durability: "fsync",
		Placement: &config.Placement{NoMerge: true, DeadAfter: "3s"}})
	addrs := c.ClientAddrs()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	clients := map[string]*redis.Client{}
	for i, a := range addrs {
		cl := redis.NewClient(&redis.Options{Addr: a, ReadTimeout: 5 * time.Second})
		defer cl.Close()
		clients[fmt.Sprintf("n%d", i+1)] = cl
	}
	// placementRow is #placement's nodes and leader as node id reports.
	placementRow := func(id string) (nodes []string, leader string) {
		for _, l := range strings.Split(infoShards(ctx, t, clients[id]), "\n") {
			name, facts, ok := strings.Cut(strings.TrimSpace(l), ":")
			if !ok || name != config.PlacementName {
				continue
			}
			for _, f := range strings.Split(facts, ",") {
				if v, ok := strings.CutPrefix(f, "nodes="); ok {
					nodes = strings.Fields(v)
				}
				if v, ok := strings.CutPrefix(f, "leader="); ok {
					leader = v
				}
			}
		}
		return nodes, leader
	}
	orig := []string{"n1", "n3", "n5"}
	leader := ""
	for ctx.Err() == nil && leader == "" {
		for _, id := range orig {
			if nodes, l := placementRow(id); slices.Equal(nodes, orig) && l != "" {
				leader = l
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if leader == "" {
		t.Fatal("#placement never named a leader")
	}
	victim := "n5"
	if leader == "n5" {
		victim = "n3"
	}
	live := func(dead ...string) []string {
		var out []string
		for i := range addrs {
			if id := fmt.Sprintf("n%d", i+1); !slices.Contains(dead, id) {
				out = append(out, id)
			}
		}
		return out
	}
	if err := c.Kill(victim); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	t.Logf("kill -9 %s, a member of %s (its leader is %s)", victim, config.PlacementName, leader)
	var members []string
	settled := func() bool {
		members = nil
		for _, id := range live(victim) {
			nodes, _ := placementRow(id)
			if len(nodes) != 3 || slices.Contains(nodes, victim) || members != nil && !slices.Equal(nodes, members) {
				return false
			}
			members = nodes
		}
		return true
	}
	for ctx.Err() == nil && !settled() {
		time.Sleep(200 * time.Millisecond)
	}
	if ctx.Err() != nil {
		t.Fatalf("#placement's members never left %s: %v", victim, members)
	}
	t.Logf("%s members %v at every live node %v after the kill", config.PlacementName, members, time.Since(killed).Round(time.Millisecond))
	out, err := exec.Command(synodBin, "cluster", "status", "--dir", c.Dir).CombinedOutput()
	if err != nil {
		t.Fatalf("synod cluster status: %v\n%s", err, out)
	}
	row := ""
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, config.PlacementName+" ") {
			row = l
		}
	}
	if row == "" || !strings.Contains(row, strings.Join(members, " ")) || !strings.Contains(string(out), "placement group decision:") {
		t.Fatalf("synod cluster status does not show %s's members %v and its decisions:\n%s", config.PlacementName, members, out)
	}
	t.Logf("synod cluster status: %s", row)
	admin := clients[live(victim, leader)[0]]
	migrate := func(from, to string) {
		t.Helper()
		start := time.Now()
		for ctx.Err() == nil {
			if err := admin.Do(ctx, "cluster", "migrate", from, to, "0-9").Err(); err == nil {
				break
			} else if time.Since(start) > 30*time.Second {
				t.Fatalf("CLUSTER MIGRATE %s %s 0-9: %v", from, to, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		for ctx.Err() == nil {
			if s, err := admin.Do(ctx, "cluster", "migration", "status").Text(); err == nil && strings.Contains(s, "phase: done") && strings.Contains(s, "\nfrom: "+from+"\n") {
				t.Logf("migration %s -> %s of slots 0-9 done in %v", from, to, time.Since(start).Round(time.Millisecond))
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatalf("the migration %s -> %s never finished", from, to)
	}
	migrate("s0", "s1")
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	t.Logf("kill -9 %s, %s's leader", leader, config.PlacementName)
	migrate("s1", "s0")
}
