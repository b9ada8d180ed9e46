package node

import (
	"testing"

	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// settledAlready: a remove answered "not a member" by the configuration
// is done; paxos's TRYAGAIN from a replica that is not a member yet is not
// (it said nothing about the member being removed).
func TestSettledAlready(t *testing.T) {
	for _, c := range []struct {
		res  service.Result
		text string
		want bool
	}{
		{service.Errorf("ERR n3 is not a member (members: n1,n2)"), "not a member", true},
		{service.Fail(synoderr.TryAgain, "paxos: node n4 is not a member of namespace ns yet (members as of instance 3: n1,n2,n3); send requests to a member"), "not a member", false},
		{service.Errorf("ERR n4 is already a member (members: n1,n2,n4)"), "already a member", true},
		{service.Errorf("ERR configuration has 9 members already (limit 9)"), "already a member", false},
	} {
		if got := settledAlready(c.res, c.text); got != c.want {
			t.Errorf("settledAlready(%q, %q) = %v, want %v", c.res.Err, c.text, got, c.want)
		}
	}
}
