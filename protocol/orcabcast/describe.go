package orcabcast

import (
	"fmt"
	"strings"
)

// DescribeMessage renders a peer message in one line (harness and model
// checker traces; the scripted prefix of SequencerCrashModel names
// messages this way): "ordered b=0 n=1 c=0 1:1@1 set x \"1\"".
func (b *Bcast) DescribeMessage(raw []byte) string {
	m, err := decodeMessage(raw)
	if err != nil {
		return fmt.Sprintf("undecodable (%v)", err)
	}
	var s strings.Builder
	fmt.Fprintf(&s, "%s b=%d n=%d c=%d", header.KindName(m.kind), m.bal, m.n, m.c)
	switch m.kind {
	case kSubmit, kData, kOrdered, kFifo, kAccept:
		s.WriteString(" " + describeEntry(m.x))
	case kPromise:
		for _, x := range m.xs {
			s.WriteString(" [" + describeEntry(x) + "]")
		}
		if m.hasSnap {
			fmt.Fprintf(&s, " snap@%d", m.snap.seq)
		}
	case kSnap:
		fmt.Fprintf(&s, " snap@%d", m.snap.seq)
	}
	return s.String()
}

func describeEntry(x entry) string {
	return fmt.Sprintf("%d:%d@%d %s", x.req.ID.Client, x.req.ID.Seq, x.seq, x.req.Op)
}
