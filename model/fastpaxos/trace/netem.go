package trace

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// WAN is a WAN-like link made with a network namespace: a veth pair between
// this namespace (HostAddr) and a new one (PeerAddr), with a netem delay on
// both ends. It needs root, ip(8), tc(8) and the kernel's sch_netem.
type WAN struct {
	NS                 string
	HostAddr, PeerAddr string
	hostIf             string
}

func run(ctx context.Context, args ...string) error {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// NewWAN builds the link with netem "delay DELAY JITTER distribution pareto"
// on each end (one-way delay ≈ DELAY), or returns an error wrapping
// ErrNetemUnavailable saying why not (and removes whatever it created).
func NewWAN(ctx context.Context, delay, jitter string) (*WAN, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: needs root (network namespaces and tc)", ErrNetemUnavailable)
	}
	for _, bin := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("%w: %s not installed (iproute2)", ErrNetemUnavailable, bin)
		}
	}
	id := strconv.Itoa(os.Getpid() % 100000)
	w := &WAN{NS: "synod-fpm-" + id, HostAddr: "10.211.0.1", PeerAddr: "10.211.0.2", hostIf: "fpm" + id + "h"}
	peerIf := "fpm" + id + "p"
	steps := [][]string{
		{"ip", "netns", "add", w.NS},
		{"ip", "link", "add", w.hostIf, "type", "veth", "peer", "name", peerIf},
		{"ip", "link", "set", peerIf, "netns", w.NS},
		{"ip", "addr", "add", w.HostAddr + "/24", "dev", w.hostIf},
		{"ip", "link", "set", w.hostIf, "up"},
		{"ip", "netns", "exec", w.NS, "ip", "addr", "add", w.PeerAddr + "/24", "dev", peerIf},
		{"ip", "netns", "exec", w.NS, "ip", "link", "set", peerIf, "up"},
		{"ip", "netns", "exec", w.NS, "ip", "link", "set", "lo", "up"},
	}
	netem := []string{"root", "netem", "delay", delay}
	if jitter != "" && jitter != "0" {
		netem = append(netem, jitter, "distribution", "pareto")
	}
	steps = append(steps,
		append([]string{"tc", "qdisc", "add", "dev", w.hostIf}, netem...),
		append([]string{"ip", "netns", "exec", w.NS, "tc", "qdisc", "add", "dev", peerIf}, netem...))
	for _, s := range steps {
		if err := run(ctx, s...); err != nil {
			w.Close()
			if s[0] == "tc" || (len(s) > 4 && s[4] == "tc") {
				return nil, fmt.Errorf("%w: %v (the kernel has no sch_netem?)", ErrNetemUnavailable, err)
			}
			return nil, fmt.Errorf("%w: %v", ErrNetemUnavailable, err)
		}
	}
	return w, nil
}

// Listen listens on the host end of the link.
func (w *WAN) Listen() (net.Listener, error) { return net.Listen("tcp", w.HostAddr+":0") }

// Exec returns a command that runs argv inside the namespace (the far end).
func (w *WAN) Exec(ctx context.Context, argv ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", w.NS}, argv...)...)
}

// Close removes the veth pair and the namespace.
func (w *WAN) Close() error {
	ctx := context.Background()
	err1 := run(ctx, "ip", "link", "del", w.hostIf)
	err2 := run(ctx, "ip", "netns", "del", w.NS)
	if err2 != nil {
		return err2
	}
	_ = err1 // absent when creation stopped before it, or gone with the namespace
	return nil
}
