package peerpb

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The pinned plugin versions, as in scripts/gen-proto.
const (
	protocGenGo     = "protoc-gen-go v1.36.12"
	protocGenGoGRPC = "protoc-gen-go-grpc 1.6.2"
)

var protocVersion = regexp.MustCompile(`(?m)^//\s+-?\s*protoc\s+v?[0-9.]+\s*$`)

// TestGeneratedCodeIsFresh regenerates the code from peer.proto (the
// go:generate line in gen.go) and compares it with the committed files. It
// skips without protoc or the pinned plugins (scripts/gen-proto installs them).
func TestGeneratedCodeIsFresh(t *testing.T) {
	if _, err := exec.LookPath("protoc"); err != nil {
		t.Skip("protoc not installed; not checking the generated code")
	}
	src, err := os.ReadFile("peer.proto") // so that go test's cache notices edits
	if err != nil {
		t.Fatal(err)
	}
	path := os.Getenv("PATH")
	if gp, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		path = filepath.Join(strings.TrimSpace(string(gp)), "bin") + string(os.PathListSeparator) + path
	}
	for plugin, want := range map[string]string{"protoc-gen-go": protocGenGo, "protoc-gen-go-grpc": protocGenGoGRPC} {
		cmd := exec.Command(plugin, "--version")
		cmd.Env = append(os.Environ(), "PATH="+path)
		out, err := cmd.Output()
		if err != nil || strings.TrimSpace(string(out)) != want {
			t.Skipf("%s not at %q (run scripts/gen-proto once to install it)", plugin, want)
		}
	}
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "peer.proto"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("protoc", "-I", ".", "--go_out=.", "--go_opt=paths=source_relative",
		"--go-grpc_out=.", "--go-grpc_opt=paths=source_relative", "peer.proto")
	cmd.Dir = out
	cmd.Env = append(os.Environ(), "PATH="+path)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, msg)
	}
	for _, f := range []string{"peer.pb.go", "peer_grpc.pb.go"} {
		want, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(protocVersion.ReplaceAll(got, nil), protocVersion.ReplaceAll(want, nil)) {
			t.Errorf("transport/grpcpeer/peerpb/%s is stale: run go generate in that directory and commit the result", f)
		}
	}
}
