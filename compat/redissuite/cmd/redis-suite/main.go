// Command redis-suite runs units of Redis's own test suite in its
// external-server mode against redis-server (the control) and against a
// Synod cluster per protocol, and compares them (package redissuite). It
// exits 1 when a test that passes on redis-server fails on Synod and is not
// in the skip file. scripts/redis-suite obtains the suite and runs this.
//
//	go run ./compat/redissuite/cmd/redis-suite -src DIR [-units a,b] [-protocols paxos] [-ledger docs/COMMANDS.md]
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/compat"
	"github.com/synod-dev/synod/compat/redissuite"
	_ "github.com/synod-dev/synod/protocol/all"
)

// Units is the list (issue 34): the 13 first measured, then the rest.
var allUnits = []string{
	"type/string", "type/incr", "type/hash", "type/list", "type/set", "type/zset",
	"expire", "keyspace", "multi", "scan", "protocol", "quit", "info-command",
	"pubsub", "scripting", "functions", "type/stream", "type/stream-cgroups",
	"type/list-2", "type/list-3", "sort", "dump", "bitops", "hyperloglog", "geo",
	"info", "introspection", "introspection-2",
}

// deniedTags are excluded on both servers: tests that need DEBUG, a
// replica, SAVE/BGSAVE files or maxmemory eviction, none of which an
// external server is required to offer.
const deniedTags = "-needs:debug -needs:repl -needs:save -needs:config-maxmemory"

func main() {
	src := flag.String("src", "", "the Redis source tree holding runtest and tests/ (required)")
	units := flag.String("units", strings.Join(allUnits, ","), "comma-separated units (tests/unit/<unit>.tcl)")
	protocols := flag.String("protocols", "paxos", "comma-separated protocols, one 3-node cluster each")
	durability := flag.String("durability", "fsync", "the clusters' durability (fsync or memory)")
	skipPath := flag.String("skip", "compat/redissuite/skip.txt", "the skip file")
	ledger := flag.String("ledger", "", "splice the ledger into this file (docs/COMMANDS.md); empty: print only")
	unitTimeout := flag.Duration("unit-timeout", 10*time.Minute, "time limit of one unit's run")
	keep := flag.String("out", "", "keep each run's output in this directory (default: a temporary one, removed)")
	reuse := flag.String("control", "", "reuse the control's outputs kept by an earlier -out run (its redis-server directory) instead of running redis-server")
	synodReuse := flag.String("synod", "", "reuse Synod's outputs kept by an earlier -out run (its directory holding <protocol>/<unit>.txt) instead of running clusters; -synod-note must say when and at which commit that run was")
	synodNote := flag.String("synod-note", "", "with -synod: the ledger note's account of the reused run (its commit, time and load)")
	flag.Parse()
	if *src == "" {
		fmt.Fprintln(os.Stderr, "redis-suite: -src is required (scripts/redis-suite fetches the suite)")
		os.Exit(2)
	}
	if (*synodReuse == "") != (*synodNote == "") {
		fmt.Fprintln(os.Stderr, "redis-suite: -synod and -synod-note go together")
		os.Exit(2)
	}
	reuseSynod, reuseSynodNote = *synodReuse, *synodNote
	code, err := run(*src, split(*units), split(*protocols), *durability, *skipPath, *ledger, *keep, *reuse, *unitTimeout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "redis-suite:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

// reuseSynod (-synod) holds Synod outputs of an earlier run to compare
// instead of running clusters; reuseSynodNote (-synod-note) says what run.
var reuseSynod, reuseSynodNote string

// reusedRows compares the kept outputs of protocol proto's units.
func reusedRows(proto string, units []string, control map[string]redissuite.Unit, skips []redissuite.Skip) ([]redissuite.Row, error) {
	var rows []redissuite.Row
	for _, u := range units {
		b, err := os.ReadFile(filepath.Join(reuseSynod, proto, u+".txt"))
		if err != nil {
			return nil, err
		}
		res, err := redissuite.Parse(u, bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		row := redissuite.Compare(control[u], res, skips)
		fmt.Printf("%s %-22s passed %d of %d (skipped %d, failed %d) [kept output]\n", proto, u, row.Passed, row.Control, row.Skipped, row.Failed)
		rows = append(rows, row)
	}
	return rows, nil
}

// treeCommit is the worktree's commit, "+changes" when it has uncommitted
// changes.
func treeCommit() string {
	c, _ := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	out := strings.TrimSpace(string(c))
	if st, _ := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); len(bytes.TrimSpace(st)) > 0 {
		out += "+changes"
	}
	return out
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func run(src string, units, protocols []string, durability, skipPath, ledgerPath, keep, reuse string, unitTimeout time.Duration) (int, error) {
	src, err := filepath.Abs(src)
	if err != nil {
		return 0, err
	}
	if _, err := os.Stat(filepath.Join(src, "tests", "test_helper.tcl")); err != nil {
		return 0, fmt.Errorf("%s holds no Redis test suite: %w", src, err)
	}
	tclsh, err := exec.LookPath("tclsh")
	if err != nil {
		return 0, errors.New("tclsh not found (apt-get install tcl)")
	}
	redisBin, err := exec.LookPath("redis-server")
	if err != nil {
		return 0, errors.New("redis-server not found (apt-get install redis-server)")
	}
	f, err := os.Open(skipPath)
	if err != nil {
		return 0, err
	}
	skips, err := redissuite.ParseSkips(f)
	f.Close()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", skipPath, err)
	}
	tmp, err := os.MkdirTemp("", "synod-redis-suite-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	out := keep
	if out == "" {
		out = filepath.Join(tmp, "out")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return 0, err
	}

	// The control.
	control := map[string]redissuite.Unit{}
	if reuse != "" {
		for _, u := range units {
			b, err := os.ReadFile(filepath.Join(reuse, u+".txt"))
			if err != nil {
				return 0, err
			}
			if control[u], err = redissuite.Parse(u, bytes.NewReader(b)); err != nil {
				return 0, err
			}
		}
	} else {
		// A fresh redis-server per unit: in external mode a unit's
		// start_server reuses the server, so a CONFIG SET it makes stays
		// for the units after it. type/list and type/set set
		// proto-max-bulk-len to 10 GB (for their large-memory tests, which
		// are then skipped), after which protocol's "Out of range multibulk
		// payload length" waits for 2 GB that never come, until the
		// unit's timeout, and the control loses every later test of it.
		for _, u := range units {
			rdir, err := os.MkdirTemp(tmp, "redis-")
			if err != nil {
				return 0, err
			}
			rs, err := compat.StartRedis(redisBin, rdir)
			if err != nil {
				return 0, err
			}
			res, err := runUnit(tclsh, src, rs.Addr, u, "", filepath.Join(out, "redis-server"), unitTimeout)
			rs.Stop()
			if err != nil {
				return 0, err
			}
			control[u] = res
			fmt.Printf("redis-server %-22s passed %d\n", u, res.Count(redissuite.Passed))
		}
	}

	var bin, built string
	if reuseSynod == "" {
		// The commit the binary is built from (the control may have run
		// long; the tree can change meanwhile).
		built = treeCommit()
		if bin, err = cluster.BuildSynod(tmp); err != nil {
			return 0, err
		}
	}
	intro := "## Redis's own test suite\n\n" + fmt.Sprintf("Units of the Redis 7.0.15 test suite (Debian's source package) in external-server mode\n"+
		"(`--singledb --ignore-encoding --ignore-digest --durable --tags \"%s\"`), run by\n"+
		"`scripts/redis-suite` against redis-server 7.0.15 and a 3-node Synod cluster per protocol\n"+
		"(durability %s). Failed counts tests that pass on redis-server and not on Synod; the skip\n"+
		"file `compat/redissuite/skip.txt` gives a reason for each skipped test and the protocols it holds\n"+
		"for. Each section's notes say when and how its rows were measured (a run of some units replaces\n"+
		"only their rows).\n\n", deniedTags, durability)
	var sections strings.Builder
	var runs []redissuite.Run
	code := 0
	for _, p := range protocols {
		var rows []redissuite.Row
		if reuseSynod != "" {
			rows, err = reusedRows(p, units, control, redissuite.SkipsFor(skips, p))
		} else {
			// The suite's --skipfile gets the names of this protocol's
			// entries only.
			ps := redissuite.SkipsFor(skips, p)
			skipFile := filepath.Join(tmp, "skipnames-"+p)
			var names []string
			for _, s := range ps {
				names = append(names, s.Test)
			}
			if err = os.WriteFile(skipFile, []byte(strings.Join(names, "\n")), 0o644); err != nil {
				return 0, err
			}
			rows, err = runProtocol(bin, tclsh, src, p, durability, units, control, ps, skipFile, out, tmp, unitTimeout)
		}
		if err != nil {
			return 0, err
		}
		sections.WriteString(redissuite.Ledger(p, rows))
		sections.WriteString("\n")
		runs = append(runs, redissuite.Run{Protocol: p, Rows: rows})
		for _, r := range rows {
			for _, g := range r.Regressions {
				fmt.Printf("FAIL %s %s: %s\n", p, r.Unit, g)
				code = 1
			}
			for _, s := range r.StaleSkips {
				fmt.Printf("STALE SKIP %s %s: %s\n", p, r.Unit, s)
			}
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	which := "every unit"
	if len(units) != len(allUnits) {
		which = "units " + strings.Join(units, ", ")
	}
	note := fmt.Sprintf("Measured %s UTC, Synod built at commit %s, %s; load average at the end (/proc/loadavg): %s.",
		time.Now().UTC().Format("2006-01-02 15:04"), built, which, strings.TrimSpace(string(load)))
	if reuseSynod != "" {
		note = fmt.Sprintf("%s: Synod's outputs of an earlier run (%s), compared %s UTC at commit %s with the skip file then.",
			strings.ToUpper(which[:1])+which[1:], reuseSynodNote, time.Now().UTC().Format("2006-01-02 15:04"), treeCommit())
	}
	for i := range runs {
		runs[i].Note = note
	}
	fmt.Print(sections.String())
	fmt.Println(note)
	if ledgerPath != "" {
		doc, err := os.ReadFile(ledgerPath)
		if err != nil {
			return 0, err
		}
		merged := redissuite.MergeLedger(redissuite.Extract(string(doc)), intro, runs)
		if err := os.WriteFile(ledgerPath, []byte(redissuite.Splice(string(doc), merged)), 0o644); err != nil {
			return 0, err
		}
	}
	return code, nil
}

func runProtocol(bin, tclsh, src, proto, durability string, units []string, control map[string]redissuite.Unit,
	skips []redissuite.Skip, skipFile, out, tmp string, unitTimeout time.Duration) ([]redissuite.Row, error) {
	var c *cluster.Cluster
	up := func(n int) error {
		var err error
		c, err = cluster.Up(cluster.UpOptions{Dir: filepath.Join(tmp, fmt.Sprintf("cluster-%s-%d", proto, n)), Nodes: 3, Protocol: proto, Durability: durability, Binary: bin, DieWithParent: true})
		if err != nil {
			return err
		}
		return waitServing(c.Nodes[0].Client, 30*time.Second)
	}
	defer func() {
		if c != nil {
			if _, err := cluster.Down(c.Dir, true); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}
	}()
	if err := up(1); err != nil {
		return nil, err
	}
	var rows []redissuite.Row
	for i, u := range units {
		// A unit that leaves the cluster unable to serve is a failure of
		// its own (reported on its row); the next unit gets a new cluster.
		if i > 0 {
			if err := waitServing(c.Nodes[0].Client, 20*time.Second); err != nil {
				fmt.Printf("CLUSTER DOWN %s after unit %s: %v; starting a new cluster\n", proto, units[i-1], err)
				rows[i-1].Abort = "the cluster stopped serving during this unit: " + err.Error()
				if _, err := cluster.Down(c.Dir, false); err != nil {
					fmt.Fprintln(os.Stderr, err)
				}
				if err := up(i + 1); err != nil {
					return nil, err
				}
			}
		}
		res, err := runUnit(tclsh, src, c.Nodes[0].Client, u, skipFile, filepath.Join(out, proto), unitTimeout)
		if err != nil {
			return nil, err
		}
		row := redissuite.Compare(control[u], res, skips)
		if row.Abort == "" && len(res.BlockErrors) > 0 {
			row.Abort = fmt.Sprintf("%d block error(s), first: %s", len(res.BlockErrors), res.BlockErrors[0])
		}
		fmt.Printf("%s %-22s passed %d of %d (skipped %d, failed %d)\n", proto, u, row.Passed, row.Control, row.Skipped, row.Failed)
		rows = append(rows, row)
	}
	return rows, nil
}

// waitServing waits until the default namespace answers a write (a leader
// is elected).
func waitServing(addr string, limit time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ReadTimeout: 5 * time.Second})
	defer c.Close()
	deadline := time.Now().Add(limit)
	for {
		err := c.Set(context.Background(), "redis-suite:probe", "1", 0).Err()
		if err == nil {
			return c.Del(context.Background(), "redis-suite:probe").Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cluster at %s did not accept a write within %v: %v", addr, limit, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// basePort picks the suite's --baseport: its test server listens on the
// first free port of baseport-32.. (and probes port+10000 too), and its own
// probe binds the wildcard address, which does not see another suite's
// listener on 127.0.0.1; so a port the kernel just handed out is used
// instead of the fixed default, which two suites running at once share.
func basePort() (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if p+10000+32 < 65536 {
			return p + 32, nil
		}
	}
	return 0, errors.New("no free port below 55500 for the suite's test server")
}

// runUnit runs one unit with runtest's options for an external server and
// parses its output, which it also keeps in outDir/<unit>.txt.
func runUnit(tclsh, src, addr, unit, skipFile, outDir string, limit time.Duration) (redissuite.Unit, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return redissuite.Unit{}, err
	}
	base, err := basePort()
	if err != nil {
		return redissuite.Unit{}, err
	}
	// --timeout is the time without a test's report after which the Tcl
	// harness gives up on the unit: the unit's own limit, since some
	// units write tens of thousands of keys between two reports (sort's
	// 10,000-element datasets: 30,000 replicated, fsynced writes, over
	// 120 s on a loaded machine) and a TIMEOUT ends the unit anyway.
	args := []string{"tests/test_helper.tcl", "--host", host, "--port", port, "--singledb",
		"--ignore-encoding", "--ignore-digest", "--clients", "1", "--durable", "--timeout", strconv.Itoa(int(limit.Seconds())),
		"--baseport", strconv.Itoa(base), "--tags", deniedTags, "--single", "unit/" + unit}
	if skipFile != "" {
		args = append(args, "--skipfile", skipFile)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, tclsh, args...)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "TERM=dumb")
	if err := os.MkdirAll(filepath.Join(outDir, filepath.Dir(unit)), 0o755); err != nil {
		return redissuite.Unit{}, err
	}
	path := filepath.Join(outDir, unit+".txt")
	f, err := os.Create(path)
	if err != nil {
		return redissuite.Unit{}, err
	}
	cmd.Stdout, cmd.Stderr = f, f
	// The suite starts its test clients as child processes: a time-out
	// ends the whole process group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	_ = cmd.Run() // a failing unit exits 1: its output says why
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // leftover test clients
	}
	f.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		return redissuite.Unit{}, err
	}
	u, err := redissuite.Parse(unit, bytes.NewReader(b))
	if err != nil {
		return u, err
	}
	if ctx.Err() != nil {
		u.Abort = fmt.Sprintf("time-out: the unit ran longer than %v", limit)
	}
	return u, nil
}
