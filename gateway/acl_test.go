package gateway

import (
	"net"
	"strings"
	"testing"

	"github.com/synod-dev/synod/certs"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway/gatewaytest"
)

func hashFor(t *testing.T, pw string) string {
	t.Helper()
	h, err := certs.HashPasswordCost(pw, certs.MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func aclBackend() *gatewaytest.MemBackend {
	return gatewaytest.New(config.Namespace{Name: "default", Protocol: "paxos", Service: "kv"},
		config.Namespace{Name: "orders", Protocol: "abd", Service: "kv"})
}

func aclUsers(t *testing.T) []config.User {
	return []config.User{
		{Name: "reader", Password: hashFor(t, "r-pass"), Access: map[string]string{"*": config.ReadOnly}},
		{Name: "writer", Password: hashFor(t, "w-pass"), Access: map[string]string{"default": config.ReadWrite}},
		{Name: "mixed", Password: hashFor(t, "m-pass"), Access: map[string]string{"*": config.ReadOnly, "orders": config.ReadWrite}},
	}
}

func TestACLUsers(t *testing.T) {
	_, addr := startServer(t, aclBackend(), ServerOptions{Password: "legacy", Users: aclUsers(t)})
	admin := dial(t, addr)
	run(t, admin, []step{
		cmd("GET k", "(error) NOAUTH Authentication required."),
		cmd("AUTH legacy", "OK"),
		cmd("SET k v", "OK"),
		cmd("SYNOD NS orders", "OK"),
		cmd("SET o 1", "OK"),
	})
	r := dial(t, addr)
	run(t, r, []step{
		cmd("AUTH reader wrong", "(error) WRONGPASS invalid username-password pair or user is disabled."),
		cmd("AUTH writer r-pass", "(error) WRONGPASS invalid username-password pair or user is disabled."),
		cmd("AUTH nobody r-pass", "(error) WRONGPASS invalid username-password pair or user is disabled."),
		cmd("GET k", "(error) NOAUTH Authentication required."),
		cmd("AUTH reader r-pass", "OK"),
		cmd("GET k", `"v"`),
		cmd("SET k w", "(error) NOPERM User reader has no permissions to run the 'set' command"),
		cmd("DEL k", "(error) NOPERM User reader has no permissions to run the 'del' command"),
		cmd("INCR n", "(error) NOPERM User reader has no permissions to run the 'incr' command"),
		cmd("GET k", `"v"`),
		cmd("SYNOD NS orders", "OK"),
		cmd("GET o", `"1"`),
	})
	w := dial(t, addr)
	if got := w.do("HELLO", "2", "AUTH", "writer", "w-pass"); !strings.Contains(got, `"synod"`) {
		t.Fatalf("HELLO AUTH: %s", got)
	}
	run(t, w, []step{
		cmd("ACL WHOAMI", `"writer"`),
		cmd("SET k w", "OK"),
		cmd("SYNOD NS orders", "OK"),
		cmd("GET o", "(error) NOPERM User writer has no permissions to access the 'orders' namespace"),
	})
	m := dial(t, addr)
	run(t, m, []step{
		cmd("AUTH mixed m-pass", "OK"),
		cmd("SET k x", "(error) NOPERM User mixed has no permissions to run the 'set' command"),
		cmd("GET k", `"w"`),
		cmd("SYNOD NS orders", "OK"),
		cmd("SET o 2", "OK"),
		// Queued writes are refused as a group at EXEC.
		cmd("SYNOD NS default", "OK"),
		cmd("MULTI", "OK"),
		cmd("SET k y", "QUEUED"),
	})
	if got := m.do("EXEC"); !strings.Contains(got, "NOPERM") {
		t.Errorf("EXEC of a refused write: %s", got)
	}
	admin.do("SYNOD", "NS", "default")
	if got := admin.do("GET", "k"); got != `"w"` {
		t.Fatalf("k = %s after refused writes", got)
	}
	// A second login as the same user takes the remembered fast path and
	// still refuses a wrong password.
	r2 := dial(t, addr)
	run(t, r2, []step{
		cmd("AUTH reader r-pass", "OK"),
		cmd("AUTH reader r-pasS", "(error) WRONGPASS invalid username-password pair or user is disabled."),
	})
}

func TestACLWithoutDefaultPassword(t *testing.T) {
	_, addr := startServer(t, aclBackend(), ServerOptions{Users: aclUsers(t)})
	c := dial(t, addr)
	run(t, c, []step{
		cmd("GET k", "(error) NOAUTH Authentication required."),
		cmd("AUTH anything", "(error) ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"),
		cmd("AUTH writer w-pass", "OK"),
		cmd("SET k v", "OK"),
	})
}

func TestRedisCLIUsers(t *testing.T) {
	cli := redisTool(t, "redis-cli")
	_, addr := startServer(t, aclBackend(), ServerOptions{Users: aclUsers(t)})
	host, port, _ := net.SplitHostPort(addr)
	as := func(user, pass string, args ...string) string {
		base := []string{"-h", host, "-p", port, "--user", user, "--pass", pass, "--no-auth-warning"}
		return strings.TrimSpace(runTool(t, "", cli, append(base, args...)...))
	}
	if got := as("writer", "w-pass", "SET", "k", "v"); got != "OK" {
		t.Fatalf("writer SET: %q", got)
	}
	if got := as("reader", "r-pass", "GET", "k"); got != "v" {
		t.Fatalf("reader GET: %q", got)
	}
	if got := as("reader", "r-pass", "SET", "k", "x"); !strings.Contains(got, "NOPERM User reader has no permissions to run the 'set' command") {
		t.Fatalf("reader SET: %q", got)
	}
	if got := as("reader", "nope", "GET", "k"); !strings.Contains(got, "WRONGPASS") && !strings.Contains(got, "AUTH failed") {
		t.Fatalf("wrong password: %q", got)
	}
}

// TestACLLog: ACL LOG shows this node's refused logins (reason auth,
// object AUTH) and refused requests (reason command, the command), grouped
// as Redis groups them, newest first; a count limits it; RESET empties it.
func TestACLLog(t *testing.T) {
	_, addr := startServer(t, aclBackend(), ServerOptions{Password: "legacy", Users: aclUsers(t)})
	admin, r := dial(t, addr), dial(t, addr)
	run(t, admin, []step{cmd("AUTH legacy", "OK"), cmd("ACL LOG", "(empty array)")})
	r.do("AUTH", "reader", "wrong")
	r.do("AUTH", "nobody", "x")
	r.do("AUTH", "nobody", "y")
	r.do("AUTH", "reader", "r-pass")
	r.do("SET", "k", "v")
	admin.send("ACL", "LOG")
	log := admin.reply()
	type entry struct {
		count                         int64
		reason, context, object, user string
		hasAge, hasInfo               bool
	}
	var got []entry
	for _, m := range log.Elems {
		var e entry
		for i := 0; i+1 < len(m.Elems); i += 2 {
			v := m.Elems[i+1]
			switch string(m.Elems[i].Str) {
			case "count":
				e.count = v.Int
			case "reason":
				e.reason = string(v.Str)
			case "context":
				e.context = string(v.Str)
			case "object":
				e.object = string(v.Str)
			case "username":
				e.user = string(v.Str)
			case "age-seconds":
				e.hasAge = len(v.Str) > 0
			case "client-info":
				e.hasInfo = strings.HasPrefix(string(v.Str), "id=")
			}
		}
		got = append(got, e)
	}
	want := []entry{
		{1, "command", "toplevel", "set", "reader", true, true},
		{2, "auth", "toplevel", "AUTH", "nobody", true, true},
		{1, "auth", "toplevel", "AUTH", "reader", true, true},
	}
	if len(got) != len(want) {
		t.Fatalf("ACL LOG: %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("ACL LOG entry %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	admin.send("ACL", "LOG", "1")
	if n := len(admin.reply().Elems); n != 1 {
		t.Errorf("ACL LOG 1: %d entries", n)
	}
	run(t, admin, []step{
		cmd("ACL LOG -1", "(error) ERR value is out of range, must be positive"),
		cmd("ACL LOG RESET", "OK"),
		cmd("ACL LOG", "(empty array)"),
	})
}
