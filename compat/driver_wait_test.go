package compat

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPyRedisSilentDriverFails: a redis-py driver that never answers makes
// Do fail after the wait, naming the command, instead of blocking forever
// (a whole compat run once hung on such a read).
func TestPyRedisSilentDriverFails(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	script := filepath.Join(t.TempDir(), "silent.py")
	if err := os.WriteFile(script, []byte("import sys, time\nsys.stdin.readline()\ntime.sleep(600)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := StartPyRedis(python, script)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.outf == nil {
		t.Fatal("the driver's stdout is not a pipe file: no read deadline possible")
	}
	p.wait = 300 * time.Millisecond
	start := time.Now()
	_, err = p.Do(Target{Addr: "127.0.0.1:1", NS: "py-pb"}, []string{"GET", "k"})
	if err == nil || !strings.Contains(err.Error(), "gave no answer") || !strings.Contains(err.Error(), "GET") {
		t.Fatalf("Do of a silent driver: %v", err)
	}
	if el := time.Since(start); el > 30*time.Second {
		t.Fatalf("Do returned after %v", el)
	}
}
