package experiment

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// WAN-like links are made with network namespaces and netem delays (tc
// qdisc netem), created by the experiment and removed by it. Not every
// machine can: it takes root (or CAP_NET_ADMIN), the ip and tc commands,
// and a kernel with the sch_netem queueing discipline. NetemCheck finds out
// once, by building a scratch namespace with a netem qdisc on its loopback
// and removing it; experiments return its error as Unavailable for their
// WAN cells, so the reason is printed in the table instead of a failure.

var (
	netemOnce sync.Once
	netemErr  error
)

// NetemCheck reports whether network namespaces with netem delays can be
// made here; nil when they can, else an Unavailable error saying why.
func NetemCheck() error {
	netemOnce.Do(func() { netemErr = netemProbe() })
	return netemErr
}

func netemProbe() error {
	for _, cmd := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(cmd); err != nil {
			return Unavailable("WAN cells need network namespaces with netem: the %q command is missing (Debian: iproute2)", cmd)
		}
	}
	ns := fmt.Sprintf("synod-probe-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		return Unavailable("WAN cells need network namespaces with netem: cannot create a network namespace (%s); run as root or with CAP_NET_ADMIN", strings.TrimSpace(string(out)))
	}
	defer exec.Command("ip", "netns", "del", ns).Run()
	if out, err := exec.Command("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		return Unavailable("WAN cells need network namespaces with netem: cannot bring up a namespace's loopback (%s)", strings.TrimSpace(string(out)))
	}
	if out, err := exec.Command("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms").CombinedOutput(); err != nil {
		return Unavailable("WAN cells need network namespaces with netem: this kernel refuses a netem qdisc (tc: %q), so its sch_netem module is missing", strings.TrimSpace(string(out)))
	}
	return nil
}
