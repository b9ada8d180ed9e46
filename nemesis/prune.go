package nemesis

import "github.com/synod-dev/synod/history"

// unobserved returns h without the SETs of unknown outcome whose value no
// read returned, and how many it dropped.
//
// The load writes a value once (a client's id and sequence number) and
// reads with GET only, so such a write is invisible: placed after every
// other operation (an unknown operation returns at +infinity, package
// check), it changes no reply. A history with it is linearizable (or
// sequentially consistent) exactly when the history without it is. The
// checker's search grows with the operations that may still take effect,
// and a long run under kills and partitions makes hundreds of them (a
// 5-minute paxos run: 1,234, and an undecided check at 60 s); almost none
// is ever read.
func unobserved(h *history.History) (*history.History, int) {
	read := map[string]bool{} // key + NUL + value returned by a GET
	for _, op := range h.Ops {
		if op.Kind == "get" && op.Outcome == history.OK && op.Result.Type == "bytes" {
			read[op.Key+"\x00"+op.Result.Bytes] = true
		}
	}
	out := &history.History{Meta: h.Meta, Ops: make([]history.Op, 0, len(h.Ops))}
	for _, op := range h.Ops {
		if op.Kind == "set" && op.Outcome == history.Unknown && len(op.Args) == 1 && !read[op.Key+"\x00"+op.Args[0]] {
			continue
		}
		out.Ops = append(out.Ops, op)
	}
	return out, len(h.Ops) - len(out.Ops)
}
