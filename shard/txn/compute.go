package txn

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// Computed transactions: one operation whose keys are in several groups
// (RENAME a b, SMOVE, SINTERSTORE, LMOVE, COPY, ... across groups), or an
// atomic group holding one. No group can run it, since it reads keys of
// one group to write keys of another. So the coordinator runs it itself,
// on a scratch copy of its keys taken under the transaction's locks:
//
//  1. Prepare, in every group holding one of its keys: the slot guards,
//     the part's client guards, txprepare of the reads (DUMP and PTTL of
//     each of the group's keys: the record locks their slots), then the
//     same reads, answered now. The locks keep what they read unchanged
//     until the decision.
//  2. Compute: the coordinator restores what it read into an empty KV
//     state, applies the request's operations there (ApplyGroup, so they
//     are atomic and in order), and takes the after-image of every key
//     they may write: RESTORE ... REPLACE, or DEL for a key they removed.
//  3. Decide: txdecide commit records those writes with the decision, so a
//     resolver that commits a participant for a dead coordinator applies
//     exactly what the coordinator would have.
//  4. Commit: txcommit with the group's writes.
//
// The client's answer is the scratch state's results. What is copied is
// the keys' whole values: a computed transaction is for the keys one
// command names, not for large collections. A TTL is carried as the time
// left when it was read.

// ReadOps are the reads of a computed transaction's part: DUMP and PTTL of
// each key, in order.
func ReadOps(keys []string) []service.Op {
	out := make([]service.Op, 0, 2*len(keys))
	for _, k := range keys {
		out = append(out, service.Op{Kind: "dump", Key: k}, service.Op{Kind: "pttl", Key: k})
	}
	return out
}

// PrepareReads is the atomic group a participant of a computed
// transaction runs: the slot guards, the part's client guards (leading
// p.Ops), txprepare of the reads, then the reads, answered at once.
func PrepareReads(id, coord string, slotGuards []service.Op, p Part) []service.Op {
	g := p.Guards()
	out := Prepare(id, coord, slotGuards, p)
	return append(out, p.Ops[g:]...)
}

// Compute runs ops on the keys read by the parts of a computed
// transaction (reads[i]: the answers to part i's reads, in ReadOps order
// of keys[i]), at time env. It returns each operation's result, in order
// (a client guard, checked at prepare, answers OK), and, per part, the
// writes that make the part's keys what ops left them.
func Compute(keys [][]string, reads [][]service.Result, ops []service.Op, env service.Env) ([]service.Result, [][]service.Op, error) {
	st := (service.KV{}).NewState()
	for i, ks := range keys {
		if len(reads[i]) != 2*len(ks) {
			return nil, nil, fmt.Errorf("%d reads for %d keys", len(reads[i]), len(ks))
		}
		for j, k := range ks {
			d, t := reads[i][2*j], reads[i][2*j+1]
			if d.Type != service.ResultBytes {
				continue
			}
			ttl := "0"
			if t.Type == service.ResultInt && t.Int > 0 {
				ttl = strconv.FormatInt(t.Int, 10)
			}
			if r := service.ApplyEnv(st, service.Op{Kind: "restore", Key: k, Args: [][]byte{[]byte(ttl), d.Bytes, []byte("replace")}}, env); r.IsErr() {
				return nil, nil, fmt.Errorf("restoring %q: %s", k, r.Err)
			}
		}
	}
	var run []service.Op
	for _, op := range ops {
		if op.Kind != service.GuardKind {
			run = append(run, op)
		}
	}
	rs := automaton.ApplyGroup(st, run, env)
	results := make([]service.Result, 0, len(ops))
	for _, op := range ops {
		if op.Kind == service.GuardKind {
			results = append(results, service.OK()) // checked at prepare
			continue
		}
		results, rs = append(results, rs[0]), rs[1:]
	}
	written := map[string]bool{}
	for _, op := range run {
		if !(service.KV{}).IsRead(op) {
			for _, l := range (service.KV{}).Locks(op) {
				written[l.Key] = true
			}
		}
	}
	writes := make([][]service.Op, len(keys))
	for i, ks := range keys {
		for _, k := range ks {
			if written[k] {
				writes[i] = append(writes[i], AfterImage(st, k, env))
			}
		}
	}
	return results, writes, nil
}

// AfterImage is the write that makes key k elsewhere what it is in st at
// env: RESTORE ... REPLACE of its value (with its time left to live), or
// DEL when st does not hold it.
func AfterImage(st service.State, k string, env service.Env) service.Op {
	d := service.ApplyEnv(st, service.Op{Kind: "dump", Key: k}, env)
	if d.Type != service.ResultBytes {
		return service.Op{Kind: "del", Key: k}
	}
	ttl := "0"
	if t := service.ApplyEnv(st, service.Op{Kind: "pttl", Key: k}, env); t.Type == service.ResultInt && t.Int > 0 {
		ttl = strconv.FormatInt(t.Int, 10)
	}
	return service.Op{Kind: "restore", Key: k, Args: [][]byte{[]byte(ttl), d.Bytes, []byte("replace")}}
}

// EncodeWrites is a computed transaction's writes as the decision records
// them: per group name, its operations.
func EncodeWrites(groups []string, writes [][]service.Op) []byte {
	e := wire.Encoder{}
	e.Uvarint(uint64(len(groups)))
	for i, g := range groups {
		e.String(g)
		e.Uvarint(uint64(len(writes[i])))
		for _, op := range writes[i] {
			service.EncodeOp(&e, op)
		}
	}
	return e.B
}

// ParseDecision reads a recorded decision (txdecide's answer): commit or
// abort, and for a computed transaction's commit the writes of group.
func ParseDecision(v []byte, group string) (string, []service.Op, error) {
	d, rest, _ := strings.Cut(string(v), "\n")
	if rest == "" {
		return d, nil, nil
	}
	dec := wire.NewDecoder([]byte(rest))
	n := dec.Count(1<<16, 1)
	var out []service.Op
	for i := 0; i < n && dec.Err() == nil; i++ {
		g := dec.String()
		m := dec.Count(1<<16, 2)
		for j := 0; j < m && dec.Err() == nil; j++ {
			op := service.DecodeOp(dec)
			if g == group {
				out = append(out, op)
			}
		}
	}
	return d, out, dec.Done()
}
