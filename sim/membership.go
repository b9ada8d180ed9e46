package sim

import (
	"fmt"
	"math/rand"
	"strings"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/synoderr"
)

// Membership changes during a run (Config.Membership), for protocols that
// change their membership through their log (paxos).
//
// The cluster starts with nodes n1..nN (the bootstrap configuration, passed
// to every automaton as the parameter "members"); every add in the schedule
// has a spare node nN+1, nN+2, ... that is created but stays out of the run
// until its change's time. At that time the spare starts with empty records
// (adds) and an administrator submits the change to a random live member,
// retrying with the same request id at other nodes until it is answered;
// the protocol's deduplication makes a retry take effect once. When a remove
// is answered, the removed node is stopped for good. Nodes out of the run
// (spares not yet added, removed nodes) are neither crashed nor restarted by
// the nemesis and do not count in its fault budget. Clients send to every
// running node, so they also meet nodes that refuse them (a joining node
// not yet in the configuration, a removed node before it is stopped) and
// retry elsewhere. Histories are checked across the changes as usual.
//
// A transfer (transfer:NODE@TIME) asks for a leadership transfer to NODE
// (automaton.LeaderTransfer), submitted like a change and retried the same
// way while the answer is TryAgain (no leader yet, NODE not caught up);
// nothing is stopped or started. Stats.Transfers counts the answered ones.

// MemberChange is one scheduled membership change.
type MemberChange struct {
	At  time.Duration
	Add bool
	// Transfer asks for a leadership transfer to Node.
	Transfer bool
	// Node is the node to remove, or the transfer's target; adds take the
	// next spare node.
	Node string
}

func (m MemberChange) String() string {
	if m.Add {
		return "add@" + m.At.String()
	}
	if m.Transfer {
		return "transfer:" + m.Node + "@" + m.At.String()
	}
	return "remove:" + m.Node + "@" + m.At.String()
}

// ParseMembership parses a schedule such as "add@2s,remove:n1@4s".
func ParseMembership(spec string) ([]MemberChange, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	var out []MemberChange
	for _, part := range strings.Split(spec, ",") {
		what, at, ok := strings.Cut(strings.TrimSpace(part), "@")
		d, err := time.ParseDuration(at)
		if !ok || err != nil || d < 0 {
			return nil, fmt.Errorf("membership %q: %q is not add@TIME, remove:NODE@TIME or transfer:NODE@TIME", spec, part)
		}
		switch {
		case what == "add":
			out = append(out, MemberChange{At: d, Add: true})
		case strings.HasPrefix(what, "remove:") && len(what) > len("remove:"):
			out = append(out, MemberChange{At: d, Node: what[len("remove:"):]})
		case strings.HasPrefix(what, "transfer:") && len(what) > len("transfer:"):
			out = append(out, MemberChange{At: d, Transfer: true, Node: what[len("transfer:"):]})
		default:
			return nil, fmt.Errorf("membership %q: %q is not add@TIME, remove:NODE@TIME or transfer:NODE@TIME", spec, part)
		}
	}
	return out, nil
}

// MembershipSpec renders a schedule for ParseMembership ("" when empty).
func MembershipSpec(ms []MemberChange) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.String()
	}
	return strings.Join(parts, ",")
}

// Event kinds of membership changes.
const (
	evMember      evKind = 210 // a scheduled change is due (node: its index in the schedule)
	evMemberRetry evKind = 211 // an attempt timed out (attempt: which one)
	evMemberStop  evKind = 212 // a removed node stops
)

// adminClient is the client id of the administrator's requests.
const adminClient = 1<<63 - 1

// memberState is the progress of one scheduled change.
type memberState struct {
	ch      MemberChange
	target  int // node added or removed
	req     automaton.Request
	started bool
	done    bool
	attempt int
	last    int // node of the latest attempt
}

type membership struct {
	changes []*memberState
	rng     *rand.Rand
}

// spareNodes is the number of nodes beyond cfg.Nodes the schedule adds.
func (cfg Config) spareNodes() int {
	k := 0
	for _, m := range cfg.Membership {
		if m.Add {
			k++
		}
	}
	return k
}

// initMembership validates the schedule, takes the spares out of the run and
// sets the bootstrap configuration parameter.
func (s *simulator) initMembership() error {
	if len(s.cfg.Membership) == 0 {
		return nil
	}
	s.mem = &membership{rng: rand.New(rand.NewSource(s.cfg.Seed ^ 0x6d656d62))}
	boot := make([]string, s.cfg.Nodes)
	for i := range boot {
		boot[i] = string(s.ids[i])
	}
	p := copyParams(s.cfg.Params)
	if p == nil {
		p = map[string]string{}
	}
	p["members"] = strings.Join(boot, ",")
	s.cfg.Params = p
	spare := s.cfg.Nodes
	for i, m := range s.cfg.Membership {
		st := &memberState{ch: m, last: -1}
		if m.Add {
			st.target = spare
			s.nodes[spare].out = true
			spare++
		} else if st.target = s.nodeIndex(automaton.NodeID(m.Node)); st.target < 0 {
			return fmt.Errorf("sim: membership: %v of unknown node %q (nodes n1..n%d)", m, m.Node, len(s.ids))
		}
		st.req = automaton.Request{ID: automaton.RequestID{Client: adminClient, Seq: uint64(i + 1)}}
		if m.Add {
			n := s.ids[st.target]
			st.req.Op = automaton.MemberAdd(n, "sim:"+string(n), "sim:"+string(n))
		} else if m.Transfer {
			st.req.Op = automaton.LeaderTransfer(s.ids[st.target])
		} else {
			st.req.Op = automaton.MemberRemove(s.ids[st.target])
		}
		s.mem.changes = append(s.mem.changes, st)
		s.schedule(m.At, &event{kind: evMember, node: i})
	}
	return nil
}

func (s *simulator) onMember(e *event) {
	st := s.mem.changes[e.node]
	if st.started {
		return
	}
	st.started = true
	if st.ch.Add {
		n := s.nodes[st.target]
		n.out = false
		s.tracef("membership: %s starts to join", n.id)
		s.boot(n)
	}
	s.memberAttempt(st)
}

// memberAttempt sends the change to a random running node in the run,
// preferring another node than the last attempt's.
func (s *simulator) memberAttempt(st *memberState) {
	var live []int
	for _, n := range s.nodes {
		if n.up && !n.out && n.idx != st.last && !(st.ch.Add && n.idx == st.target) {
			live = append(live, n.idx)
		}
	}
	st.attempt++
	idx := e2i(st)
	if len(live) == 0 {
		s.after(noNodeBackoff, &event{kind: evMemberRetry, node: idx, attempt: st.attempt})
		return
	}
	k := live[s.mem.rng.Intn(len(live))]
	st.last = k
	s.tracef("membership: %v submitted to %s (attempt %d)", st.req.Op, s.ids[k], st.attempt)
	s.after(s.clientLat.Sample(s.rngNet), &event{kind: evClientReq, node: k, inc: s.nodes[k].inc, client: -1, req: cloneRequest(st.req)})
	s.after(s.cfg.RequestTimeout, &event{kind: evMemberRetry, node: idx, attempt: st.attempt})
}

func e2i(st *memberState) int { return int(st.req.ID.Seq) - 1 }

func (s *simulator) onMemberRetry(e *event) {
	st := s.mem.changes[e.node]
	if st.done || st.attempt != e.attempt {
		return
	}
	s.memberAttempt(st)
}

// adminResponse handles a response to the administrator; false for others.
func (s *simulator) adminResponse(r automaton.Response) bool {
	if r.ID.Client != adminClient || s.mem == nil {
		return false
	}
	i := int(r.ID.Seq) - 1
	if i < 0 || i >= len(s.mem.changes) {
		s.fail("response to unknown membership request %v", r.ID)
		return true
	}
	st := s.mem.changes[i]
	if st.done {
		return true
	}
	if r.Result.IsErr() {
		if r.Result.AsError().Kind != synoderr.TryAgain {
			s.fail("membership change %v refused: %s", st.ch, r.Result.Err)
			return true
		}
		s.tracef("membership: %v: %s; retrying", st.ch, r.Result.Err)
		st.attempt++ // the pending timeout is stale now
		s.after(noNodeBackoff*5, &event{kind: evMemberRetry, node: i, attempt: st.attempt})
		return true
	}
	st.done = true
	if st.ch.Transfer {
		s.stats.Transfers++
		s.tracef("membership: %v done", st.ch)
		return true
	}
	s.stats.MemberChanges++
	s.tracef("membership: %v done", st.ch)
	if !st.ch.Add {
		// Stopped in an event of its own: this response may be released
		// from the removed node's own output queue.
		s.after(0, &event{kind: evMemberStop, node: st.target})
	}
	return true
}

func (s *simulator) onMemberStop(e *event) {
	n := s.nodes[e.node]
	s.tracef("membership: %s removed, stopped for good", n.id)
	if n.up {
		s.crash(n)
	}
	n.out = true
}
