package main

import (
	"os/exec"
	"strings"
	"testing"
)

// forbiddenInServer are the import-path prefixes the server binary must not
// link: plotting, the peer systems' clients, and the workbench's packages
// (simulator, model checker and explorer, analytical models, experiments,
// comparison, chaos, Orca programs, the image builder, the lab's commands).
var forbiddenInServer = []string{
	"gonum.org/",
	"go.etcd.io/",
	"github.com/go-zookeeper/",
	"github.com/synod-dev/synod/bench/peers",
	"github.com/synod-dev/synod/compare",
	"github.com/synod-dev/synod/deploy/image",
	"github.com/synod-dev/synod/experiment",
	"github.com/synod-dev/synod/explore",
	"github.com/synod-dev/synod/internal/lab",
	"github.com/synod-dev/synod/mc",
	"github.com/synod-dev/synod/model",
	"github.com/synod-dev/synod/nemesis",
	"github.com/synod-dev/synod/orca/programs",
	"github.com/synod-dev/synod/sim",
}

// forbidden returns the packages of deps that forbiddenInServer names (a
// prefix matches the package itself and the packages under it).
func forbidden(deps []string) []string {
	var out []string
	for _, d := range deps {
		for _, f := range forbiddenInServer {
			if d == f || strings.HasPrefix(d, strings.TrimSuffix(f, "/")+"/") {
				out = append(out, d)
				break
			}
		}
	}
	return out
}

func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// TestLeanDeps: the server binary depends on no plotting, no etcd or
// ZooKeeper client and no workbench package; the workbench binary, which
// links all of them, is caught by the same check.
func TestLeanDeps(t *testing.T) {
	server := deps(t, "github.com/synod-dev/synod/cmd/synod")
	if bad := forbidden(server); len(bad) > 0 {
		t.Errorf("cmd/synod links %d workbench packages (move the code that imports them to internal/lab):\n%s", len(bad), strings.Join(bad, "\n"))
	}
	t.Logf("cmd/synod: %d packages", len(server))
	lab := forbidden(deps(t, "github.com/synod-dev/synod/cmd/synod-lab"))
	for _, want := range []string{"gonum.org/v1/plot", "go.etcd.io/etcd/client/v3", "github.com/go-zookeeper/zk", "github.com/synod-dev/synod/experiment", "github.com/synod-dev/synod/sim", "github.com/synod-dev/synod/mc"} {
		if !strings.Contains("\n"+strings.Join(lab, "\n")+"\n", "\n"+want+"\n") {
			t.Errorf("the check misses %s in cmd/synod-lab", want)
		}
	}
}
