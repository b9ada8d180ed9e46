package harness

import (
	"fmt"

	"github.com/synod-dev/synod/automaton"
)

// The trace is kept as records and rendered when read (Trace, the
// datadriven output, a failure's last lines): decoding every message of a
// long random run for lines nobody reads would cost more than the run.

type lineKind uint8

const (
	lineText   lineKind = iota // text as it is
	lineInput                  // "<id> <input>" (pre: " is down: ", lost)
	lineOutput                 // "  <output>"
	lineMsg                    // "<from> -> <to> <pre>: <message>"
)

type traceLine struct {
	text string // the rendered line (set at once for lineText)
	kind lineKind
	pre  string
	// d decodes the line's message: the automaton that would have described
	// it when the line was recorded (MessageDescriber is stateless).
	d   automaton.Automaton
	id  automaton.NodeID
	in  automaton.Input
	out automaton.Output
	m   Message
}

func (c *Cluster) note(s string) { c.trace = append(c.trace, traceLine{text: s}) }

func (c *Cluster) noteInput(id automaton.NodeID, in automaton.Input, down bool) {
	l := traceLine{kind: lineInput, id: id, in: in}
	if pm, ok := in.(automaton.PeerMessage); ok {
		l.d = c.describer(pm.From)
	}
	if down {
		l.pre = "down"
	}
	c.trace = append(c.trace, l)
}

func (c *Cluster) noteOutput(id automaton.NodeID, a automaton.Automaton, o automaton.Output) {
	c.trace = append(c.trace, traceLine{kind: lineOutput, id: id, d: a, out: o})
}

func (c *Cluster) noteMsg(m Message, what string) {
	c.trace = append(c.trace, traceLine{kind: lineMsg, pre: what, d: c.describer(m.From), m: m})
}

func (l *traceLine) render() string {
	if l.text != "" || l.kind == lineText {
		return l.text
	}
	switch l.kind {
	case lineInput:
		if l.pre == "down" {
			l.text = fmt.Sprintf("%s is down: %s lost", l.id, describeInput(l.d, l.in))
		} else {
			l.text = fmt.Sprintf("%s %s", l.id, describeInput(l.d, l.in))
		}
	case lineOutput:
		l.text = "  " + describeOutput(l.d, l.out)
	case lineMsg:
		l.text = fmt.Sprintf("%s -> %s %s: %s", l.m.From, l.m.To, l.pre, describeWith(l.d, l.m.Msg))
	}
	return l.text
}

// lines renders the trace from line from on.
func (c *Cluster) lines(from int) []string {
	out := make([]string, 0, len(c.trace)-from)
	for i := from; i < len(c.trace); i++ {
		out = append(out, c.trace[i].render())
	}
	return out
}
