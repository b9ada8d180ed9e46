package nemesis

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// MaxNodes bounds a harness: node i's link addresses are .1xy (x, y <= 9).
const MaxNodes = 9

// Name prefixes of every kernel object a harness creates; the pid of the
// creating process follows, so that a sweep can tell stale objects (their
// creator is gone) from live ones of a concurrent run.
const (
	nsPrefix     = "synodchaos-" // network namespaces: synodchaos-<pid>-n<i>
	bridgePrefix = "scb"         // bridge: scb<pid>
	vethPrefix   = "scv"         // host side of node i's veth pair: scv<pid>n<i>
	dirPrefix    = "synod-chaos-"
)

// Ports every node listens on at its own address.
const (
	clientPort = 7000
	peerPort   = 7100
	relayPort  = 7400
)

// Net is the namespaces, the bridge and the addresses of one harness.
type Net struct {
	pid    int
	n      int
	subnet string // "10.213.S": node i is .i, the bridge .254, link i->j's relay .1ij
	bridge string
	routes map[string]bool // "i j": blackhole route for link i->j present
}

// Available reports why namespaces cannot be made here ("" when they can):
// the caller skips with that message.
func Available() string {
	if os.Geteuid() != 0 {
		return "nemesis: network namespaces need root (euid is " + strconv.Itoa(os.Geteuid()) + ")"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "nemesis: no `ip` command (install iproute2)"
	}
	name := fmt.Sprintf("%s%d-probe", nsPrefix, os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return fmt.Sprintf("nemesis: cannot create a network namespace: %v: %s", err, strings.TrimSpace(string(out)))
	}
	exec.Command("ip", "netns", "del", name).Run()
	return ""
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (h *Net) ns(i int) string         { return fmt.Sprintf("%s%d-n%d", nsPrefix, h.pid, i) }
func (h *Net) veth(i int) string       { return fmt.Sprintf("%s%dn%d", vethPrefix, h.pid, i) }
func (h *Net) nodeIP(i int) string     { return fmt.Sprintf("%s.%d", h.subnet, i) }
func (h *Net) relayIP(i, j int) string { return fmt.Sprintf("%s.%d", h.subnet, 100+10*i+j) }

// ClientAddr is node i's RESP address (1-based), reachable from the root namespace.
func (h *Net) ClientAddr(i int) string {
	return net.JoinHostPort(h.nodeIP(i), strconv.Itoa(clientPort))
}

// PeerAddr is where node i listens for peers.
func (h *Net) PeerAddr(i int) string { return net.JoinHostPort(h.nodeIP(i), strconv.Itoa(peerPort)) }

// RelayAddr is the address node i dials to reach node j: the relay of link i->j.
func (h *Net) RelayAddr(i, j int) string {
	return net.JoinHostPort(h.relayIP(i, j), strconv.Itoa(relayPort))
}

// NewNet sweeps stale objects of dead runs, then creates a bridge with one
// namespace per node (1..n), each joined by a veth pair, and one address on
// the bridge per ordered link. On error everything made so far is removed.
func NewNet(n int) (*Net, error) {
	if n < 1 || n > MaxNodes {
		return nil, fmt.Errorf("nemesis: %d nodes: must be 1-%d", n, MaxNodes)
	}
	Sweep()
	h := &Net{pid: os.Getpid(), n: n, routes: map[string]bool{}}
	h.bridge = fmt.Sprintf("%s%d", bridgePrefix, h.pid)
	sub, err := freeSubnet(h.pid)
	if err != nil {
		return nil, err
	}
	h.subnet = sub
	if err := h.build(); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

func (h *Net) build() error {
	if err := ipCmd("link", "add", h.bridge, "type", "bridge"); err != nil {
		return err
	}
	if err := ipCmd("addr", "add", h.subnet+".254/24", "dev", h.bridge); err != nil {
		return err
	}
	for i := 1; i <= h.n; i++ {
		for j := 1; j <= h.n; j++ {
			if i != j {
				if err := ipCmd("addr", "add", h.relayIP(i, j)+"/24", "dev", h.bridge); err != nil {
					return err
				}
			}
		}
	}
	if err := ipCmd("link", "set", h.bridge, "up"); err != nil {
		return err
	}
	for i := 1; i <= h.n; i++ {
		ns, veth := h.ns(i), h.veth(i)
		steps := [][]string{
			{"netns", "add", ns},
			{"link", "add", veth, "type", "veth", "peer", "name", veth + "p"},
			{"link", "set", veth + "p", "netns", ns},
			{"-n", ns, "link", "set", veth + "p", "name", "eth0"},
			{"-n", ns, "addr", "add", h.nodeIP(i) + "/24", "dev", "eth0"},
			{"-n", ns, "link", "set", "eth0", "up"},
			{"-n", ns, "link", "set", "lo", "up"},
			{"link", "set", veth, "master", h.bridge},
			{"link", "set", veth, "up"},
		}
		for _, s := range steps {
			if err := ipCmd(s...); err != nil {
				return err
			}
		}
	}
	return nil
}

// freeSubnet picks 10.213.S.0/24 not used by any address of the root namespace.
func freeSubnet(pid int) (string, error) {
	out, err := exec.Command("ip", "-o", "-4", "addr").Output()
	if err != nil {
		return "", fmt.Errorf("nemesis: ip addr: %w", err)
	}
	for k := 0; k < 250; k++ {
		s := fmt.Sprintf("10.213.%d", (pid+k)%250)
		if !strings.Contains(string(out), " "+s+".") {
			return s, nil
		}
	}
	return "", errors.New("nemesis: no free 10.213.x.0/24 subnet")
}

// Block makes node i unable to send to node j (one way, on the connection
// i dials to j): a blackhole route in i's namespace for the address of the
// relay of link i->j. The kernel discards i's packets of that connection,
// its acknowledgements included, so the stream stalls and breaks.
func (h *Net) Block(i, j int) error {
	k := fmt.Sprint(i, j)
	if h.routes[k] {
		return nil
	}
	if err := ipCmd("-n", h.ns(i), "route", "add", "blackhole", h.relayIP(i, j)+"/32"); err != nil {
		return err
	}
	h.routes[k] = true
	return nil
}

// HealAll removes every blackhole route.
func (h *Net) HealAll() error {
	var first error
	for k := range h.routes {
		var i, j int
		fmt.Sscan(k, &i, &j)
		if err := ipCmd("-n", h.ns(i), "route", "del", "blackhole", h.relayIP(i, j)+"/32"); err != nil && first == nil {
			first = err
		}
		delete(h.routes, k)
	}
	return first
}

// Close removes the namespaces, veths and bridge of this harness.
func (h *Net) Close() error {
	for i := 1; i <= h.n; i++ {
		killNamespace(h.ns(i))
		exec.Command("ip", "link", "del", h.veth(i)).Run()
	}
	exec.Command("ip", "link", "del", h.bridge).Run()
	return nil
}

// killNamespace SIGKILLs what still runs in a namespace of ours, then removes it.
func killNamespace(ns string) {
	if out, err := exec.Command("ip", "netns", "pids", ns).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	exec.Command("ip", "netns", "del", ns).Run()
}

// alive reports whether a process with this pid exists.
func alive(pid int) bool {
	return pid > 0 && syscall.Kill(pid, 0) == nil
}

// stalePID parses the creator pid after prefix in name; ok when it is dead.
func stalePID(name, prefix string) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return false
	}
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	pid, err := strconv.Atoi(rest[:end])
	return err == nil && !alive(pid)
}

// Sweep removes the namespaces, links, tmpfs mounts and directories left by
// harnesses whose process died without cleaning up (kill -9, a crash).
func Sweep() {
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) > 0 && stalePID(f[0], nsPrefix) {
				killNamespace(f[0])
			}
		}
	}
	if out, err := exec.Command("ip", "-o", "link", "show").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if stalePID(name, bridgePrefix) || stalePID(name, vethPrefix) {
				exec.Command("ip", "link", "del", name).Run()
			}
		}
	}
	if b, err := os.ReadFile("/proc/mounts"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) > 2 && f[2] == "tmpfs" && strings.Contains(f[1], "/"+dirPrefix) {
				base := f[1][strings.Index(f[1], "/"+dirPrefix)+1:]
				if stalePID(base, dirPrefix) {
					syscall.Unmount(f[1], syscall.MNT_DETACH)
				}
			}
		}
	}
	if ents, err := os.ReadDir(os.TempDir()); err == nil {
		for _, e := range ents {
			if e.IsDir() && stalePID(e.Name(), dirPrefix) {
				os.RemoveAll(os.TempDir() + "/" + e.Name())
			}
		}
	}
}
