package cli

import (
	"bytes"
	"strings"
	"testing"
)

// The server binary answers every workbench command with an error naming
// synod-lab, and lists none of them in its help.
func TestLabStubs(t *testing.T) {
	for _, name := range LabCommands {
		rootCmd.SetArgs([]string{name, "--protocol", "paxos"})
		rootCmd.SetOut(new(bytes.Buffer))
		if err := rootCmd.Execute(); err == nil || !strings.Contains(err.Error(), "synod-lab "+name) {
			t.Errorf("synod %s: %v, want an error naming synod-lab", name, err)
		}
	}
	var help bytes.Buffer
	rootCmd.SetArgs([]string{"--help"})
	rootCmd.SetOut(&help)
	if err := rootCmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, name := range LabCommands {
		if strings.Contains(help.String(), "\n  "+name+" ") {
			t.Errorf("help lists %s:\n%s", name, help.String())
		}
	}
	for _, name := range []string{"node", "cluster", "kv", "certs", "check", "bench"} {
		if !strings.Contains(help.String(), "\n  "+name+" ") {
			t.Errorf("help does not list %s:\n%s", name, help.String())
		}
	}
}
