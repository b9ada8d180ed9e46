package compat

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/redis/go-redis/v9"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/compat/redissuite"
	"github.com/synod-dev/synod/config"
	_ "github.com/synod-dev/synod/protocol/all"
	"github.com/synod-dev/synod/service"
)

// suite is set up by TestMain; skipReason says why it could not be.
var (
	suite      *Suite
	skipReason string
	casesRan   bool
	// notServing maps protocols whose namespaces did not answer a GET
	// within probeTimeout to the answer they gave; the cases skip them and
	// TestProtocolsServe fails naming them.
	serving    []string
	notServing map[string]string
)

// probeTimeout bounds how long a namespace may take to answer its first GET
// (leader elections included).
const probeTimeout = 8 * time.Second

// probe sends GET compat:probe (no state change) to every namespace of every
// pass until it answers without error or probeTimeout passes, all at once.
func probe(addr string, passes []Pass, protos []string) ([]string, map[string]string) {
	var mu sync.Mutex
	bad := map[string]string{}
	var wg sync.WaitGroup
	for _, p := range passes {
		for _, proto := range protos {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ns := p.NSPrefix + proto
				c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 3, PoolSize: 1, MaxRetries: -1,
					ReadTimeout: 2 * time.Second, OnConnect: func(ctx context.Context, cn *redis.Conn) error {
						return cn.Do(ctx, "synod", "ns", ns).Err()
					}})
				defer c.Close()
				deadline := time.Now().Add(probeTimeout)
				for {
					err := c.Get(context.Background(), "compat:probe").Err()
					if err == nil || errors.Is(err, redis.Nil) {
						return
					}
					if time.Now().After(deadline) {
						mu.Lock()
						bad[proto] = fmt.Sprintf("namespace %s: GET answered %v", ns, err)
						mu.Unlock()
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			}()
		}
	}
	wg.Wait()
	var ok []string
	for _, proto := range protos {
		if _, b := bad[proto]; !b {
			ok = append(ok, proto)
		}
	}
	return ok, bad
}

// TestProtocolsServe: every registered protocol that can run the KV service
// serves a GET on a live 3-node cluster (the others are left out of the
// cases, so that one broken protocol costs one failure, not one time-out per
// command).
func TestProtocolsServe(t *testing.T) {
	needSuite(t)
	for _, p := range slices.Sorted(maps.Keys(notServing)) {
		t.Errorf("protocol %s does not serve a live cluster within %v, so the cases skip it: %s", p, probeTimeout, notServing[p])
	}
}

// kvProtocols lists the registered protocols that can run the KV service.
func kvProtocols() []string {
	svc, err := service.Lookup("kv")
	if err != nil {
		return nil
	}
	var out []string
	for _, p := range automaton.Names() {
		if automaton.CheckService(p, svc) == nil {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// python finds an interpreter that can import redis.
func python() (string, error) {
	py := os.Getenv("SYNOD_COMPAT_PYTHON")
	if py == "" {
		var err error
		if py, err = exec.LookPath("python3"); err != nil {
			return "", fmt.Errorf("python3 not found")
		}
	}
	if out, err := exec.Command(py, "-c", "import redis").CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s cannot import redis (pip install redis): %s", py, strings.TrimSpace(string(out)))
	}
	return py, nil
}

func TestMain(m *testing.M) {
	os.Exit(setupAndRun(m))
}

func setupAndRun(m *testing.M) int {
	redisBin, err := exec.LookPath("redis-server")
	if err != nil {
		skipReason = "redis-server not found (apt-get install redis-server)"
		return m.Run()
	}
	py, err := python()
	if err != nil {
		skipReason = err.Error()
		return m.Run()
	}
	tmp, err := os.MkdirTemp("", "synod-compat-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer os.RemoveAll(tmp)
	bin, err := cluster.BuildSynod(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	rdir := filepath.Join(tmp, "redis")
	if err := os.Mkdir(rdir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	rs, err := StartRedis(redisBin, rdir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer rs.Stop()

	protos := kvProtocols()
	passes := []Pass{{Name: "go-redis", NSPrefix: "go-"}, {Name: "redis-py", NSPrefix: "py-", DBOffset: PyDBOffset}}
	var extra []config.Namespace
	for _, p := range passes {
		for _, proto := range protos {
			ns := config.Namespace{Name: p.NSPrefix + proto, Protocol: proto, Service: "kv"}
			// The suite's cluster runs in memory and never restarts a
			// node: a protocol that refuses memory on several nodes
			// unless told so (esds: volatile) is told so.
			if _, ok := automaton.DefaultParams(proto)["volatile"]; ok {
				ns.Params = map[string]string{"volatile": "true"}
			}
			extra = append(extra, ns)
		}
	}
	// adam's writes call the namespace named by its parameter callee
	// ("remote" by default): a paxos namespace that serves nested requests.
	extra = append(extra, config.Namespace{Name: "remote", Protocol: "paxos", Service: "kv"})
	cdir := filepath.Join(tmp, "cluster")
	c, err := cluster.Up(cluster.UpOptions{Dir: cdir, Nodes: 3, Protocol: "unreplicated", Durability: "memory", Binary: bin, Extra: extra, DieWithParent: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer func() {
		if _, err := cluster.Down(c.Dir, true); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	pyd, err := StartPyRedis(py, filepath.Join("py", "driver.py"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer pyd.Close()
	god := NewGoRedis()
	defer god.Close()
	passes[0].Driver, passes[1].Driver = god, pyd
	serving, notServing = probe(c.Nodes[0].Client, passes, protos)
	suite = &Suite{Redis: rs.Addr, Synod: c.Nodes[0].Client, Protocols: serving, Passes: passes}
	code := m.Run()
	fmt.Println(suite.Counts())
	if code != 0 {
		// The cluster's directory goes with tmp: what the nodes logged
		// (leader changes, take-overs, warnings) is the evidence a failure
		// under load leaves.
		printLogTails(cdir, c.Nodes, 80)
	}
	return code
}

// printLogTails prints the last n lines of each node's log in dir.
func printLogTails(dir string, nodes []cluster.Node, n int) {
	for _, nd := range nodes {
		b, err := os.ReadFile(filepath.Join(dir, nd.ID+".log"))
		if err != nil {
			fmt.Println(err)
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		fmt.Printf("=== the last %d lines of %s.log\n%s\n", len(lines), nd.ID, strings.Join(lines, "\n"))
	}
}

func needSuite(t *testing.T) {
	t.Helper()
	if suite != nil {
		return
	}
	if os.Getenv("SYNOD_REQUIRE_COMPAT") == "1" {
		t.Fatalf("compatibility suite cannot run and SYNOD_REQUIRE_COMPAT=1: %s", skipReason)
	}
	t.Skipf("compatibility suite skipped: %s (SYNOD_REQUIRE_COMPAT=1 makes this a failure)", skipReason)
}

func listArg(d *datadriven.TestData, key string) []string {
	a, ok := d.Arg(key)
	if !ok {
		return nil
	}
	var out []string
	for _, v := range a.Vals {
		for _, s := range strings.Split(v, ",") {
			if s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// TestCases runs every case file in testdata/ on redis-server and every
// selected Synod namespace with both client libraries.
func TestCases(t *testing.T) {
	needSuite(t)
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "run" {
				d.Fatalf(t, "unknown directive %q (want run)", d.Cmd)
			}
			c, err := suite.ParseCase(d.Input, listArg(d, "ns"), listArg(d, "skip"), listArg(d, "refused"), listArg(d, "differs"))
			if err != nil {
				d.Fatalf(t, "%v", err)
			}
			out, problems := suite.Run(c)
			for _, p := range problems {
				t.Errorf("%s: %s", d.Pos, p)
			}
			return out
		})
	})
	casesRan = !t.Failed()
}

// commandList asks t for COMMAND LIST: the commands (a subcommand,
// container|sub, is its container's).
func commandList(t *testing.T, tgt Target) map[string]bool {
	t.Helper()
	v, err := suite.Passes[0].Driver.Do(tgt, []string{"COMMAND", "LIST"})
	if err != nil {
		t.Fatal(err)
	}
	a, ok := v.([]any)
	if !ok {
		t.Fatalf("COMMAND LIST on %s answered %s", tgt.Addr, Render(v))
	}
	out := map[string]bool{}
	for _, e := range a {
		if s, ok := e.(string); ok && !strings.Contains(s, "|") {
			out[strings.ToLower(s)] = true
		}
	}
	return out
}

func (s *Suite) synodTarget() Target {
	return Target{Addr: s.Synod, NS: s.Passes[0].NSPrefix + s.Protocols[0]}
}

// TestUnsupported: every command redis-server knows and Synod does not
// answers Redis's own unknown-command error, word for word; the error's
// format is first checked against redis-server itself.
func TestUnsupported(t *testing.T) {
	needSuite(t)
	d := suite.Passes[0].Driver
	probe := []string{"NOSUCHCOMMAND", "a", "b"}
	v, err := d.Do(Target{Addr: suite.Redis}, probe)
	if err != nil {
		t.Fatal(err)
	}
	if want := ErrorReply(UnknownCommand(probe)); v != want {
		t.Fatalf("redis-server answers an unknown command with %s, UnknownCommand says %s", Render(v), Render(want))
	}
	redisCmds := commandList(t, Target{Addr: suite.Redis})
	synodCmds := commandList(t, suite.synodTarget())
	n := 0
	for _, name := range slices.Sorted(maps.Keys(redisCmds)) {
		if synodCmds[name] {
			continue
		}
		args := []string{strings.ToUpper(name), "compat:x"}
		got, err := d.Do(suite.synodTarget(), args)
		if err != nil {
			t.Fatal(err)
		}
		suite.count(1, 1, 0)
		if want := ErrorReply(UnknownCommand(args)); got != want {
			suite.count(0, 0, 1)
			t.Errorf("%s: Synod does not list it in COMMAND LIST, yet answered %s (want %s)", name, Render(got), Render(want))
		}
		n++
	}
	t.Logf("%d commands redis-server knows and Synod does not answer the unknown-command error", n)
}

// caseCommands lists the command names used by the case files.
func caseCommands(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	files, err := filepath.Glob(filepath.Join("testdata", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		datadriven.RunTest(t, f, func(t *testing.T, d *datadriven.TestData) string {
			for _, line := range strings.Split(d.Input, "\n") {
				if l, err := ParseLine(line); err == nil {
					out[l.Name()] = true
				}
			}
			return d.Expected
		})
	}
	return out
}

// notCovered are commands the cases leave out, with the reason.
var notCovered = map[string]string{
	"subscribe":    "a subscribed connection receives pushes between answers; gateway/subscribe_test.go",
	"unsubscribe":  "as subscribe",
	"psubscribe":   "as subscribe",
	"punsubscribe": "as subscribe",
	"ssubscribe":   "as subscribe",
	"sunsubscribe": "as subscribe",
	"monitor":      "a monitoring connection receives a line per command between answers; gateway/pubsub_test.go TestMonitor",
	"cluster":      "a standalone redis-server refuses it (cluster support disabled); node/shard_cluster_test.go and livetest's sharded cluster (go-redis ClusterClient, redis-py RedisCluster) check it",
	"asking":       "as cluster",
	"readonly":     "as cluster",
	"readwrite":    "as cluster",
	"pfselftest":   "adds 10 million elements (seconds per namespace); service's TestHLLSelfTest runs the same check",
}

// TestCoverage: every command Synod lists in COMMAND LIST is used by some
// case (or listed in notCovered with a reason).
func TestCoverage(t *testing.T) {
	needSuite(t)
	used := caseCommands(t)
	for _, name := range slices.Sorted(maps.Keys(commandList(t, suite.synodTarget()))) {
		if !used[name] && notCovered[name] == "" {
			t.Errorf("Synod supports %s but no case in compat/testdata uses it: add one", strings.ToUpper(name))
		}
	}
}

// TestCommandsDoc regenerates docs/COMMANDS.md, the supported commands per
// protocol, from the gateway's command table (COMMAND LIST of a live node),
// the case outcomes of TestCases and the registry's capabilities, and fails
// when the checked-in file differs (SYNOD_COMPAT_REWRITE=1 rewrites it). It
// needs TestCases to have run in full, first.
func TestCommandsDoc(t *testing.T) {
	needSuite(t)
	if !casesRan {
		t.Skip("TestCases did not run in full before this test")
	}
	doc := CommandsDoc(slices.Sorted(maps.Keys(commandList(t, suite.synodTarget()))), suite.Protocols, suite.Outcomes())
	path := filepath.Join("..", "docs", "COMMANDS.md")
	// The ledger of Redis's own suite is scripts/redis-suite's to write:
	// kept as it is.
	if cur, err := os.ReadFile(path); err == nil {
		if l := redissuite.Extract(string(cur)); l != "" {
			doc += "\n" + l
		}
	}
	if os.Getenv("SYNOD_COMPAT_REWRITE") == "1" {
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	old, err := os.ReadFile(path)
	if err != nil || string(old) != doc {
		t.Fatalf("docs/COMMANDS.md is out of date with the gateway's commands and the compatibility cases; regenerate it: SYNOD_COMPAT_REWRITE=1 go test ./compat -run 'TestCases|TestCommandsDoc'")
	}
}
