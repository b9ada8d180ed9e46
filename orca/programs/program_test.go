package programs

import (
	"fmt"
	"strings"
	"testing"

	"github.com/synod-dev/synod/orca"
)

// counterProgram: every worker adds 1 to a shared int k times, then
// increments the done counter; Finish awaits all workers and checks the sum.
func counterProgram(k int) Program {
	return Program{Name: "testcount",
		Setup: func(p Process) error {
			p.Must(orca.New("int", "sum"))
			p.Must(orca.New("int", "done"))
			return nil
		},
		Worker: func(p Process, i, n int) error {
			for j := 0; j < k; j++ {
				p.Must(orca.Call("int", "sum", "inc", orca.Int(1)))
			}
			p.Must(orca.Call("int", "done", "inc", orca.Int(1)))
			return nil
		},
		Finish: func(p Process, n int) (string, error) {
			p.Must(orca.Call("int", "done", "await", orca.Int(int64(n))))
			got := p.Must(orca.Call("int", "sum", "value")).Int
			if got != int64(n*k) {
				return "", fmt.Errorf("sum %d, want %d", got, n*k)
			}
			return fmt.Sprintf("sum %d", got), nil
		},
	}
}

// A program runs under every runtime; a worker's error fails the run.
func TestRunProgram(t *testing.T) {
	for _, rt := range Runtimes {
		res, err := rt.RunProgram(counterProgram(5), 3, Ethernet10, 1)
		if err != nil || res.Output != "sum 15" || res.Elapsed <= 0 || res.Stats.Sends == 0 {
			t.Fatalf("%s: %+v %v", rt, res, err)
		}
	}
	bad := counterProgram(5)
	bad.Worker = func(p Process, i, n int) error {
		if i == 1 {
			return fmt.Errorf("worker %d gives up", i)
		}
		return nil
	}
	if _, err := Runtimes[0].RunProgram(bad, 3, Ethernet10, 1); err == nil || !strings.Contains(err.Error(), "gives up") {
		t.Fatalf("a failing worker: %v", err)
	}
	// A Finish that checks catches a lost update: workers that write
	// through a read-only declaration (CheckReads off) would be caught
	// the same way; here a worker skipping its increments.
	lossy := counterProgram(5)
	w := lossy.Worker
	lossy.Worker = func(p Process, i, n int) error {
		if i == 0 {
			p.Must(orca.Call("int", "done", "inc", orca.Int(1)))
			return nil
		}
		return w(p, i, n)
	}
	if _, err := Runtimes[0].RunProgram(lossy, 3, Ethernet10, 1); err == nil || !strings.Contains(err.Error(), "want 15") {
		t.Fatalf("a lost update: %v", err)
	}
	if err := RegisterProgram(Program{Name: "asp", Worker: bad.Worker}); err == nil {
		t.Fatal("RegisterProgram(asp) accepted")
	}
}
