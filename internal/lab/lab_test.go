package lab

import (
	"bytes"
	"testing"

	"github.com/synod-dev/synod/internal/cli"
)

// The workbench replaces every stub of the server's command line with its
// command, and gives bench its etcd and ZooKeeper targets.
func TestLabCommands(t *testing.T) {
	for _, name := range cli.LabCommands {
		var found int
		for _, c := range cli.Root().Commands() {
			if c.Name() == name {
				found++
				if c.Hidden || c.RunE == nil && !c.HasSubCommands() {
					t.Errorf("%s is still the server binary's stub", name)
				}
			}
		}
		if found != 1 {
			t.Errorf("%d commands named %s", found, name)
		}
		var out bytes.Buffer
		cli.Root().SetArgs([]string{name, "--help"})
		cli.Root().SetOut(&out)
		if err := cli.Root().Execute(); err != nil || out.Len() == 0 {
			t.Errorf("%s --help: %v", name, err)
		}
		clearHelp(name)
	}
	for _, name := range []string{"etcd", "zookeeper"} {
		if cli.BenchTargets[name] == nil {
			t.Errorf("bench --target %s is not registered", name)
		}
	}
}

// clearHelp unsets the --help flag a run of `name --help` left set: cobra
// keeps flag values between runs of one command tree, and a later run of
// the command (another test, or this one again under -count) would print
// its help and succeed whatever its other flags say.
func clearHelp(name string) {
	for _, c := range cli.Root().Commands() {
		if f := c.Flags().Lookup("help"); c.Name() == name && f != nil {
			_ = f.Value.Set("false")
			f.Changed = false
		}
	}
}
