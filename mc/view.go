package mc

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/check"
)

// View is one state of a trace in readable form, for the explorer: what
// each node holds, what is in flight, what clients saw and the verdict,
// and the events enabled next.
type View struct {
	Protocol string     `json:"protocol"`
	Config   string     `json:"config"`
	Pos      int        `json:"pos"`  // events applied
	Len      int        `json:"len"`  // events in the trace
	Path     []Event    `json:"path"` // the trace's events, described
	Nodes    []NodeView `json:"nodes"`
	Flight   []string   `json:"flight"`
	History  []string   `json:"history"`
	Enabled  []Event    `json:"enabled"`
	Verdict  string     `json:"verdict"`
	Clients  []string   `json:"clients"`
	Checked  string     `json:"checked"` // the history checker's model
	Invs     []string   `json:"invariants"`
	hist     *world
}

// NodeView is one node's readable state.
type NodeView struct {
	ID      string   `json:"id"`
	Up      bool     `json:"up"`
	State   string   `json:"state"`
	Timers  []string `json:"timers"`
	Records []string `json:"records"`
}

// ViewAt replays the trace's first pos events from fresh automata and
// describes the state they lead to.
func (t *Trace) ViewAt(pos int) (*View, error) {
	pos = max(0, min(pos, len(t.Events)))
	w, err := newWorld(&t.cfg)
	if err != nil {
		return nil, err
	}
	var v verdicts
	verdict := w.violation
	for i := 0; i < pos; i++ {
		t.Events[i].Desc = w.describe(t.Events[i])
		if err := w.apply(t.Events[i]); err != nil {
			return nil, fmt.Errorf("event %d: %w", i+1, err)
		}
		if verdict == "" {
			verdict = w.violation
		}
		if verdict == "" && w.returned {
			verdict = v.historyVerdict(w)
		}
	}
	model, _ := automaton.ConsistencyOf(t.Protocol)
	_, invs := automaton.NewInvariantChecker(t.Protocol)
	out := &View{Protocol: t.Protocol, Config: t.cfg.Describe(), Pos: pos, Len: len(t.Events), Path: t.Events,
		Verdict: verdict, Checked: string(model), Invs: invs, hist: w}
	if out.Verdict == "" {
		out.Verdict = "ok"
	}
	if _, skip := checkOptions(&t.cfg, model); skip != "" {
		out.Checked += " (history not checked here: " + skip + ")"
	}
	for i, n := range w.nodes {
		nv := NodeView{ID: string(w.ids[i]), Up: n.a != nil}
		if d, ok := n.a.(dumper); ok {
			nv.State = d.Dump()
		} else if n.a != nil {
			nv.State = fmt.Sprintf("%T (no Dump method)", n.a)
		} else {
			nv.State = "down"
		}
		for _, tm := range n.timers {
			nv.Timers = append(nv.Timers, fmt.Sprintf("timer %d", tm))
		}
		for k, r := range n.disk {
			nv.Records = append(nv.Records, fmt.Sprintf("%s (%d bytes)", k, len(r)))
		}
		sort.Strings(nv.Records)
		out.Nodes = append(out.Nodes, nv)
	}
	for _, m := range w.flight {
		out.Flight = append(out.Flight, w.describeMsg(m))
	}
	for _, x := range w.hist {
		op := w.script(x.client)[x.op]
		if x.ret {
			out.History = append(out.History, fmt.Sprintf("client %d <- %s = %v", x.client+1, op, x.res))
		} else {
			out.History = append(out.History, fmt.Sprintf("client %d -> %s", x.client+1, op))
		}
	}
	for c, cl := range w.clients {
		s := fmt.Sprintf("client %d: %d/%d done", c+1, cl.next, len(w.script(c)))
		if cl.pending {
			s += ", waiting" + coordView(cl) // clientdriven.go
		}
		out.Clients = append(out.Clients, s)
	}
	for _, ev := range w.enabled() {
		ev.Desc = w.describe(ev)
		out.Enabled = append(out.Enabled, ev)
	}
	return out, nil
}

// Choose applies the view's k-th enabled event: the trace is cut at the
// view's position and the event appended (a hand-driven step).
func (t *Trace) Choose(v *View, k int) error {
	if k < 0 || k >= len(v.Enabled) {
		return fmt.Errorf("no enabled event %d (have %d)", k, len(v.Enabled))
	}
	t.Events = append(t.Events[:v.Pos:v.Pos], v.Enabled[k])
	return nil
}

// PorcupineHTML writes Porcupine's visualisation of the view's history
// into dir and returns the file's path ("" when the protocol's model is
// not judged by Porcupine).
func (v *View) PorcupineHTML(dir string) (string, error) {
	if v.hist == nil {
		return "", nil
	}
	model, _ := automaton.ConsistencyOf(v.Protocol)
	if model != automaton.Linearizable {
		return "", nil
	}
	h := v.hist.history()
	rep, err := check.Linearizable(h, check.Options{IgnoreDelCount: automaton.HasRegisterSemantics(v.Protocol)})
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "porcupine.html")
	if err := rep.WriteHTML(p); err != nil {
		return "", err
	}
	if _, err := os.Stat(p); err != nil {
		return "", err
	}
	return p, nil
}
