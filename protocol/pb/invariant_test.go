package pb

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/service"
)

// TestReplyFirstTripsInvariant: the broken variant's early answer is seen
// by reply-after-acks in the very step that emits it; the correct protocol
// answers the same write only after both acknowledgements.
func TestReplyFirstTripsInvariant(t *testing.T) {
	set := service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}
	var got string
	c := harness.New(t, harness.Options{Protocol: BrokenReplyFirst, Nodes: 3,
		OnViolation: func(_ int, _ automaton.NodeID, err error) { got = err.Error() }})
	c.Request("n1", set, automaton.Options{})
	if !strings.HasPrefix(got, "reply-after-acks") {
		t.Fatalf("violation %q, want reply-after-acks", got)
	}
	ok := harness.New(t, harness.Options{Protocol: Name, Nodes: 3})
	id := ok.Request("n1", set, automaton.Options{})
	if _, done := ok.Response(id); done {
		t.Fatal("answered before the backups acknowledged")
	}
	ok.DeliverAll()
	if r, done := ok.Response(id); !done || r.Type != service.ResultOK {
		t.Fatalf("after delivery: %v %v", r, done)
	}
}
