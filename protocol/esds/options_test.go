package esds

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// The declared options validate as the gateway did before they moved here,
// and the edges' assigned op id is the one the protocol derives itself.
func TestRequestOptions(t *testing.T) {
	id := automaton.RequestID{Client: 0xab, Seq: 7}
	spec, err := automaton.FindOption("esds", automaton.OptOpID)
	if err != nil {
		t.Fatal(err)
	}
	if got := spec.Assign(id); !reflect.DeepEqual(got, []string{"00000000000000ab-7"}) {
		t.Errorf("assigned %v", got)
	}
	for _, bad := range []string{"00000000000000ab-7", "has space", strings.Repeat("x", MaxOpIDLen+1), "tab\t"} {
		if _, err := spec.Parse([]string{bad}); err == nil {
			t.Errorf("op id %q accepted", bad)
		}
	}
	if v, err := spec.Parse([]string{"mine-1"}); err != nil || v[0] != "mine-1" {
		t.Errorf("op id mine-1: %v %v", v, err)
	}
	prev, _ := automaton.FindOption("esds", automaton.OptPrev)
	if _, err := prev.Parse([]string{"00000000000000ab-7", "x"}); err != nil {
		t.Errorf("prev naming an assigned id refused: %v", err)
	}
	many := make([]string, MaxPrevIDs+1)
	for i := range many {
		many[i] = fmt.Sprint("p", i)
	}
	if _, err := prev.Parse(many); err == nil {
		t.Error("prev set above the limit accepted")
	}
	strict, _ := automaton.FindOption("esds", automaton.OptStrict)
	if strict.Type != automaton.OptBool || !strict.Sticky {
		t.Errorf("strict spec %+v", strict)
	}
	// A request without an op id gets the assigned one from the protocol:
	// a retry with the assigned id filled in by an edge is the same
	// operation.
	c := newCluster(t, "esds", 1, service.Counter{}, nil)
	c.Step("n1", automaton.ClientRequest{Req: automaton.Request{ID: id, Op: service.Op{Kind: "add", Args: [][]byte{[]byte("2")}}}})
	o := automaton.AssignOptions(automaton.RequestOptions("esds"), id, automaton.Options{})
	c.Step("n1", automaton.ClientRequest{Req: automaton.Request{ID: id, Op: service.Op{Kind: "add", Args: [][]byte{[]byte("2")}}, Opts: o}})
	r := c.request("n1", opts("", true), "read")
	if got := c.mustAnswer(r); !got.Equal(service.Int(2)) {
		t.Errorf("counter %v after one add retried with its assigned id", got)
	}
}

// "m" is a valid op id, and the name of the membership record: an
// operation called m is persisted like any other and survives a restart.
func TestOpIDNamedLikeARecord(t *testing.T) {
	c := newCluster(t, "esds", 2, service.Counter{}, nil)
	c.request("n1", opts("m", false), "add", "3")
	c.Crash("n1")
	c.Boot("n1")
	if o := c.esds("n1").ops["m"]; o == nil || !o.label.Set {
		t.Fatal("operation m, done before the crash, was not persisted")
	}
}
