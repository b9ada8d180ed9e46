package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// parentOfCluster is the child process of TestDieWithParent: it starts a
// cluster in dir, restarts n1 (Restart must keep the attribute), says so on
// standard output and waits to be killed.
func parentOfCluster(dir, bin string, die bool) int {
	if _, err := Up(UpOptions{Dir: dir, Nodes: 2, Protocol: "paxos", Durability: "memory", Binary: bin, DieWithParent: die}); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	if err := Kill(dir, "n1"); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	if err := Restart(dir, "n1"); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ready")
	time.Sleep(time.Minute) // killed by the test long before
	return 0
}

// dead reports whether pid has exited (reaped, or a zombie waiting for its
// new parent to reap it).
func dead(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command name in parentheses.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z'
	}
	return false
}

// TestDieWithParent kills -9 the process that started a cluster and checks
// that its nodes die with it when DieWithParent is set (also a node it
// restarted), and that they outlive it when it is not (what `synod cluster
// up` needs, and what shows the check can fail).
func TestDieWithParent(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux's")
	}
	for _, die := range []bool{true, false} {
		t.Run(fmt.Sprintf("die=%v", die), func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), "SYNOD_TEST_PARENT_DIR="+dir, "SYNOD_TEST_PARENT_BIN="+synodBin,
				fmt.Sprintf("SYNOD_TEST_PARENT_DIE=%d", map[bool]int{false: 0, true: 1}[die]))
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			r := bufio.NewReader(out)
			line, _ := r.ReadString('\n')
			if strings.TrimSpace(line) != "ready" {
				// The child's error spans lines (Up's error ends with the
				// node's log); it exits after printing it.
				rest, _ := io.ReadAll(r)
				t.Fatalf("child: %s%s", line, rest)
			}
			pids := []int{pidFromFile(t, dir, "n1"), pidFromFile(t, dir, "n2")}
			if !die {
				t.Cleanup(func() {
					if _, err := Down(dir, false); err != nil {
						t.Errorf("Down: %v", err)
					}
				})
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			wait := 5 * time.Second // for the kernel's signal
			if !die {
				wait = time.Second // for a mistaken one
			}
			deadline := time.Now().Add(wait)
			for _, pid := range pids {
				for !dead(pid) && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if die && !dead(pid) {
					t.Errorf("node pid %d still runs after its parent was killed", pid)
				}
			}
			if !die {
				for _, pid := range pids {
					if dead(pid) {
						t.Errorf("node pid %d died with its parent without DieWithParent", pid)
					}
				}
			}
		})
	}
}
