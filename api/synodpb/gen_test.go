package synodpb

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// protocVersion is the header line naming the protoc that generated a file;
// it differs between machines without the code differing.
var protocVersion = regexp.MustCompile(`(?m)^//\s+protoc\s+v?[0-9.]+\s*$`)

// TestGeneratedCodeIsFresh regenerates the code from api/synod.proto and
// compares it with the committed files. It needs protoc and the pinned
// plugins (scripts/gen-proto installs them); it skips when they are missing.
func TestGeneratedCodeIsFresh(t *testing.T) {
	if _, err := exec.LookPath("protoc"); err != nil {
		t.Skip("protoc not installed (apt-get install protobuf-compiler); not checking the generated code")
	}
	// Read the source here so that go test's cache notices when it changes
	// (protoc reads it in a subprocess, which the cache does not see).
	if _, err := os.ReadFile("../synod.proto"); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command("../../scripts/gen-proto", out)
	cmd.Env = append(os.Environ(), "SYNOD_GEN_PROTO_NO_INSTALL=1")
	msg, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 3 {
		t.Skipf("protoc plugins not at the pinned versions (run scripts/gen-proto once): %s", msg)
	}
	if err != nil {
		t.Fatalf("scripts/gen-proto: %v\n%s", err, msg)
	}
	for _, f := range []string{"synod.pb.go", "synod_grpc.pb.go"} {
		want, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want = protocVersion.ReplaceAll(want, nil)
		got = protocVersion.ReplaceAll(got, nil)
		if !bytes.Equal(got, want) {
			t.Errorf("api/synodpb/%s is stale: run scripts/gen-proto and commit the result", f)
		}
	}
}
