package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"github.com/synod-dev/synod/automaton"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/synod-dev/synod/certs"
	"github.com/synod-dev/synod/config"
)

// Membership changes of a running local cluster (`synod cluster add` and
// `synod cluster remove`), for clusters whose namespaces all use paxos.
//
// The cluster file stays the bootstrap membership: before its node list
// changes for the first time, every namespace gets the parameter
// "members: n1,n2,..." naming the bootstrap members, so that a node
// restarted later starts from the same configuration. The live membership
// is in each namespace's replicated log; `synod cluster status` shows it as
// reported by a running member (INFO's members fact).
//
//   - Add picks the next free id (n<highest ever used + 1>: ids of removed
//     nodes, whose logs and data stay in DIR, are not reused) and free
//     ports, writes the node into the cluster file, starts it (it refuses
//     clients until it is a member), and submits SYNOD MEMBER ADD through a
//     running member; the answer comes once the new node has caught up and
//     the change has executed. Restart, kill and down then work as for any
//     node.
//   - Remove submits SYNOD MEMBER REMOVE through a running member other than
//     the node, then stops the node (SIGTERM, then SIGKILL) if it runs, and
//     drops it from the cluster file (its log and data stay).
//   - Replacing a dead node is Remove (through the live members) then Add.
//
// After a membership change, `synod cluster up` on the stopped cluster
// refuses (its shape differs from the options); restart nodes one by one
// with `synod cluster restart`.

// AdminTimeout bounds the wait for one membership change.
var AdminTimeout = 90 * time.Second

func membershipCapable(cfg *config.Cluster) error {
	for _, ns := range cfg.Namespaces {
		if !automaton.SupportsMembership(ns.Protocol) {
			return fmt.Errorf("cluster: namespace %s uses %s, which has a fixed membership; add and remove need every namespace to use a protocol that changes its membership (%s)",
				ns.Name, ns.Protocol, strings.Join(membershipProtocols(), ", "))
		}
	}
	return nil
}

// pinBootstrap records the bootstrap membership in every namespace's params.
func pinBootstrap(cfg *config.Cluster) {
	var ids []string
	for _, n := range cfg.Nodes {
		ids = append(ids, n.ID)
	}
	for i := range cfg.Namespaces {
		ns := &cfg.Namespaces[i]
		if _, ok := ns.Params["members"]; ok {
			continue
		}
		if ns.Params == nil {
			ns.Params = map[string]string{}
		}
		ns.Params["members"] = strings.Join(ids, ",")
	}
}

// nextID returns n<k+1> for the highest k used by a node in the file or by
// a log file in dir.
func nextID(dir string, cfg *config.Cluster) string {
	max := 0
	note := func(id string) {
		if strings.HasPrefix(id, "n") {
			if k, err := strconv.Atoi(id[1:]); err == nil && k > max {
				max = k
			}
		}
	}
	for _, n := range cfg.Nodes {
		note(n.ID)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "n*.log"))
	for _, l := range logs {
		note(strings.TrimSuffix(filepath.Base(l), ".log"))
	}
	return fmt.Sprintf("n%d", max+1)
}

// Add starts a new node in the cluster in dir and adds it to the membership
// of every namespace. See the comment above.
func Add(dir string) (Node, error) {
	dir, err := existingDir(dir)
	if err != nil {
		return Node{}, err
	}
	cfg, err := loadConfig(dir)
	if err != nil {
		return Node{}, err
	}
	if err := cfg.Validate(); err != nil {
		return Node{}, fmt.Errorf("cluster: %s: %w", cfg.Path, err)
	}
	if err := membershipCapable(cfg); err != nil {
		return Node{}, err
	}
	running, err := runningNodes(dir)
	if err != nil {
		return Node{}, err
	}
	if len(running) == 0 {
		return Node{}, fmt.Errorf("cluster: no node of %s is running; start the cluster first", dir)
	}
	bin, err := recordedBinary(dir)
	if err != nil {
		return Node{}, err
	}
	ports, err := freePorts(4)
	if err != nil {
		return Node{}, err
	}
	nn := config.Node{ID: nextID(dir, cfg), Client: hostPort(ports[0]), Peer: hostPort(ports[1]), Metrics: hostPort(ports[2])}
	if len(cfg.Nodes) > 0 && cfg.Nodes[0].GRPC != "" {
		nn.GRPC = hostPort(ports[3])
	}
	if len(cfg.Nodes) > 0 {
		nn.Procs = cfg.Nodes[0].Procs // the co-located members' setting
	}
	pinBootstrap(cfg)
	cfg.Nodes = append(cfg.Nodes, nn)
	if cfg.TLS != nil {
		// The new member needs a certificate from the cluster CA (tls.go).
		if _, err := certs.Generate(cfg.TLS.Dir, certs.Spec{Cluster: cfg.Cluster, Nodes: CertNodes(&config.Cluster{Nodes: []config.Node{nn}})}); err != nil {
			return Node{}, fmt.Errorf("cluster: certificate for %s: %w", nn.ID, err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return Node{}, fmt.Errorf("cluster: %w", err)
	}
	if err := writeFileAtomic(cfg.Path, mustMarshal(cfg)); err != nil {
		return Node{}, fmt.Errorf("cluster: %w", err)
	}
	p, err := startNode(dir, bin, nn.ID)
	if err != nil {
		return Node{}, err
	}
	tc, err := ClientTLS(cfg)
	if err != nil {
		p.stop()
		os.Remove(pidPath(dir, nn.ID))
		return Node{}, err
	}
	if err := p.waitReady(nn.Client, cfg.Password, tc, ReadyTimeout); err != nil {
		p.stop()
		os.Remove(pidPath(dir, nn.ID))
		return Node{}, err
	}
	out := Node{ID: nn.ID, Client: nn.Client, Peer: nn.Peer, Metrics: nn.Metrics, GRPC: nn.GRPC, PID: p.cmd.Process.Pid}
	for _, ns := range cfg.Namespaces {
		if err := submitChange(dir, cfg, ns.Name, nn.ID, "ADD", nn.ID, nn.Peer, nn.Client); err != nil {
			return out, fmt.Errorf("%w; node %s is running but may not be a member: check `synod cluster status --dir %s`, or remove it with `synod cluster remove %s --dir %s`",
				err, nn.ID, dir, nn.ID, dir)
		}
	}
	return out, nil
}

// Remove takes node id out of the membership of every namespace, stops it if
// it runs, and drops it from the cluster file.
func Remove(dir, id string) error {
	dir, err := existingDir(dir)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(dir)
	if err != nil {
		return err
	}
	if err := membershipCapable(cfg); err != nil {
		return err
	}
	idx := -1
	for i, n := range cfg.Nodes {
		if n.ID == id {
			idx = i
		}
	}
	if idx < 0 {
		return fmt.Errorf("cluster: no node %q in %s", id, cfg.Path)
	}
	if len(cfg.Nodes) == 1 {
		return fmt.Errorf("cluster: %s is the only node", id)
	}
	for _, ns := range cfg.Namespaces {
		if err := submitChange(dir, cfg, ns.Name, id, "REMOVE", id); err != nil {
			return err
		}
	}
	if err := stopNode(dir, id); err != nil {
		return err
	}
	pinBootstrap(cfg)
	cfg.Nodes = append(cfg.Nodes[:idx], cfg.Nodes[idx+1:]...)
	return writeFileAtomic(cfg.Path, mustMarshal(cfg))
}

// stopNode stops node id if it runs: SIGTERM, then SIGKILL after StopTimeout.
func stopNode(dir, id string) error {
	pid, err := nodePID(dir, id)
	if err != nil || pid == 0 {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("cluster: kill -TERM %d (%s): %w", pid, id, err)
	}
	if !waitGone(pid, dir, id, StopTimeout) {
		if alive, err := isNode(pid, dir, id); err == nil && alive {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		if !waitGone(pid, dir, id, killWait) {
			return fmt.Errorf("cluster: node %s (pid %d) survived SIGKILL", id, pid)
		}
	}
	os.Remove(pidPath(dir, id))
	return nil
}

// submitChange sends SYNOD MEMBER action args... for namespace ns to the
// running members other than skip, in turn, until one answers; TRYAGAIN
// answers and connection failures are retried until AdminTimeout. An add of
// a member or a remove of a non-member counts as done (a retry after an
// answer that was lost).
func submitChange(dir string, cfg *config.Cluster, ns, skip string, action string, args ...string) error {
	deadline := time.Now().Add(AdminTimeout)
	var last error
	for attempt := 0; time.Now().Before(deadline); attempt++ {
		var addrs []string
		for _, n := range cfg.Nodes {
			if n.ID == skip {
				continue
			}
			if pid, err := nodePID(dir, n.ID); err == nil && pid != 0 {
				addrs = append(addrs, n.Client)
			}
		}
		if len(addrs) == 0 {
			return fmt.Errorf("cluster: no running member to submit %s %s to", strings.ToLower(action), strings.Join(args, " "))
		}
		addr := addrs[attempt%len(addrs)]
		reply, err := adminCall(addr, cfg.Password, time.Until(deadline), [][]string{{"SYNOD", "NS", ns}, append([]string{"SYNOD", "MEMBER", action}, args...)})
		switch {
		case err != nil:
			last = err
		case reply == "+OK":
			return nil
		case action == "ADD" && strings.Contains(reply, "is already a member"),
			action == "REMOVE" && strings.Contains(reply, "is not a member ("):
			return nil
		case strings.HasPrefix(reply, "-TRYAGAIN"):
			last = fmt.Errorf("%s: %s", addr, reply[1:])
		default:
			return fmt.Errorf("cluster: %s %s on namespace %s via %s: %s", strings.ToLower(action), strings.Join(args, " "), ns, addr, strings.TrimPrefix(reply, "-"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("cluster: %s %s on namespace %s not done within %v (outcome unknown): %v", strings.ToLower(action), strings.Join(args, " "), ns, AdminTimeout, last)
}

// adminCall sends RESP commands on one connection (after AUTH when a
// password is set) and returns the first line of the last reply.
func adminCall(addr, password string, timeout time.Duration, cmds [][]string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	r := bufio.NewReader(conn)
	if password != "" {
		cmds = append([][]string{{"AUTH", password}}, cmds...)
	}
	var line string
	for _, c := range cmds {
		var b strings.Builder
		fmt.Fprintf(&b, "*%d\r\n", len(c))
		for _, a := range c {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
		if _, err := conn.Write([]byte(b.String())); err != nil {
			return "", err
		}
		if line, err = r.ReadString('\n'); err != nil {
			return "", err
		}
		line = strings.TrimRight(line, "\r\n")
		if strings.HasPrefix(line, "-") && c[0] != "SYNOD" || (len(c) > 1 && c[1] == "NS" && line != "+OK") {
			return "", fmt.Errorf("%s: %s: %s", addr, strings.Join(c[:2], " "), line)
		}
	}
	return line, nil
}

// Members returns the live membership of each namespace as reported by the
// first running node that answers INFO, and that node's id.
func Members(dir string) (map[string][]string, string, error) {
	dir, err := existingDir(dir)
	if err != nil {
		return nil, "", err
	}
	cfg, err := loadConfig(dir)
	if err != nil {
		return nil, "", err
	}
	var last error = errors.New("no node is running")
	for _, n := range cfg.Nodes {
		if pid, err := nodePID(dir, n.ID); err != nil || pid == 0 {
			continue
		}
		info, err := infoText(n.Client, cfg.Password)
		if err != nil {
			last = err
			continue
		}
		out := map[string][]string{}
		for _, l := range strings.Split(info, "\n") {
			name, facts, ok := strings.Cut(strings.TrimSpace(l), ":")
			if !ok {
				continue
			}
			for _, f := range strings.Split(facts, ",") {
				if v, ok := strings.CutPrefix(f, "members="); ok {
					out[name] = strings.Fields(v)
				}
			}
		}
		return out, n.ID, nil
	}
	return nil, "", fmt.Errorf("cluster: cannot read the live membership: %v", last)
}

func infoText(addr, password string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(conn)
	if password != "" {
		fmt.Fprintf(conn, "*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n", len(password), password)
		if l, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(l, "+OK") {
			return "", fmt.Errorf("AUTH: %q %v", l, err)
		}
	}
	if _, err := conn.Write([]byte("*1\r\n$4\r\nINFO\r\n")); err != nil {
		return "", err
	}
	head, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
	if err != nil || !strings.HasPrefix(head, "$") || n < 0 || n > 1<<24 {
		return "", fmt.Errorf("INFO: unexpected reply %q", head)
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(r, buf); err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// membershipProtocols lists the registered protocols that change their
// membership at run time.
func membershipProtocols() []string {
	var out []string
	for _, n := range automaton.Names() {
		if automaton.SupportsMembership(n) {
			out = append(out, n)
		}
	}
	return out
}
