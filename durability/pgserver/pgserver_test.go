package pgserver

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// StartIn puts the data directory inside the parent given; the server
// answers createdb on its port; Stop ends the process (by its PID) and
// removes the directory.
func TestStartInStop(t *testing.T) {
	parent := t.TempDir()
	s, err := StartIn(parent)
	if errors.Is(err, ErrNotInstalled) {
		t.Skipf("skipped: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(s.Dir) != parent {
		t.Errorf("data directory %s not in %s", s.Dir, parent)
	}
	dsn, err := s.CreateDB("extra")
	if err != nil || !strings.HasSuffix(strings.Split(dsn, "?")[0], "/extra") {
		t.Errorf("CreateDB: %q, %v", dsn, err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if s.cmd.ProcessState == nil {
		t.Errorf("postgres (pid %d) not reaped by Stop", s.cmd.Process.Pid)
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Errorf("data directory left after Stop: %v", err)
	}
}
