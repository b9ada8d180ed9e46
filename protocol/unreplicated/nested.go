package unreplicated

import (
	"fmt"
	"sort"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// Nested requests (automaton/call.go; the Eve/Adam thesis §3, Adam: the
// callee treats the caller's replicas "as clients that might make repeated
// requests with the same sequence numbers" and answers repeats "from a
// cache").
//
// Decision (the thesis is silent on a callee that is not replicated): the
// server keeps a deduplication table of nested requests, the latest outcome
// per client id (window 1, as pbpaxos: Adam's nested client id has one call
// outstanding, protocol/adam/calls.go nestedID), and makes it durable with
// the state:
//
//   - a nested request, read or write, is served as a write: it is applied,
//     and its write record w/<index> carries, after the fields of any write
//     record, the request id and the outcome (nestedTrailer); the answer is
//     emitted after the record, so the runtime releases it only once the
//     outcome is durable (with fsync, a crash of the server after the answer
//     left cannot lose it);
//   - the snapshot record carries the table after the state (snapTrailer),
//     so that records the snapshot covers can be deleted;
//   - recovery rebuilds the table from the snapshot and the records after it,
//     in order, with the recorded outcomes (not re-executed answers).
//
// A copy of the latest id of a client, at the server or forwarded by any
// node (kindNestedForward), is answered from the table without applying
// anything; a copy of an older id gets an error that is not retryable
// (automaton.RetryableAnswer), which only a caller replica lagging behind
// the one whose answer counts can send. The server being down only delays
// the calls: the caller re-sends them, same id, until it restarts.
//
// Bytes of everything that is not nested are unchanged: records and
// snapshots without a nested outcome end where they ended, and the forward
// of a nested request is a kind of its own (wire golden, conformance
// digests).

// nestedEntry is the latest nested outcome of one client id.
type nestedEntry struct {
	seq     uint64
	result  service.Result
	results []service.Result
}

// nestedCache answers a nested request from the table: a copy of the
// client's latest id gets its outcome, an older id an error. ok is false
// for a new id, which is to be executed.
func (u *Unreplicated) nestedCache(id automaton.RequestID) (automaton.Response, bool) {
	e, ok := u.nested[id.Client]
	switch {
	case !ok || id.Seq > e.seq:
		return automaton.Response{}, false
	case id.Seq == e.seq:
		return automaton.Response{ID: id, Result: e.result, Results: e.results}, true
	}
	return automaton.Response{ID: id, Result: service.Errorf("ERR %s: nested request %v is older than its client's latest (seq %d); its outcome is no longer kept",
		u.proto.Protocol, id, e.seq)}, true
}

// noteNested enters an executed nested request's outcome in the table.
func (u *Unreplicated) noteNested(id automaton.RequestID, r automaton.Response) {
	if e, ok := u.nested[id.Client]; ok && e.seq > id.Seq {
		return
	}
	u.nested[id.Client] = nestedEntry{seq: id.Seq, result: r.Result, results: r.Results}
}

// nestedTrailer is the part of a write record that names a nested
// request and its outcome.
type nestedTrailer struct {
	ID      automaton.RequestID
	Result  service.Result
	Results []service.Result
}

// nestedMark starts the nested trailer of a record: after the transaction
// environments' count, which an ordinary record omits when it is zero.
const nestedMark = 0x4e // 'N'

func (t *nestedTrailer) encode(e *wire.Encoder) {
	e.Byte(nestedMark)
	e.Uvarint(t.ID.Client)
	e.Uvarint(t.ID.Seq)
	service.EncodeResult(e, t.Result)
	e.Uvarint(uint64(len(t.Results)))
	for _, r := range t.Results {
		service.EncodeResult(e, r)
	}
}

func decodeNestedTrailer(d *wire.Decoder) *nestedTrailer {
	if d.Byte() != nestedMark {
		d.Fail(fmt.Errorf("a record's trailer is not a nested outcome"))
		return nil
	}
	t := &nestedTrailer{ID: automaton.RequestID{Client: d.Uvarint(), Seq: d.Uvarint()}}
	t.Result = service.DecodeResult(d)
	if n := d.Count(maxOps, 1); n > 0 {
		t.Results = make([]service.Result, n)
		for i := range t.Results {
			t.Results[i] = service.DecodeResult(d)
		}
	}
	return t
}

// encodeNestedTable appends the table to a snapshot record, clients in
// order (the same table gives the same bytes).
func encodeNestedTable(e *wire.Encoder, tab map[uint64]nestedEntry) {
	clients := make([]uint64, 0, len(tab))
	for c := range tab {
		clients = append(clients, c)
	}
	sort.Slice(clients, func(i, j int) bool { return clients[i] < clients[j] })
	e.Uvarint(uint64(len(clients)))
	for _, c := range clients {
		en := tab[c]
		t := nestedTrailer{ID: automaton.RequestID{Client: c, Seq: en.seq}, Result: en.result, Results: en.results}
		t.encode(e)
	}
}

func decodeNestedTable(d *wire.Decoder) map[uint64]nestedEntry {
	tab := map[uint64]nestedEntry{}
	n := d.Count(1<<32, 4)
	for i := 0; i < n && d.Err() == nil; i++ {
		if t := decodeNestedTrailer(d); t != nil {
			tab[t.ID.Client] = nestedEntry{seq: t.ID.Seq, result: t.Result, results: t.Results}
		}
	}
	return tab
}
