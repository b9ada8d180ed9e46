package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synod-dev/synod/certs"
)

func TestCertsCommand(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	rootCmd.SetOut(&out)
	rootCmd.SetArgs([]string{"certs", "--cluster", "demo", "--nodes", "n1,n2", "--client", "app", "--out", dir})
	if err := rootCmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{certs.CAFile, certs.CAKeyFile, "node-n1.crt", "node-n2.key", "client-app.crt", certs.SecretFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	rootCmd.SetIn(strings.NewReader("s3cret\n"))
	out.Reset()
	rootCmd.SetArgs([]string{"certs", "hash-password"})
	if err := rootCmd.Execute(); err != nil {
		t.Fatal(err)
	}
	h, err := certs.ParsePasswordHash(strings.TrimSpace(out.String()))
	if err != nil || !h.Verify("s3cret") {
		t.Fatalf("hash-password printed %q (%v)", out.String(), err)
	}
}
