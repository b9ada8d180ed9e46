package service

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Busy scripts and SCRIPT KILL / FUNCTION KILL on a replicated log (issue
// 34). In Redis a script that runs past busy-reply-threshold (lua-time-limit)
// makes the server answer BUSY to other clients, and SCRIPT KILL (FUNCTION
// KILL for a function) stops it unless it already wrote. In Synod every
// replica runs the script inside Apply, each at its own pace, and a kill
// reaches each at a different instruction: killing a script at one replica
// while another lets it write would make their states differ.
//
// Decision: the point from which a script may be killed is counted in
// instructions, the same at every replica. The gateway turns its node's
// busy-reply-threshold into a number of instructions (BusyMark) and puts it
// into the eval operation's mode ("eval|<n>", "fcall:<name>|<n>"), as PFADD
// carries hll-sparse-max-bytes. A run that reaches its mark without having
// written is busy: from then on a write it attempts is refused, at every
// replica alike (ErrBusyWrite), so it can only end the way it would end
// killed, with nothing written. A kill therefore changes no replica's state
// whichever instruction it lands on, and a node kills only its own
// replica's run: the others end at their budget (or their own kill) with the
// same state. A run that wrote before its mark is unkillable (UNKILLABLE),
// as in Redis. With the default threshold (5 s) the mark lies past
// ScriptBudget, so a script is never busy and runs as before; an operation
// without a mark (logged before this) neither.
//
// What differs from Redis: a script that computes past its mark before its
// first write gets an error on that write (Redis would let it write and
// become unkillable). The reply of a killed run ("Script killed by user")
// is that node's; a replica that was not killed records its budget error in
// its deduplication table, which only a retried request could observe.
//
// A run is named by its operation's Env (RunningScript.ID: the time and
// seed the leader logged with it, the same at every replica and different
// for every request). Replicas run an operation one after the other (a
// paxos follower learns it once the leader has applied it; a pbpaxos
// leader applies a replayed entry twice), so a kill at one replica must
// reach runs that have not started yet: a run killed here, or one that
// ended at its KillableBudget without having written, is recorded by ID
// (EndRun, and the gateway hands the ID to the other nodes), and a run of a
// recorded ID that reaches its mark without having written ends there, as
// if killed. Its state is the one the killed run left (neither wrote past
// the mark), and the command line alone would not do: the next request
// may run the same script and must not be killed.
//
// The registry of runs (RunningScripts) is this process's, read by the
// gateway for BUSY, SCRIPT KILL, FUNCTION KILL and FUNCTION STATS. Its
// start time is for FUNCTION STATS only; nothing a run computes reads it.

// InstructionsPerMs converts a busy-reply-threshold in milliseconds to a
// script's busy mark: about what gopher-lua runs in a millisecond on a
// loaded 2-core machine (20M instructions in ~0.9 s, measured).
const InstructionsPerMs = 20_000

// BusyMark is the mark of a threshold of ms milliseconds; 0 means none (the
// mark would lie past ScriptBudget).
func BusyMark(ms int64) int64 {
	if ms <= 0 || ms >= ScriptBudget/InstructionsPerMs {
		return 0
	}
	return ms * InstructionsPerMs
}

// ErrBusyWrite is the error of a write attempted by a busy script.
const ErrBusyWrite = "ERR Write commands are not allowed from a script that ran past busy-reply-threshold without writing (Synod: it may be killed, at any replica, only while it cannot write)"

var errScriptKilled = errors.New("Script killed by user with SCRIPT KILL...")

// RunningScript is a script run in progress at one of this process's
// replicas.
type RunningScript struct {
	// ID names the operation's run at every replica (runID); "" when the
	// operation has no Env.
	ID      string
	Name    string   // "user_script" or the function's name
	Eval    bool     // EVAL (SCRIPT KILL); else FCALL (FUNCTION KILL)
	Command []string // the command, as FUNCTION STATS shows it
	Start   time.Time
	// The function libraries and functions the state held when the run
	// started (a script cannot change them): FUNCTION STATS answers from
	// them while the run is busy, without waiting for the log.
	Libraries, Functions int
	busy                 atomic.Bool // past its mark
	wrote                atomic.Bool // wrote before its mark (then it may go on writing)
	killed               atomic.Bool
}

// Busy says whether the run is past its mark (BUSY is answered while one
// is).
func (r *RunningScript) Busy() bool { return r.busy.Load() && !r.killed.Load() }

// Kill outcomes.
const (
	KillNotBusy    = iota // not past its mark: nothing to kill yet
	KillUnkillable        // it wrote before its mark
	KillDone              // stopped at this replica, nothing written
)

// Kill stops a busy run that wrote nothing: past its mark it can no longer
// write, so stopping it anywhere leaves the state every replica reaches.
func (r *RunningScript) Kill() int {
	switch {
	case !r.busy.Load():
		return KillNotBusy
	case r.wrote.Load():
		return KillUnkillable
	}
	r.killed.Store(true)
	endRun(r)
	return KillDone
}

// runID names the run of the operation applied with env.
func runID(env Env) string {
	if env.Time == 0 && env.Seed == 0 {
		return ""
	}
	return strconv.FormatInt(env.Time, 36) + "." + strconv.FormatUint(env.Seed, 36)
}

// ended are the runs killed or out of budget without having written, by
// ID, with their command line and when they ended; kept for endedKeep.
var ended struct {
	mu   sync.Mutex
	runs map[string]endedRun
}

type endedRun struct {
	cmdline string
	at      time.Time
}

// endedKeep is how long an ended run's ID is kept: longer than any replica
// takes to reach the operation.
const endedKeep = 10 * time.Minute

// endRun records that r ended without writing (killed, or out of budget).
func endRun(r *RunningScript) { EndRun(r.ID, strings.Join(r.Command, "\x00")) }

// EndRun records that the run id of cmdline (its Command joined by NULs)
// ended without writing at some replica (another node's kill, handed over
// by the gateway): a run of id here stops at once if it is busy, else
// when it reaches its mark.
func EndRun(id, cmdline string) {
	if id == "" {
		return
	}
	now := time.Now()
	ended.mu.Lock()
	if ended.runs == nil {
		ended.runs = map[string]endedRun{}
	}
	for k, e := range ended.runs {
		if now.Sub(e.at) > endedKeep {
			delete(ended.runs, k)
		}
	}
	ended.runs[id] = endedRun{cmdline: cmdline, at: now}
	ended.mu.Unlock()
	for _, r := range RunningScripts() {
		if r.ID == id && r.busy.Load() && !r.wrote.Load() {
			r.killed.Store(true)
		}
	}
}

// answered are the runs whose request this process's node has answered
// (the reply came from another replica that ran it first), by ID, with
// when: a replica of this process that runs the operation afterwards (a
// paxos follower) runs it without being busy, since no request of this
// node waits behind it any more. Whether a run is busy changes what the
// node answers, never what the run does (its writes past the mark are
// refused by the instruction count alone).
var answered struct {
	mu   sync.Mutex
	runs map[string]time.Time
}

// RunAnswered records that this node answered the request of run id.
func RunAnswered(id string) {
	if id == "" {
		return
	}
	now := time.Now()
	answered.mu.Lock()
	if answered.runs == nil {
		answered.runs = map[string]time.Time{}
	}
	for k, at := range answered.runs {
		if now.Sub(at) > endedKeep {
			delete(answered.runs, k)
		}
	}
	answered.runs[id] = now
	answered.mu.Unlock()
	for _, r := range RunningScripts() {
		if r.ID == id && r.busy.CompareAndSwap(true, false) {
			busyRuns.Add(-1)
		}
	}
}

func runAnswered(id string) bool {
	if id == "" {
		return false
	}
	answered.mu.Lock()
	defer answered.mu.Unlock()
	_, ok := answered.runs[id]
	return ok
}

// runEnded says whether the run id ended at some replica.
func runEnded(id string) bool {
	if id == "" {
		return false
	}
	ended.mu.Lock()
	defer ended.mu.Unlock()
	_, ok := ended.runs[id]
	return ok
}

// EndedSince says whether a run of cmdline ended (was recorded) at or
// after t.
func EndedSince(cmdline string, t time.Time) bool {
	ended.mu.Lock()
	defer ended.mu.Unlock()
	for _, e := range ended.runs {
		if e.cmdline == cmdline && !e.at.Before(t) {
			return true
		}
	}
	return false
}

var running struct {
	mu   sync.Mutex
	runs map[*RunningScript]struct{}
}

// RunningScripts are the runs in progress at this process's replicas that
// have a busy mark.
func RunningScripts() []*RunningScript {
	running.mu.Lock()
	defer running.mu.Unlock()
	out := make([]*RunningScript, 0, len(running.runs))
	for r := range running.runs {
		out = append(out, r)
	}
	return out
}

// busyRuns counts the registered runs past their mark: the gateway's check
// before every command reads only it.
var busyRuns atomic.Int32

// markBusy records that r passed its mark.
func markBusy(r *RunningScript) {
	r.busy.Store(true)
	busyRuns.Add(1)
}

// BusyScript is a busy run of this process, or nil.
func BusyScript() *RunningScript {
	if busyRuns.Load() == 0 {
		return nil
	}
	for _, r := range RunningScripts() {
		if r.Busy() {
			return r
		}
	}
	return nil
}

func registerRun(r *RunningScript) {
	running.mu.Lock()
	defer running.mu.Unlock()
	if running.runs == nil {
		running.runs = map[*RunningScript]struct{}{}
	}
	running.runs[r] = struct{}{}
}

func unregisterRun(r *RunningScript) {
	running.mu.Lock()
	defer running.mu.Unlock()
	delete(running.runs, r)
	if r.busy.Swap(false) {
		busyRuns.Add(-1)
	}
}

// splitMark parses an eval mode's "|<mark>" suffix.
func splitMark(mode string) (string, int64, error) {
	m, n, ok := strings.Cut(mode, "|")
	if !ok {
		return mode, 0, nil
	}
	v, err := strconv.ParseInt(n, 10, 64)
	if err != nil || v <= 0 {
		return "", 0, fmt.Errorf("eval mode's busy mark must be a positive integer")
	}
	return m, v, nil
}

// RunCommand is the Command a run of the eval operation op registers
// (RunningScript.Command): a node that sent op names by it the run it asks
// another node's replica to kill.
func RunCommand(op Op) []string {
	if len(op.Args) < 2 {
		return nil
	}
	mode := string(op.Args[0])
	ro := strings.HasPrefix(mode, "ro:")
	mode, _ = SplitScriptReport(strings.TrimPrefix(mode, "ro:")) // as opEval
	mode, _ = SplitScriptOOM(mode)
	mode, _, _ = splitMark(mode)
	return scriptCommandLine(ro, mode, op.Args[1], op.Args[2:])
}

// scriptCommandLine is the command a run answers, for FUNCTION STATS:
// FCALL name numkeys keys args (EVAL shows its body as Redis does).
func scriptCommandLine(ro bool, mode string, body []byte, rest [][]byte) []string {
	var out []string
	if name, ok := strings.CutPrefix(mode, "fcall:"); ok {
		out = []string{"fcall", name}
		if ro {
			out[0] = "fcall_ro"
		}
	} else {
		out = []string{"eval", string(body)}
		if ro {
			out[0] = "eval_ro"
		}
	}
	for _, a := range rest {
		out = append(out, string(a))
	}
	return out
}
