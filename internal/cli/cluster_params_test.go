package cli

import (
	"testing"

	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/config"
)

// cluster up --protocol adam adds the paxos namespace its callee
// parameter names (default remote), unless one is given; --param parses
// name=value and refuses anything else.
func TestCalleeNamespacesAndParams(t *testing.T) {
	got := CalleeNamespaces(cluster.UpOptions{Protocol: "adam"})
	if len(got) != 1 || got[0].Name != "remote" || got[0].Protocol != "paxos" {
		t.Fatalf("adam: %+v", got)
	}
	got = CalleeNamespaces(cluster.UpOptions{Protocol: "adam", Params: map[string]string{"callee": "b"}})
	if len(got) != 1 || got[0].Name != "b" {
		t.Fatalf("adam callee=b: %+v", got)
	}
	if got := CalleeNamespaces(cluster.UpOptions{Protocol: "adam", Extra: []config.Namespace{{Name: "remote"}}}); len(got) != 0 {
		t.Fatalf("adam with remote given: %+v", got)
	}
	if got := CalleeNamespacesOf(cluster.UpOptions{Protocol: "adam"}, "pbpaxos", ""); len(got) != 1 || got[0].Protocol != "pbpaxos" {
		t.Fatalf("adam --callee-protocol pbpaxos: %+v", got)
	}
	if got := CalleeNamespaces(cluster.UpOptions{Protocol: "adam"}); got[0].Service != "kv" {
		t.Fatalf("adam: callee service %q, want kv", got[0].Service)
	}
	if got := CalleeNamespaces(cluster.UpOptions{Protocol: "adam", Service: "inventory"}); got[0].Service != "inventory" {
		t.Fatalf("adam --service inventory: callee service %q, want the default namespace's", got[0].Service)
	}
	if got := CalleeNamespacesOf(cluster.UpOptions{Protocol: "adam", Service: "inventory"}, "paxos", "kv"); got[0].Service != "kv" {
		t.Fatalf("adam --callee-service kv: callee service %q", got[0].Service)
	}
	if got := CalleeNamespaces(cluster.UpOptions{Protocol: "paxos"}); len(got) != 0 {
		t.Fatalf("paxos: %+v", got)
	}
	p, err := ParseParams([]string{"cores=4", "x=a=b"})
	if err != nil || p["cores"] != "4" || p["x"] != "a=b" {
		t.Fatalf("ParseParams: %v %v", p, err)
	}
	if _, err := ParseParams([]string{"cores"}); err == nil {
		t.Fatal("ParseParams accepted a flag without '='")
	}
}
