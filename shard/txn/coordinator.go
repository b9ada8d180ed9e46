package txn

import (
	"fmt"

	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/shard"
)

// Coordinator is the two-phase commit of one attempt of a transaction, as
// a pure machine (no clock, no I/O): Next says what to run, and the
// driver (node/txn.go; the simulation in this package's tests) reports
// each answer. The driver may run a step's parts in parallel. A driver
// that dies simply stops: what it left prepared is resolved by the
// participants' leaders (package doc).
type Coordinator struct {
	ID    string
	Parts []Part
	// Broken selects a deliberately wrong variant, for the simulation to
	// show its checker catches it: "commit-without-prepares" commits when
	// a prepare's answer is missing; "no-decision" commits without
	// logging the decision first; "read-only-without-locks" (ReadOnly)
	// reads without taking the slots' locks, releasing each part at once
	// as R*'s read-only vote does; "answer-before-decision" (Computed)
	// answers the client before the decision is logged; "shared-writes"
	// takes shared locks for writing transactions too.
	Broken string
	// Computed marks a computed transaction (compute.go): each part's Ops
	// are its client guards then its ReadOps; after the votes the driver
	// computes (StCompute) and reports Computed.
	Computed bool
	// ReadOnly marks a transaction that only reads (MGET, EXISTS, a
	// MULTI of reads, across groups): each prepare locks the part's slots
	// and runs its reads at once, under the new locks (PrepareReads), so
	// the client's answer is ready after one round; the second round only
	// releases the locks (txabort) and nothing is logged in the
	// coordinator group (package doc, "Read-only transactions").
	ReadOnly bool
	// Known, when set, is the client's answer before anything is applied
	// (one result per request operation: a transaction of plain SETs, as
	// MSET across groups, answers OK for each): it is answered once the
	// commit decision is logged, as a computed transaction is.
	Known []service.Result
	// Eval, for a writing transaction without Known results (MULTI
	// INCRBY ... EXEC), asks each participant to evaluate its part at the
	// prepare (service.EvalPrepare: on a scratch copy of its keys, under
	// the new locks, at the time its commit applies it with): when every
	// part answered its results, the client is answered once the commit
	// decision is logged, as a computed transaction is. A part that could
	// not evaluate (a script, large collections) answers OK, and the
	// transaction answers after its commits as before.
	Eval bool

	phase     StepKind
	votes     []Vote
	voted     []bool
	decision  string
	decided   bool
	results   [][]service.Result
	committed []bool
	tries     []int
	aborting  []bool
	unsure    bool             // a commit's answer never came: the decision must stay
	final     []service.Result // Computed: the client's results
	writes    [][]service.Op   // Computed: each part's writes
	evalRes   []service.Result // Eval: the client's results, from the prepares
	mismatch  int              // Eval: commits whose results differ from evalRes
	out       Outcome
}

// StepKind is what the driver is to run.
type StepKind int

const (
	StPrepare StepKind = iota // Prepare in each of Parts
	StCompute                 // Computed: run the request on the reads, report Computed
	StDecide                  // txdecide commit in the coordinator group (Parts[0]'s), with Writes
	StCommit                  // txcommit in each of Parts
	StAbort                   // txabort in each of Parts
	StForget                  // txforget in the coordinator group
	StDone                    // answer Outcome
)

// Step is the next step: its kind and the parts (indexes into Parts) it
// runs in.
type Step struct {
	Kind  StepKind
	Parts []int
}

// OutcomeKind is how a transaction attempt ended.
type OutcomeKind int

const (
	OutDone    OutcomeKind = iota // committed: Results
	OutRetry                      // aborted, nothing applied: try again under a new id
	OutRefused                    // aborted by a slot guard (ASK, MOVED, TRYAGAIN): Res
	OutWatch                      // aborted by a client guard at request operation At: Res
	OutUnknown                    // the decision's answer was lost: Err (resolved by the participants)
	OutLost                       // committed, but some results were taken by a resolver: Err
)

// Outcome is the attempt's end.
type Outcome struct {
	Kind    OutcomeKind
	Results []service.Result // OutDone: one per request operation, in order
	At      int
	Res     service.Result
	Err     string
}

// maxCommitTries bounds the txcommit attempts in one participant whose
// answers are lost (then the participant's leader resolves it).
const maxCommitTries = 3

// NewCoordinator starts attempt id of a transaction of parts.
func NewCoordinator(id string, parts []Part) *Coordinator {
	n := len(parts)
	return &Coordinator{ID: id, Parts: parts, votes: make([]Vote, n), voted: make([]bool, n),
		results: make([][]service.Result, n), committed: make([]bool, n), tries: make([]int, n), aborting: make([]bool, n)}
}

func pending(done []bool, want func(int) bool) []int {
	var out []int
	for i, d := range done {
		if !d && want(i) {
			out = append(out, i)
		}
	}
	return out
}

func all(int) bool { return true }

// Next returns the step to run now: the parts of the current step still
// unanswered, or the next step once all answered.
func (c *Coordinator) Next() Step {
	for {
		switch c.phase {
		case StPrepare:
			if p := pending(c.voted, all); len(p) > 0 {
				return Step{StPrepare, p}
			}
			c.afterVotes()
		case StCompute:
			if c.writes == nil {
				return Step{Kind: StCompute}
			}
			c.phase = StDecide
		case StDecide:
			if !c.decided {
				return Step{StDecide, []int{0}}
			}
			switch c.decision {
			case Commit:
				c.phase = StCommit
			case Abort:
				c.startAbort(Outcome{Kind: OutRetry, Err: "aborted by a participant's resolver"})
			default:
				c.out, c.phase = Outcome{Kind: OutUnknown, Err: c.out.Err}, StDone
			}
		case StCommit:
			if p := pending(c.committed, all); len(p) > 0 {
				return Step{StCommit, p}
			}
			c.phase = StForget
			if c.unsure {
				// A participant may still be prepared: its resolver
				// needs the decision, so it is not forgotten.
				c.phase = StDone
			}
			if c.out.Kind != OutLost {
				c.out = Outcome{Kind: OutDone, Results: c.merge()}
			}
		case StAbort:
			if p := pending(c.voted, func(i int) bool { return c.aborting[i] }); len(p) > 0 {
				return Step{StAbort, p}
			}
			c.phase = StDone
		case StForget:
			return Step{StForget, []int{0}}
		default:
			return Step{Kind: StDone}
		}
	}
}

// afterVotes decides once every prepare answered.
func (c *Coordinator) afterVotes() {
	yes := true
	for _, v := range c.votes {
		ok := v.Kind == Yes || (c.Broken == "commit-without-prepares" && v.Kind == Unknown && !c.ReadOnly && !c.Computed)
		yes = yes && ok
	}
	if yes && c.Eval && !c.ReadOnly && !c.Computed {
		c.evalRes = c.mergeEval()
	}
	if yes && c.ReadOnly {
		// The reads were answered under the locks: the client's answer
		// is ready; the locks are released (an abort: nothing to apply).
		c.startAbort(Outcome{Kind: OutDone, Results: c.mergeReads()})
		return
	}
	if yes {
		c.phase = StDecide
		if c.Computed {
			c.phase = StCompute
			return
		}
		if c.Broken == "no-decision" {
			c.decision, c.decided, c.phase = Commit, true, StCommit
		}
		return
	}
	// Presumed abort: nothing is logged; every part that may have
	// prepared is aborted. The client's answer is the most telling vote.
	out := Outcome{Kind: OutRetry}
	rank := func(k VoteKind) int {
		switch k {
		case Watch:
			return 3
		case Refused:
			return 2
		}
		return 0
	}
	best := -1
	for i, v := range c.votes {
		if r := rank(v.Kind); r > 0 && r > best {
			best = r
			switch v.Kind {
			case Watch:
				out = Outcome{Kind: OutWatch, At: v.At, Res: v.Res}
			case Refused:
				out = Outcome{Kind: OutRefused, At: i, Res: v.Res}
			}
		}
		if v.Kind == Conflict || v.Kind == Unknown {
			out.Err = v.Err
		}
	}
	c.startAbort(out)
}

func (c *Coordinator) startAbort(out Outcome) {
	c.out, c.phase = out, StAbort
	for i, v := range c.votes {
		c.aborting[i] = v.Kind == Yes || v.Kind == Unknown
		c.voted[i] = !c.aborting[i] // reused: "answered" for the abort step
	}
}

// Prepared reports part i's vote.
func (c *Coordinator) Prepared(i int, v Vote) {
	if c.phase == StPrepare {
		if c.ReadOnly && v.Kind == Yes && len(v.Reads) != len(c.Parts[i].Ops)-c.Parts[i].Guards() {
			v = Vote{Kind: Unknown, Err: fmt.Sprintf("%d reads answered for %d", len(v.Reads), len(c.Parts[i].Ops)-c.Parts[i].Guards())}
		}
		c.votes[i], c.voted[i] = v, true
	}
}

// Decided reports txdecide's answer (the recorded decision), or err.
func (c *Coordinator) Decided(decision string, err error) {
	if c.phase != StDecide {
		return
	}
	c.decided = true
	if err != nil {
		c.decision, c.out.Err = "", err.Error()
		return
	}
	c.decision = decision
}

// Committed reports part i's txcommit answer: the array of its operations'
// results, Nil when the transaction was no longer prepared there (a
// resolver committed it), or err (tried again up to maxCommitTries).
func (c *Coordinator) Committed(i int, r service.Result, err error) {
	if c.phase != StCommit || c.committed[i] {
		return
	}
	if err != nil {
		c.tries[i]++
		if c.tries[i] >= maxCommitTries {
			c.committed[i], c.unsure = true, true
			if !c.Computed && c.Known == nil && c.evalRes == nil {
				c.out = Outcome{Kind: OutLost, Err: "committed; a participant's answer was lost: " + err.Error()}
			}
		}
		return
	}
	c.committed[i] = true
	if c.evalRes != nil {
		// Answered from the prepares' evaluation: the commit applies
		// the same (or a resolver's did: Nil).
		if r.Type == service.ResultArray && !sameResults(r.Elems, c.votes[i].Eval) {
			c.mismatch++
		}
		return
	}
	if c.Computed || c.Known != nil {
		// The client's answer is the computation's: the decision holds
		// the writes, applied by this commit or by a resolver's.
		return
	}
	want := len(c.Parts[i].Ops)
	if r.Type != service.ResultArray || len(r.Elems) != want {
		c.out = Outcome{Kind: OutLost, Err: "committed; a participant's results were taken by its resolver"}
		return
	}
	c.results[i] = r.Elems
}

// Reads is part i's answers to its reads (Computed, at StCompute).
func (c *Coordinator) Reads(i int) []service.Result { return c.votes[i].Reads }

// ComputedResults reports the computation: the client's results (one per
// request operation, in order) and each part's writes.
func (c *Coordinator) ComputedResults(results []service.Result, writes [][]service.Op) {
	if c.phase == StCompute {
		c.final = results
		c.writes = make([][]service.Op, len(c.Parts))
		copy(c.writes, writes)
	}
}

// Writes is part i's writes (Computed; nil otherwise).
func (c *Coordinator) Writes(i int) []service.Op {
	if c.writes == nil {
		return nil
	}
	return c.writes[i]
}

// Aborted reports part i's txabort answer (its error is ignored: the
// participant's leader resolves what stays prepared).
func (c *Coordinator) Aborted(i int) {
	if c.phase == StAbort {
		c.voted[i] = true
	}
}

// Forgot reports txforget's end (answered or not: a decision left behind
// costs a key, never a wrong answer).
func (c *Coordinator) Forgot() {
	if c.phase == StForget {
		c.phase = StDone
	}
}

// Outcome is the attempt's end, once Next returns StDone.
func (c *Coordinator) Outcome() Outcome { return c.out }

// Answer is the client's answer as soon as it is final, ok false before:
// at StDone, the outcome; earlier, a read-only transaction's results once
// every part answered its reads under its locks (the release that
// follows changes nothing), and a computed transaction's (or one with
// Known results) once its commit
// decision is in the coordinator group's log (the commit point: every
// participant applies exactly the writes the decision holds, by the
// coordinator's txcommit or by its own resolver's, and until then its
// prepared locks refuse every request that names the slots, so no later
// read misses the writes). The driver may answer then and run the
// remaining steps after.
func (c *Coordinator) Answer() (Outcome, bool) {
	switch {
	case c.phase == StDone:
		return c.out, true
	case c.ReadOnly && c.phase == StAbort && c.out.Kind == OutDone:
		return c.out, true
	case c.Computed && c.Broken == "answer-before-decision" && c.writes != nil:
		return Outcome{Kind: OutDone, Results: c.final}, true
	case c.evalRes != nil && c.Broken == "answer-before-decision" && c.phase == StDecide:
		return Outcome{Kind: OutDone, Results: c.evalRes}, true
	case (c.Computed || c.Known != nil || c.evalRes != nil) && c.decided && c.decision == Commit && (c.phase == StCommit || c.phase == StForget):
		return Outcome{Kind: OutDone, Results: c.merge()}, true
	}
	return Outcome{}, false
}

// PrepareOps is the atomic group part i's prepare runs, coord naming the
// coordinator group: Prepare, or PrepareReads for a computed or read-only
// transaction.
func (c *Coordinator) PrepareOps(i int, coord string, slotGuards []service.Op) []service.Op {
	p := c.Parts[i]
	switch {
	case c.ReadOnly && c.Broken == "read-only-without-locks":
		// A read of the transaction's record key in place of txprepare
		// (no lock, an answer that is not an error), then the reads.
		g := p.Guards()
		out := append(append([]service.Op(nil), slotGuards...), p.Ops[:g]...)
		out = append(out, service.Op{Kind: "exists", Key: shard.TxKey(c.ID)})
		return append(out, p.Ops[g:]...)
	case c.ReadOnly:
		// Shared locks: read-only transactions do not conflict.
		return PrepareReads(c.ID, coord+" "+service.SharedPrepare, slotGuards, p)
	case c.Broken == "shared-writes":
		coord += " " + service.SharedPrepare
	}
	if c.Computed {
		return PrepareReads(c.ID, coord, slotGuards, p)
	}
	if c.Eval {
		coord += " " + service.EvalPrepare
	}
	return Prepare(c.ID, coord, slotGuards, p)
}

// Evaluated reports whether every part answered its results at the
// prepare (Eval): the client's answer then comes at the decision.
func (c *Coordinator) Evaluated() bool { return c.evalRes != nil }

// Mismatched is the number of commits whose results differed from the
// prepares' evaluation the client was answered with (Eval; never more
// than 0 unless the evaluation is wrong).
func (c *Coordinator) Mismatched() int { return c.mismatch }

// mergeEval puts the parts' evaluated results in request order, nil when
// a part did not evaluate.
func (c *Coordinator) mergeEval() []service.Result {
	for i, p := range c.Parts {
		if len(c.votes[i].Eval) != len(p.Ops) {
			return nil
		}
	}
	return c.inOrder(func(i int) []service.Result { return c.votes[i].Eval })
}

// inOrder puts each part's results (of its operations, in order) back in
// request order.
func (c *Coordinator) inOrder(part func(i int) []service.Result) []service.Result {
	n := 0
	for _, p := range c.Parts {
		n += len(p.Index)
	}
	out := make([]service.Result, n)
	for i, p := range c.Parts {
		rs := part(i)
		for j, at := range p.Index {
			out[at] = rs[j]
		}
	}
	return out
}

func sameResults(a, b []service.Result) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}

// mergeReads puts a read-only transaction's reads back in request order
// (a client guard, passed at prepare, answers OK).
func (c *Coordinator) mergeReads() []service.Result {
	n := 0
	for _, p := range c.Parts {
		n += len(p.Index)
	}
	out := make([]service.Result, n)
	for i, p := range c.Parts {
		g := p.Guards()
		for j, at := range p.Index {
			if j < g {
				out[at] = service.OK()
			} else {
				out[at] = c.votes[i].Reads[j-g]
			}
		}
	}
	return out
}

// merge puts the parts' results back in request order (txcommit answers
// OK for a client guard, as an atomic group that passed it).
func (c *Coordinator) merge() []service.Result {
	if c.Computed {
		return c.final
	}
	if c.Known != nil {
		return c.Known
	}
	if c.evalRes != nil {
		return c.evalRes
	}
	return c.inOrder(func(i int) []service.Result { return c.results[i] })
}
