package node

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	_ "github.com/synod-dev/synod/protocol/paxos"
)

// Every node of a paxos namespace names the same leader, with its client
// address, over SYNOD LEADER too; ABD has no leader: none is named.
func TestLeaderHintOverRESP(t *testing.T) {
	nsPaxos := config.Namespace{Name: "default", Protocol: "paxos", Service: "kv",
		Params: map[string]string{"heartbeat": "10ms", "election_timeout": "100ms"}}
	cfg, ls := mkCluster(t, 3, config.Memory, nsPaxos, config.Namespace{Name: "abd", Protocol: "abd", Service: "kv"})
	var nodes []*Node
	for i, n := range cfg.Nodes {
		nodes = append(nodes, startNode(t, cfg, n.ID, ls[i], Options{}))
	}
	if r := do(t, nodes[0], "default", req("set", "k", "v")); r.IsErr() {
		t.Fatalf("set: %v", r)
	}
	var leader automaton.NodeID
	eventually(t, "every node names one leader", func() bool {
		ids := map[automaton.NodeID]bool{}
		for _, n := range nodes {
			id, _, err := n.Leader("default")
			if err != nil {
				t.Fatal(err)
			}
			ids[id] = true
			leader = id
		}
		return len(ids) == 1 && leader != ""
	})
	want := ""
	for _, n := range cfg.Nodes {
		if automaton.NodeID(n.ID) == leader {
			want = n.Client
		}
	}
	for _, n := range nodes {
		got := respLine(t, n.ClientAddr().String(), "", "SYNOD", "LEADER")
		if wantReply := fmt.Sprintf("*2 $%d %s $%d %s", len(leader), leader, len(want), want); got != wantReply {
			t.Errorf("%s: SYNOD LEADER = %q, want %q", n.ID(), got, wantReply)
		}
	}
	if id, addr, err := nodes[1].Leader("abd"); id != "" || addr != "" || err != nil {
		t.Errorf("abd Leader: %q %q %v", id, addr, err)
	}
	if got := respLine(t, nodes[1].ClientAddr().String(), "abd", "SYNOD", "LEADER"); got != "*-1" {
		t.Errorf("SYNOD LEADER in abd's namespace: %q, want a null array", got)
	}
	if _, _, err := nodes[1].Leader("nope"); err == nil || !strings.Contains(err.Error(), "unknown namespace") {
		t.Errorf("unknown namespace Leader: %v", err)
	}
}

// respLine selects namespace ns (unless ""), sends one command and returns
// the reply's lines joined by spaces (enough for a flat array of short bulk
// strings).
func respLine(t *testing.T, addr, ns string, args ...string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	send := func(args ...string) {
		fmt.Fprintf(c, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(c, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	if ns != "" {
		send("SYNOD", "NS", ns)
		if l, err := br.ReadString('\n'); err != nil || l != "+OK\r\n" {
			t.Fatalf("SYNOD NS %s: %q %v", ns, l, err)
		}
	}
	send(args...)
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	parts := []string{strings.TrimSpace(line)}
	if strings.HasPrefix(line, "*2") {
		for range 4 {
			l, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, strings.TrimSpace(l))
		}
	}
	return strings.Join(parts, " ")
}
