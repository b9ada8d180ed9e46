package gateway

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/gateway/gatewaytest"
)

// redisTool finds a binary from Debian's redis-tools. Tests using it skip
// when it is missing, unless SYNOD_REQUIRE_REDIS_TOOLS=1 (then they fail).
func redisTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("SYNOD_REQUIRE_REDIS_TOOLS") == "1" {
			t.Fatalf("%s not found and SYNOD_REQUIRE_REDIS_TOOLS=1: install redis-tools", name)
		}
		t.Skipf("%s not found (install redis-tools, or set SYNOD_REQUIRE_REDIS_TOOLS=1 to make this a failure)", name)
	}
	return p
}

func runTool(t *testing.T, stdin string, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %q: %v\n%s", bin, args, err, out)
	}
	return string(out)
}

func TestRedisCLI(t *testing.T) {
	cli := redisTool(t, "redis-cli")
	_, addr := startServer(t, gatewaytest.KV(), ServerOptions{Password: "pw"})
	host, port, _ := net.SplitHostPort(addr)
	base := []string{"-h", host, "-p", port, "-a", "pw", "--no-auth-warning"}
	redis := func(args ...string) string {
		return strings.TrimSpace(runTool(t, "", cli, append(base, args...)...))
	}
	// Non-interactive output (stdout is not a terminal) is redis-cli's raw form.
	for _, s := range []struct {
		args []string
		want string
	}{
		{[]string{"SET", "greeting", "hello world"}, "OK"},
		{[]string{"GET", "greeting"}, "hello world"},
		{[]string{"INCR", "n"}, "1"},
		{[]string{"INCRBY", "n", "41"}, "42"},
		{[]string{"EXISTS", "greeting", "n", "nope"}, "2"},
		{[]string{"DEL", "greeting", "n", "nope"}, "2"},
		{[]string{"GET", "greeting"}, ""},
		{[]string{"SET", "k", "v", "EX", "0"}, "ERR invalid expire time in 'set' command"},
		{[]string{"XADD", "s", "1-1", "f", "v"}, "1-1"},
		{[]string{"-3", "GET", "nope"}, ""},
		{[]string{"SYNOD", "NS"}, "default"},
	} {
		if got := redis(s.args...); got != s.want {
			t.Errorf("redis-cli %q = %q, want %q", s.args, got, s.want)
		}
	}
	// Commands from standard input are sent on one connection.
	got := runTool(t, "SET a 5\nINCR a\nAPPEND a 0\nGET a\n", cli, base...)
	if got != "OK\n6\n2\n60\n" {
		t.Errorf("redis-cli with commands on stdin: %q", got)
	}
	// Without the password every data command is refused.
	if got := runTool(t, "", cli, "-h", host, "-p", port, "GET", "a"); !strings.Contains(got, "NOAUTH Authentication required.") {
		t.Errorf("redis-cli without password: %q", got)
	}
}

func TestRedisBenchmark(t *testing.T) {
	bench := redisTool(t, "redis-benchmark")
	b := gatewaytest.KV()
	_, addr := startServer(t, b, ServerOptions{Password: "pw"})
	host, port, _ := net.SplitHostPort(addr)
	out := runTool(t, "", bench, "-h", host, "-p", port, "-a", "pw", "-t", "set,get", "-n", "2000", "-q")
	// Progress lines end in \r; the final ones in \n.
	var final []string
	for _, l := range strings.Split(strings.ReplaceAll(out, "\r", "\n"), "\n") {
		if strings.Contains(l, "requests per second") && !strings.Contains(l, "rps=") {
			final = append(final, strings.TrimSpace(l))
		}
	}
	if len(final) != 2 || !strings.HasPrefix(final[0], "SET: ") || !strings.HasPrefix(final[1], "GET: ") {
		t.Fatalf("redis-benchmark output:\n%s", out)
	}
	if strings.Contains(out, "WARN") || strings.Contains(out, "rror") {
		t.Errorf("redis-benchmark complained:\n%s", out)
	}
	kinds := map[string]int{}
	for _, r := range b.Log() {
		kinds[r.Req.Op.Kind]++
	}
	if kinds["set"] < 2000 || kinds["get"] < 2000 {
		t.Errorf("backend saw %v, want at least 2000 sets and 2000 gets", kinds)
	}
	// Pipelined (-P 16): replies must still match requests one to one.
	out = runTool(t, "", bench, "-h", host, "-p", port, "-a", "pw", "-t", "incr", "-n", "2000", "-P", "16", "-q")
	if !strings.Contains(out, "INCR: ") || strings.Contains(out, "rror") {
		t.Errorf("pipelined redis-benchmark:\n%s", out)
	}
}

// redis-cli's key browsing (--scan, which SCANs with a cursor, and the
// keyspace line GUI browsers read) and a transaction from its prompt.
func TestRedisCLIScanAndInfo(t *testing.T) {
	cli := redisTool(t, "redis-cli")
	b := gatewaytest.MustAutomaton(t, "unreplicated", "kv")
	_, addr := startServer(t, b, ServerOptions{})
	host, port, _ := net.SplitHostPort(addr)
	base := []string{"-h", host, "-p", port}
	var cmds strings.Builder
	for i := 0; i < 30; i++ {
		fmt.Fprintf(&cmds, "SET user:%02d x\n", i)
	}
	cmds.WriteString("SET other y\nEXPIRE other 1000\nMULTI\nINCR n\nINCR n\nEXEC\n")
	runTool(t, cmds.String(), cli, base...)
	got := strings.Fields(runTool(t, "", cli, append(base, "--scan", "--pattern", "user:*")...))
	sort.Strings(got)
	if len(got) != 30 || got[0] != "user:00" || got[29] != "user:29" {
		t.Errorf("redis-cli --scan --pattern user:* found %d keys: %v", len(got), got)
	}
	info := runTool(t, "", cli, append(base, "INFO", "keyspace")...)
	if !strings.Contains(info, "# Keyspace\r\ndb0:keys=32,expires=1,avg_ttl=") && !strings.Contains(info, "# Keyspace\ndb0:keys=32,expires=1,avg_ttl=") {
		t.Errorf("INFO keyspace:\n%q", info)
	}
	if got := strings.TrimSpace(runTool(t, "", cli, append(base, "GET", "n")...)); got != "2" {
		t.Errorf("after MULTI INCR INCR EXEC from redis-cli, n = %q", got)
	}
}
