// Package deploy holds Synod's deployment files (docs/DEPLOY.md): the
// Dockerfile, the three-node compose deployment and the systemd units; its
// tests keep them consistent with the cluster file's validation and with the
// image deploy/image builds with Go alone.
package deploy

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/deploy/image"
	_ "github.com/synod-dev/synod/protocol/all"
)

// TestDockerfileMatchesImage: the Dockerfile builds with the Go release of
// go.mod and makes the image deploy/image makes (entrypoint, user, ports,
// data directory).
func TestDockerfileMatchesImage(t *testing.T) {
	df := read(t, "Dockerfile")
	mod := read(t, "../go.mod")
	goVer := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(mod)
	if goVer == nil || !strings.Contains(df, "FROM golang:"+goVer[1]+"-") {
		t.Errorf("Dockerfile's builder is not golang:%v (go.mod)", goVer)
	}
	for _, want := range []string{
		`ENTRYPOINT ["` + image.BinaryPath + `", "node"]`,
		"USER " + image.User,
		"WORKDIR " + image.DataDir,
		"VOLUME " + image.DataDir,
		"EXPOSE " + strings.Join(image.Ports, " "),
		"FROM scratch",
		"CGO_ENABLED=0",
		"-X " + image.VersionSymbol + "=",
	} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
}

// TestCompose: the compose cluster file validates, names the services'
// host names on the ports the image exposes, and every service runs its own
// node id with its own key.
func TestCompose(t *testing.T) {
	cfg, err := config.Load("compose/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if on, optional := cfg.ClientTLS(); !on || optional || cfg.Secret == "" {
		t.Errorf("compose cluster: TLS for clients %v (optional %v), secret %q", on, optional, cfg.Secret)
	}
	var file struct {
		Services map[string]struct {
			Hostname string   `yaml:"hostname"`
			User     string   `yaml:"user"`
			Command  []string `yaml:"command"`
			Volumes  []string `yaml:"volumes"`
			ReadOnly bool     `yaml:"read_only"`
			CapDrop  []string `yaml:"cap_drop"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal([]byte(read(t, "compose/compose.yaml")), &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Services) != len(cfg.Nodes) {
		t.Errorf("%d services, %d nodes", len(file.Services), len(cfg.Nodes))
	}
	for _, n := range cfg.Nodes {
		s, ok := file.Services[n.ID]
		if !ok {
			t.Errorf("no service for node %s", n.ID)
			continue
		}
		for addr, port := range map[string]string{n.Client: "6379", n.Peer: "7000", n.GRPC: "7400", n.Metrics: "9100"} {
			if addr != n.ID+":"+port || !slices.Contains(image.Ports, port+"/tcp") {
				t.Errorf("node %s address %s: want %s:%s, a port the image exposes", n.ID, addr, n.ID, port)
			}
		}
		if s.Hostname != n.ID || !slices.Equal(s.Command, []string{"--config", "/etc/synod/cluster.yaml", "--id", n.ID}) {
			t.Errorf("service %s: hostname %q command %q", n.ID, s.Hostname, s.Command)
		}
		if !slices.Contains(s.Volumes, "./nodes/"+n.ID+"/tls:/etc/synod/tls:ro") || !slices.Contains(s.Volumes, "./nodes/"+n.ID+"/data:"+image.DataDir) {
			t.Errorf("service %s: volumes %q: want its own tls (read-only) and data", n.ID, s.Volumes)
		}
		if !s.ReadOnly || !slices.Equal(s.CapDrop, []string{"ALL"}) || strings.HasPrefix(s.User, "0") {
			t.Errorf("service %s: read_only %v cap_drop %v user %q", n.ID, s.ReadOnly, s.CapDrop, s.User)
		}
	}
	if out, err := exec.Command("sh", "-n", "compose/setup.sh").CombinedOutput(); err != nil {
		t.Errorf("setup.sh: %v: %s", err, out)
	}
}

// TestSystemdUnit: the unit runs the instance's node id from the cluster
// file, and systemd rates its exposure low (when systemd-analyze is here).
func TestSystemdUnit(t *testing.T) {
	unit := read(t, "systemd/synod@.service")
	for _, want := range []string{
		"ExecStart=" + image.BinaryPath + " node --config /etc/synod/cluster.yaml --id %i",
		"ExecReload=/bin/kill -HUP $MAINPID",
		"User=synod", "StateDirectory=synod", "ReadWritePaths=" + image.DataDir,
		"NoNewPrivileges=yes", "ProtectSystem=strict", "CapabilityBoundingSet=\n",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("synod@.service lacks %q", want)
		}
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("no systemd-analyze: exposure not rated")
	}
	p := t.TempDir() + "/synod@n1.service"
	if err := os.WriteFile(p, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "security", "--offline=true", "--threshold=20", p).CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for synod@n1.service: (\d+\.\d)`).FindSubmatch(out)
	if m == nil {
		t.Skipf("systemd-analyze security --offline unsupported here: %v: %s", err, out)
	}
	if string(m[1]) > "2.0" || len(m[1]) != 3 {
		t.Errorf("exposure %s, want at most 2.0 (systemd-analyze security --offline=true):\n%s", m[1], out)
	}
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
