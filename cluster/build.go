package cluster

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildSynod builds the synod command of the module containing the current
// directory (found with `go env GOMOD`) into outDir/synod and returns its path.
// Tests that run real clusters call it once from TestMain.
func BuildSynod(outDir string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("cluster: go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == "/dev/null" {
		return "", fmt.Errorf("cluster: not inside a Go module (go env GOMOD = %q)", gomod)
	}
	bin := filepath.Join(outDir, "synod")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/synod")
	cmd.Dir = filepath.Dir(gomod)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("cluster: go build ./cmd/synod: %w\n%s", err, stderr.String())
	}
	return bin, nil
}
