package harness

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// RunDataDriven runs every interaction script under dir (each file with a
// fresh environment). Regenerate the expected output with
// `go test -run <Test> ./<pkg> -rewrite`, and read the diff before keeping
// it.
//
// Commands (node ids are n1..nN; most print the trace lines they caused):
//
//	boot n=3 protocol=abd [service=kv] [seed=1] [params=(k=v, ...)] [down=(n3, ...)]
//	    create the cluster (one per script) and boot its nodes
//	request node=n1 op=set k v [read=regular] [opt=(name=v1|v2, ...)]
//	    submit an operation; the first word after op= is its kind, then its
//	    key (for services with keys) and arguments
//	request ... retry=3 ...
//	    resend request 1:3 (the same id: a client's retry) instead of a new one
//	request fanout op=set k v [...]
//	    submit one request (one id, Request.Fanout set) to every up node,
//	    in node order, as a fan-out client does (automaton.FanoutProtocol)
//	deliver [from=n1] [to=n2] [n=1] [quiet]
//	    deliver matching messages in FIFO order until none is in flight
//	drop [from=n1] [to=n2]        drop matching messages in flight
//	partition n3 [n4 ...]          lose every message to or from them, until heal
//	heal
//	fire-timers [node=n1] [quiet]  fire the timers set now (all up nodes by default)
//	fire node=n1 timer=3           fire one timer
//	settle [rounds=1]              rounds of fire-timers and deliver; prints
//	                               only responses and violations
//	crash n2 | restart n2 | boot-node n4 | add-node n4
//	state [node=n1]                the automata's Dump (or String)
//	queue | timers | disk node=n1 | invariants
//	responses                      responses collected since the last `responses`
//
// Effects (automaton.Effect outputs wait in the harness until completed):
//
//	effects [node=n1] [kind=K]      list the pending effects, oldest first; a
//	                               nested call (automaton.CallKind) with its
//	                               namespace, id and operation, byte for byte
//	complete-effect node=n1 id=3 [result=R]
//	    complete one pending effect: through its kind's executor, or, with
//	    result=, answer it with R without running anything
//	complete-effects [node=n1] [kind=eve.exec] [result=R]
//	    complete every matching pending effect, oldest first, and those the
//	    completions add, until none matches
//	complete-calls [node=n1] [result=R]
//	    complete-effects kind=synod.call: answer the pending nested calls
//	quiesce [hold=K] [quiet]        deliver every message and complete every
//	                               effect (but those of kind K, which stay
//	                               pending) until neither is left (no timers)
//
// R is a service result: OK, nil, int:5, bytes:v ("bytes:" empty), err:MSG
// (ERR MSG). A nested call's answer is the automaton.Response to its
// request id carrying R; any other effect's is R itself.
//
// An invariant violation does not fail the script: it is printed (once) in
// the output of the command that caused it, so that golden files can show a
// broken variant tripping an invariant.
func RunDataDriven(t *testing.T, dir string) {
	t.Helper()
	datadriven.Walk(t, dir, func(t *testing.T, path string) {
		if strings.Contains(filepath.ToSlash(path), "/fuzz/") {
			t.Skip("a fuzz corpus (testdata/fuzz), not an interaction script")
		}
		env := &Env{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return env.Handle(t, d)
		})
	})
}

// Env is the state of one interaction script.
type Env struct {
	C         *Cluster
	responses int // responses already printed
}

// Handle runs one directive and returns its output.
func (e *Env) Handle(t *testing.T, d *datadriven.TestData) string {
	if d.Cmd != "boot" && e.C == nil {
		d.Fatalf(t, "boot the cluster first")
	}
	if e.C != nil {
		e.C.setTB(t)
	}
	mark := 0
	if e.C != nil {
		mark = len(e.C.trace)
	}
	quiet := d.HasArg("quiet")
	var out []string
	switch d.Cmd {
	case "boot":
		e.boot(t, d)
		quiet = false
	case "request":
		e.request(t, d)
	case "deliver":
		n := e.C.Deliver(e.match(t, d), intArg(t, d, "n", 0))
		if n == 0 {
			out = append(out, "no messages")
		} else if quiet {
			out = append(out, fmt.Sprintf("%d messages", n))
		}
	case "drop":
		if n := e.C.Drop(e.match(t, d)); n == 0 {
			out = append(out, "no messages")
		}
	case "partition":
		e.C.Isolate(nodeArgs(d)...)
		out = append(out, "ok")
	case "heal":
		e.C.Heal()
		out = append(out, "ok")
	case "fire-timers":
		n := 0
		if d.HasArg("node") {
			n = e.C.FireAll(nodeArg(t, d, "node"))
		} else {
			n = e.C.FireAllNodes()
		}
		if n == 0 {
			out = append(out, "no timers")
		} else if quiet {
			out = append(out, fmt.Sprintf("%d timers", n))
		}
	case "fire":
		tid := intArg(t, d, "timer", -1)
		if !e.C.FireTimer(nodeArg(t, d, "node"), automaton.TimerID(tid)) {
			out = append(out, "timer not set")
		}
	case "settle":
		quiet = true
		rounds := intArg(t, d, "rounds", 1)
		steps := e.C.steps
		for i := 0; i < rounds; i++ {
			e.C.FireAllNodes()
			e.C.DeliverAll()
		}
		out = append(out, fmt.Sprintf("%d rounds, %d steps", rounds, e.C.steps-steps))
	case "crash":
		for _, id := range nodeArgs(d) {
			e.C.Crash(id)
		}
	case "restart", "boot-node":
		for _, id := range nodeArgs(d) {
			e.C.Restart(id)
		}
	case "add-node":
		for _, id := range nodeArgs(d) {
			e.C.AddNode(id)
		}
		out = append(out, "ok")
	case "state":
		quiet = true
		ids := e.C.ids
		if d.HasArg("node") {
			ids = []automaton.NodeID{nodeArg(t, d, "node")}
		}
		for _, id := range ids {
			out = append(out, e.state(id))
		}
	case "queue":
		quiet = true
		for _, m := range e.C.queue {
			out = append(out, fmt.Sprintf("%s -> %s %s", m.From, m.To, e.C.describeMsg(m.From, m.Msg)))
		}
		if len(out) == 0 {
			out = append(out, "no messages")
		}
	case "timers":
		quiet = true
		for _, id := range e.C.ids {
			if !e.C.Up(id) {
				continue
			}
			var ts []string
			for _, tid := range e.C.Timers(id) {
				ts = append(ts, fmt.Sprintf("%d:%v", tid, e.C.timers[id][tid]))
			}
			out = append(out, fmt.Sprintf("%s: %s", id, strings.Join(ts, " ")))
		}
	case "disk":
		quiet = true
		disk := e.C.Disk(nodeArg(t, d, "node"))
		keys := make([]string, 0, len(disk))
		for k := range disk {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, fmt.Sprintf("%s (%d bytes)", k, len(disk[k])))
		}
	case "effects":
		quiet = true
		for _, p := range e.C.effects {
			if e.effectMatches(t, d, p) {
				out = append(out, describeEffect(p))
			}
		}
		if len(out) == 0 {
			out = append(out, "no effects")
		}
	case "complete-effect":
		id := automaton.EffectID(intArg(t, d, "id", -1))
		node := nodeArg(t, d, "node")
		i := slices.IndexFunc(e.C.effects, func(p PendingEffect) bool { return p.Node == node && p.Effect.ID == id })
		if i < 0 {
			out = append(out, "no such effect")
			break
		}
		e.completeEffect(t, d, i)
	case "complete-effects", "complete-calls":
		n := 0
		for {
			i := slices.IndexFunc(e.C.effects, func(p PendingEffect) bool { return e.effectMatches(t, d, p) })
			if i < 0 {
				break
			}
			e.completeEffect(t, d, i)
			if n++; n > e.C.opts.MaxSteps {
				d.Fatalf(t, "effect storm: %d effects without quiet", n)
			}
		}
		if n == 0 {
			out = append(out, "no effects")
		}
	case "quiesce":
		steps := e.C.steps
		var hold string
		if d.HasArg("hold") {
			d.ScanArgs(t, "hold", &hold)
		}
		for n := 0; ; n++ {
			if n > e.C.opts.MaxSteps {
				d.Fatalf(t, "quiesce: %d steps without quiet", n)
			}
			if e.C.DeliverOne() {
				continue
			}
			i := slices.IndexFunc(e.C.effects, func(p PendingEffect) bool { return p.Effect.Kind != hold })
			if i < 0 {
				break
			}
			e.C.CompleteEffect(i)
		}
		if quiet {
			out = append(out, fmt.Sprintf("%d steps", e.C.steps-steps))
		}
	case "invariants":
		quiet = true
		out = append(out, e.C.Invariants()...)
	case "responses":
		quiet = true
		for _, r := range e.C.order[e.responses:] {
			if r.Resp.Silent {
				out = append(out, fmt.Sprintf("%s: %v silent", r.Node, r.Resp.ID))
				continue
			}
			out = append(out, fmt.Sprintf("%s: %v %v", r.Node, r.Resp.ID, r.Resp.Result))
		}
		e.responses = len(e.C.order)
		if len(out) == 0 {
			out = append(out, "no responses")
		}
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	lines := e.C.lines(mark)
	if quiet {
		var keep []string
		for _, l := range lines {
			if strings.HasPrefix(l, "  respond ") || strings.HasPrefix(l, "INVARIANT VIOLATED ") {
				keep = append(keep, strings.TrimSpace(l))
			}
		}
		lines = keep
	}
	out = append(lines, out...)
	if len(out) == 0 {
		return "ok\n"
	}
	return strings.Join(out, "\n") + "\n"
}

// effectMatches: node= and kind= of the directive (complete-calls: the
// nested calls).
func (e *Env) effectMatches(t *testing.T, d *datadriven.TestData, p PendingEffect) bool {
	if d.HasArg("node") && p.Node != nodeArg(t, d, "node") {
		return false
	}
	kind := ""
	if d.Cmd == "complete-calls" {
		kind = automaton.CallKind
	}
	if d.HasArg("kind") {
		d.ScanArgs(t, "kind", &kind)
	}
	return kind == "" || p.Effect.Kind == kind
}

// completeEffect completes pending effect i: with result=, the given
// answer; else through its executor.
func (e *Env) completeEffect(t *testing.T, d *datadriven.TestData, i int) {
	a, ok := d.Arg("result")
	if !ok {
		e.C.CompleteEffect(i)
		return
	}
	res, err := parseResult(strings.Join(a.Vals, ","))
	if err != nil {
		d.Fatalf(t, "result=: %v", err)
	}
	p := e.C.effects[i]
	e.C.effects = append(e.C.effects[:i:i], e.C.effects[i+1:]...)
	var v any = res
	if c, ok := p.Effect.Payload.(automaton.Call); ok {
		v = automaton.Response{ID: c.Req.ID, Result: res}
	}
	e.C.Step(p.Node, automaton.EffectDone{ID: p.Effect.ID, Result: v})
}

// parseResult reads OK, nil, int:N, bytes:V, err:MSG.
func parseResult(s string) (service.Result, error) {
	kind, v, _ := strings.Cut(s, ":")
	switch strings.ToLower(kind) {
	case "ok":
		return service.OK(), nil
	case "nil":
		return service.Nil(), nil
	case "int":
		n, err := strconv.ParseInt(v, 10, 64)
		return service.Int(n), err
	case "bytes":
		return service.Bytes([]byte(v)), nil
	case "err":
		return service.Errorf("ERR %s", v), nil
	}
	return service.Result{}, fmt.Errorf("%q: want OK, nil, int:N, bytes:V or err:MSG", s)
}

// describeEffect is a pending effect's line: a nested call with its
// namespace, request id and operation (its bytes, as the callee gets them).
func describeEffect(p PendingEffect) string {
	if c, ok := p.Effect.Payload.(automaton.Call); ok {
		return fmt.Sprintf("%s effect %d %s %s %v %v", p.Node, p.Effect.ID, p.Effect.Kind, c.Namespace, c.Req.ID, c.Req.Op)
	}
	return p.String()
}

func (e *Env) boot(t *testing.T, d *datadriven.TestData) {
	if e.C != nil {
		d.Fatalf(t, "one boot per script")
	}
	opts := Options{Nodes: intArg(t, d, "n", 3), OnViolation: func(int, automaton.NodeID, error) {}}
	d.ScanArgs(t, "protocol", &opts.Protocol)
	if d.HasArg("service") {
		var name string
		d.ScanArgs(t, "service", &name)
		svc, err := service.Lookup(name)
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		opts.Service = svc
	}
	opts.Seed = int64(intArg(t, d, "seed", 1))
	if a, ok := d.Arg("params"); ok {
		opts.Params = map[string]string{}
		for _, kv := range a.Vals {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				d.Fatalf(t, "params: %q is not k=v", kv)
			}
			opts.Params[k] = v
		}
	}
	if a, ok := d.Arg("down"); ok {
		for _, v := range a.Vals {
			opts.Down = append(opts.Down, automaton.NodeID(v))
		}
	}
	e.C = New(t, opts)
}

func (e *Env) request(t *testing.T, d *datadriven.TestData) {
	var words []string
	seen, fanout := false, false
	var retry uint64 // resend request 1:retry (same id) instead of a new one
	var opts automaton.Options
	for _, a := range d.CmdArgs {
		switch {
		case a.Key == "fanout" && !seen:
			fanout = true
		case a.Key == "retry" && !seen:
			n, err := strconv.ParseUint(a.SingleVal(t), 10, 64)
			if err != nil || n == 0 || n > e.C.seq {
				d.Fatalf(t, "retry=%s: not the sequence number of an earlier request", a.SingleVal(t))
			}
			retry = n
		case a.Key == "op":
			seen = true
			words = append(words, a.Vals...)
		case a.Key == "read":
			m, err := automaton.ParseReadMode(a.SingleVal(t))
			if err != nil {
				d.Fatalf(t, "%v", err)
			}
			opts.Read = m
		case a.Key == "opt":
			for _, kv := range a.Vals {
				name, vals, err := automaton.ParseOptionFlag(strings.ReplaceAll(kv, "|", ","))
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				opts.Set(name, vals)
			}
		case seen && len(a.Vals) == 0:
			words = append(words, a.Key)
		}
	}
	if len(words) == 0 {
		d.Fatalf(t, "request needs op=<kind> [key] [args]")
	}
	op := parseOp(e.C.opts.Service, words)
	if retry > 0 {
		req := automaton.Request{ID: automaton.RequestID{Client: 1, Seq: retry}, Op: op, Opts: opts, Fanout: fanout}
		if fanout {
			e.C.SubmitFanout(req)
		} else {
			e.C.Submit(nodeArg(t, d, "node"), req)
		}
		return
	}
	if fanout {
		e.C.RequestFanout(op, opts)
		return
	}
	e.C.Request(nodeArg(t, d, "node"), op, opts)
}

// parseOp reads "kind key args..." when the service accepts that, else
// "kind args..." (single-object services such as counter).
func parseOp(svc service.Service, w []string) service.Op {
	args := func(s []string) [][]byte {
		var out [][]byte
		for _, a := range s {
			out = append(out, []byte(a))
		}
		return out
	}
	if len(w) > 1 {
		op := service.Op{Kind: w[0], Key: w[1], Args: args(w[2:])}
		if svc.Validate(op) == nil {
			return op
		}
		if keyless := (service.Op{Kind: w[0], Args: args(w[1:])}); svc.Validate(keyless) == nil {
			return keyless
		}
		return op // let the protocol refuse it
	}
	return service.Op{Kind: w[0]}
}

func (e *Env) state(id automaton.NodeID) string {
	a := e.C.Node(id)
	if a == nil {
		return fmt.Sprintf("%s: down", id)
	}
	var s string
	switch a := a.(type) {
	case Dumper:
		s = a.Dump()
	case fmt.Stringer:
		s = a.String()
	default:
		s = fmt.Sprintf("(%T has no Dump)", a)
	}
	return fmt.Sprintf("%s: %s", id, strings.TrimRight(s, "\n"))
}

func (e *Env) match(t *testing.T, d *datadriven.TestData) func(Message) bool {
	var from, to automaton.NodeID
	if d.HasArg("from") {
		from = nodeArg(t, d, "from")
	}
	if d.HasArg("to") {
		to = nodeArg(t, d, "to")
	}
	if from == "" && to == "" {
		return nil
	}
	return Match(from, to)
}

func nodeArg(t *testing.T, d *datadriven.TestData, key string) automaton.NodeID {
	var s string
	d.ScanArgs(t, key, &s)
	return automaton.NodeID(s)
}

// nodeArgs returns the bare arguments (crash n1 n2).
func nodeArgs(d *datadriven.TestData) []automaton.NodeID {
	var out []automaton.NodeID
	for _, a := range d.CmdArgs {
		if len(a.Vals) == 0 && a.Key != "quiet" {
			out = append(out, automaton.NodeID(a.Key))
		}
	}
	return out
}

func intArg(t *testing.T, d *datadriven.TestData, key string, def int) int {
	a, ok := d.Arg(key)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(a.SingleVal(t))
	if err != nil {
		d.Fatalf(t, "%s: %v", key, err)
	}
	return n
}
