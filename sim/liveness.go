package sim

import (
	"fmt"
	"time"

	"github.com/synod-dev/synod/history"
)

// Liveness mode (Config.Liveness = T > 0), separate from the safety check.
//
// At virtual time T every fault heals for good (crashed nodes restart,
// paused ones resume, partitions heal, fault windows close; the base Loss,
// Dup and ReorderFrac of the Config stay) while the clients keep issuing
// operations. The run then fails unless progress resumes within the bound B
// (Config.LivenessBound, default DefaultLivenessBound):
//
//   - every operation invoked at or after T+B completes (no unknown outcome,
//     no client giving up), and within B of its invocation;
//   - at least one operation is invoked at or after T+B (otherwise the check
//     would be vacuous: raise Ops or lower T).
//
// A failure is reported in Result.Liveness, beside the linearizability
// verdict, and "synod-lab sim --liveness T" prints it with the seed and the
// replay command like a violation.

// DefaultLivenessBound is Config.LivenessBound's default.
const DefaultLivenessBound = 5 * time.Second

// evLivenessHeal is the event that heals every fault at Config.Liveness.
const evLivenessHeal evKind = 200

func (s *simulator) livenessBound() time.Duration {
	if s.cfg.LivenessBound > 0 {
		return s.cfg.LivenessBound
	}
	return DefaultLivenessBound
}

// scheduleLiveness queues the final heal at T (liveness mode only).
func (s *simulator) scheduleLiveness() {
	if s.cfg.Liveness < 0 || s.cfg.LivenessBound < 0 {
		s.fail("negative liveness time or bound")
		return
	}
	if s.cfg.Liveness > 0 {
		s.schedule(s.cfg.Liveness, &event{kind: evLivenessHeal})
	}
}

func (s *simulator) onLivenessHeal() {
	s.tracef("liveness: every fault heals now; operations from %v on must complete", s.now+s.livenessBound())
	s.healAll()
}

// checkLiveness returns "" when progress resumed within the bound, else a
// description of the first operations that show it did not.
func (s *simulator) checkLiveness(h *history.History) string {
	if s.cfg.Liveness <= 0 {
		return ""
	}
	b := s.livenessBound()
	from := int64(s.cfg.Liveness + b)
	checked, bad := 0, 0
	first := ""
	for _, op := range h.Ops {
		if op.Call < from {
			continue
		}
		checked++
		var why string
		switch {
		case op.Outcome != history.OK:
			why = fmt.Sprintf("never completed (outcome %s)", op.Outcome)
		case time.Duration(op.Return-op.Call) > b:
			why = fmt.Sprintf("took %v", time.Duration(op.Return-op.Call))
		default:
			continue
		}
		bad++
		if first == "" {
			first = fmt.Sprintf("client %d's %s %s invoked at %v %s", op.Process, op.Kind, op.Key, time.Duration(op.Call), why)
		}
	}
	switch {
	case checked == 0:
		return fmt.Sprintf("liveness: no operation was invoked after heal+bound = %v (the check is vacuous: raise --ops or lower --liveness)", time.Duration(from))
	case bad > 0:
		return fmt.Sprintf("liveness violation: faults healed at %v, but %d of %d operations invoked after %v did not complete within %v; first: %s",
			s.cfg.Liveness, bad, checked, time.Duration(from), b, first)
	}
	return ""
}
