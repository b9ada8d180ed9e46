package config

import (
	"strings"
	"testing"

	_ "github.com/synod-dev/synod/protocol/adam"
	_ "github.com/synod-dev/synod/protocol/paxos"
	_ "github.com/synod-dev/synod/protocol/pbpaxos"
	_ "github.com/synod-dev/synod/protocol/unreplicated"
)

// An adam namespace whose callee is missing, or runs a protocol that does
// not serve nested requests, is refused at configuration time; with a
// paxos or pbpaxos callee it is accepted. unreplicated is refused with its
// reason (no deduplication table that survives a crash: docs/NESTED.md).
func TestCalleeMustExistAndServeNested(t *testing.T) {
	const adam = "  - {name: default, protocol: adam, service: kv}\n"
	base := strings.Replace(good, "  - {name: default, protocol: abd, service: kv}\n", adam, 1)
	cases := []struct {
		extra, want string
	}{
		{"", `calls namespace "remote", which this cluster does not have`},
		{"  - {name: remote, protocol: abd, service: kv}\n", "does not serve nested requests"},
		{"  - {name: remote, protocol: paxos, service: kv}\n", ""},
		{"  - {name: remote, protocol: pbpaxos, service: kv}\n", ""},
		{"  - {name: remote, protocol: unreplicated, service: kv}\n", "protocol unreplicated does not serve nested requests: it keeps no deduplication table"},
		{"  - {name: other, protocol: paxos, service: kv}\n", `calls namespace "remote"`},
	}
	for _, tc := range cases {
		_, err := Parse([]byte(base + tc.extra))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("extra %q: refused: %v", tc.extra, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("extra %q: error %v, want one containing %q", tc.extra, err, tc.want)
		}
	}
	withParam := strings.Replace(base, "service: kv}", "service: kv, params: {callee: other}}", 1) +
		"  - {name: other, protocol: paxos, service: kv}\n"
	if _, err := Parse([]byte(withParam)); err != nil {
		t.Errorf("callee=other with a paxos namespace other: %v", err)
	}
}
