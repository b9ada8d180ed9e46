package esds

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// Label is a minlabel (the ESDS thesis §4.2.2): a pair (counter value, replica id),
// ordered lexicographically. Replica ids are positions in the configured node
// list (0..N-1). The zero Label with Set false is the seed's ∞ ("no label").
type Label struct {
	C   uint64
	R   uint32
	Set bool
}

// Less reports whether l orders before m; ∞ (unset) orders after everything.
func (l Label) Less(m Label) bool {
	switch {
	case !l.Set:
		return false
	case !m.Set:
		return true
	case l.C != m.C:
		return l.C < m.C
	}
	return l.R < m.R
}

// Compare is Less as a three-way comparison (-1, 0, +1), for slices.SortFunc.
func (l Label) Compare(m Label) int {
	switch {
	case l.Less(m):
		return -1
	case m.Less(l):
		return 1
	}
	return 0
}

func (l Label) String() string {
	if !l.Set {
		return "∞"
	}
	return fmt.Sprintf("(%d,%d)", l.C, l.R)
}

// Message kinds.
const (
	// kindStream is the optimised variant's incremental gossip: a numbered
	// range of one sender's gossip stream to this receiver, plus the
	// acknowledgement of the reverse stream.
	kindStream = 1
	// kindFull is the unoptimised variant's full-state gossip (Fig. 4.2):
	// every operation in rcvd with its done/solid flags and label.
	kindFull = 2
	// kindRequest is send_{f,r}("request", x) (Fig. 4.1): one entry, the
	// descriptor. kindResponse is send_{r,f}("response", x, v): one entry
	// (the id alone, flagGone's layout) and Value.
	kindRequest  = 3
	kindResponse = 4
	// impl=simple (SimpleESDSImpl, the ESDS thesis §3.3.4, §3.3.5; reserve.go,
	// combination.go): the reservation request, its grant and rejection,
	// and the two messages of the gossip I/O combination, "Initiate X"
	// (carrying the gossip message, kindStream or kindFull, as Inner) and
	// "Done X" (carrying the receiver's stream acknowledgement). Seq numbers
	// the requester's reservation; every reply names it.
	kindReserve  = 5
	kindGrant    = 6
	kindReject   = 7
	kindInitiate = 8
	kindDone     = 9
	// kindBatch carries several of the above to one peer, in a step that
	// handled a client batch or a batch message (the front end's requests
	// to a replica, a replica's responses): protocol/proto's batch message
	// (Header.Coalesce, SplitBatch). Added after version 1's nine kinds,
	// whose encodings are unchanged.
	kindBatch = 10
)

// reservationKind reports whether kind is one of impl=simple's messages.
func reservationKind(kind byte) bool { return kind >= kindReserve && kind <= kindDone }

// header is the messages' version 2 header: version 2 added a stream
// message's stamp (Stable, the sender's stable prefix; stream.go). Version 1
// messages are refused (a peer of the previous version must be upgraded).
var header = proto.Header{Protocol: "esds", Version: 2, Kinds: headerKinds}

// recHeader is the operation records' header: version 1, as before (a
// record holds a gossip entry, whose encoding version 2 did not change), so
// data directories of the previous version restart.
var recHeader = proto.Header{Protocol: "esds", Version: 1, Kinds: headerKinds}

var headerKinds = []string{"stream", "full", "request", "response",
	"reserve", "grant", "reject", "initiate", "done", "batch"}

const (
	flagDone  = 1 // the sender has done the operation (it carries a label)
	flagSolid = 2 // the operation is stable at the sender
	// flagGone: the sender has garbage-collected the operation (it was
	// stable at every member); the entry carries the id alone and means
	// "stable at the sender".
	flagGone = 4
	// flagAll: the sender knows the operation is stable at every member
	// (x ∈ ⋂_i solid[i]); knowledge of knowledge, sound to pass on.
	flagAll = 8
	// flagBare (stream messages only): the entry omits the descriptor (prev,
	// strict, op) because the receiver has acknowledged an earlier entry of
	// this stream that carried it.
	flagBare = 16

	maxEntries = 1 << 20
	maxPrev    = 1 << 16
)

// entry is what gossip (and the persisted record) says about one operation:
// its descriptor (id, prev, strict, op) and the sender's knowledge about it.
type entry struct {
	ID string
	// rkey, when set, is the record key recOp+ID, ID its tail (one string:
	// unmarshal cuts a stream message's ids from one allocation).
	rkey   string
	raw    []byte // the id's bytes while unmarshal decodes (aliases the message)
	Prev   []string
	Strict bool
	Op     service.Op
	Flags  byte
	Label  Label
}

// message is the union of the two gossip messages.
type message struct {
	Kind byte
	// Inc is the sender's incarnation (a fresh number at every start).
	Inc uint64
	// Removed is the sender's set of removed members (a bit per replica id).
	Removed uint64

	// kindStream: the sender's stream id to this receiver, the sequence
	// numbers From..To this message covers (one entry per operation: what
	// its last position in the range says; see the package doc), and the
	// acknowledgement of the receiver's stream AckStream up to AckSeq.
	Stream, From, To  uint64
	AckStream, AckSeq uint64
	// Stable (kindStream, stability=prefix): the sender's stable prefix
	// when the last position of the range was queued: every operation
	// with a label at most Stable is stable at the sender, and the
	// receiver, once it has applied the stream through To, knows each of
	// them with its final label (stream.go stampOf; package doc, "Stability
	// as a prefix"). Unset: no claim.
	Stable Label

	Entries []entry
	// kindResponse: the value.
	Value service.Result

	// Reservation and combination messages (impl=simple): the requester's
	// reservation number; kindInitiate: the gossip message it carries;
	// kindDone: AckStream and AckSeq acknowledge the gossip stream.
	Seq   uint64
	Inner []byte
}

func encodeEntry(e *wire.Encoder, x *entry) {
	e.String(x.ID)
	e.Byte(x.Flags)
	if x.Flags&flagGone != 0 {
		return
	}
	if x.Flags&flagBare == 0 {
		e.Uvarint(uint64(len(x.Prev)))
		for _, p := range x.Prev {
			e.String(p)
		}
		e.Bool(x.Strict)
		service.EncodeOp(e, x.Op)
	}
	if x.Flags&flagDone != 0 {
		e.Uvarint(x.Label.C)
		e.Uvarint(uint64(x.Label.R))
	}
}

// entrySize bounds the bytes encodeEntry writes for x, so that a message
// is encoded into one buffer of its size (issue 28, session 54: sized at
// 48 bytes an entry, a stream message of descriptors with 100-byte values
// grew its buffer by doubling, about half of the bytes an ESDS put
// allocated in marshal at 64 clients).
func entrySize(x *entry) int {
	const uv = binary.MaxVarintLen64
	n := uv + len(x.ID) + 1 + 2*uv
	if x.Flags&(flagGone|flagBare) == 0 {
		n += uv + 1 + 3*uv + len(x.Op.Kind) + len(x.Op.Key)
		for _, p := range x.Prev {
			n += uv + len(p)
		}
		for _, b := range x.Op.Args {
			n += uv + len(b)
		}
	}
	return n
}

// decodeEntry reads an entry; od decodes its operation (shared by a
// message's entries: their argument lists come from one array, an
// allocation per message instead of one per operation; service.OpDecoder)
// and more is how many entries follow it.
func decodeEntry(d *wire.Decoder, od *service.OpDecoder, more int) entry {
	x := decodeEntryRaw(d, od, more)
	x.ID, x.raw = string(x.raw), nil
	return x
}

// decodeEntryRaw is decodeEntry leaving the id in x.raw, aliasing d's
// buffer (idStrings gives it its string).
func decodeEntryRaw(d *wire.Decoder, od *service.OpDecoder, more int) entry {
	return decodeEntryKnown(d, od, more, nil)
}

// decodeEntryKnown is decodeEntryRaw reading past, without decoding, the
// descriptor (prev, strict, operation) of an entry whose operation known
// holds: the entry then has none (unmarshalKnown).
func decodeEntryKnown(d *wire.Decoder, od *service.OpDecoder, more int, known map[string]*op) entry {
	x := entry{raw: d.Bytes(), Flags: d.Byte()}
	if x.Flags == flagGone {
		return x
	}
	if x.Flags&^(flagDone|flagSolid|flagAll|flagBare) != 0 {
		d.Fail(fmt.Errorf("esds: bad entry flags %#x", x.Flags))
	}
	if x.Flags&flagBare == 0 && known != nil && known[string(x.raw)] != nil {
		if n := d.Count(maxPrev, 1); n > 0 {
			for i := 0; i < n && d.Err() == nil; i++ {
				d.Bytes()
			}
		}
		d.Bool()
		service.SkipOp(d)
	} else if x.Flags&flagBare == 0 {
		if n := d.Count(maxPrev, 1); n > 0 {
			x.Prev = make([]string, n)
			for i := range x.Prev {
				x.Prev[i] = d.String()
			}
		}
		x.Strict = d.Bool()
		x.Op = od.Decode(d, more)
	}
	if x.Flags&(flagSolid|flagAll) != 0 && x.Flags&flagDone == 0 {
		d.Fail(fmt.Errorf("esds: entry %q is solid but not done", x.raw))
	}
	if x.Flags&flagDone != 0 {
		x.Label.C = d.Uvarint()
		r := d.Uvarint()
		if r >= maxReplicas {
			d.Fail(fmt.Errorf("esds: label replica id %d out of range", r))
		}
		x.Label.R = uint32(r)
		x.Label.Set = true
	}
	return x
}

func (m *message) marshal() []byte {
	n := 64 + len(m.Inner) + len(m.Value.Bytes) + len(m.Value.Err)
	for i := range m.Entries {
		n += entrySize(&m.Entries[i])
	}
	e := header.Message(m.Kind, n)
	e.Uvarint(m.Inc)
	e.Uvarint(m.Removed)
	if m.Kind == kindStream {
		e.Uvarint(m.Stream)
		e.Uvarint(m.From)
		e.Uvarint(m.To)
		e.Uvarint(m.AckStream)
		e.Uvarint(m.AckSeq)
		e.Bool(m.Stable.Set)
		if m.Stable.Set {
			e.Uvarint(m.Stable.C)
			e.Uvarint(uint64(m.Stable.R))
		}
	}
	if reservationKind(m.Kind) {
		e.Uvarint(m.Seq)
		switch m.Kind {
		case kindInitiate:
			e.Bytes(m.Inner)
		case kindDone:
			e.Uvarint(m.AckStream)
			e.Uvarint(m.AckSeq)
		}
	}
	e.Uvarint(uint64(len(m.Entries)))
	for i := range m.Entries {
		encodeEntry(&e, &m.Entries[i])
	}
	if m.Kind == kindResponse {
		service.EncodeResult(&e, m.Value)
	}
	return e.B
}

func unmarshal(b []byte) (message, error) { return unmarshalKnown(b, nil) }

// unmarshalKnown is unmarshal for a replica that holds the operations in
// known (its a.ops): a gossip message's entry about one of them carries
// no descriptor after decoding (its prev, strict and operation are read
// past, not made), since receiveGossip uses the descriptor of a fresh
// operation only. Issue 28 (session 51): at 64 clients a replica hears of
// most operations twice, from the replica that did it and relayed by the
// third, and each decode made the key's string and the arguments' buffer
// (BenchmarkPutSteps: 8 of 48 allocations per SET in process).
func unmarshalKnown(b []byte, known map[string]*op) (message, error) {
	return unmarshalInto(b, known, nil)
}

// unmarshalInto is unmarshalKnown decoding the entries into buf's array
// when it has the room (onMessage1 hands back the last gossip message's,
// its entries merged: issue 28, session 54, one array of ~170 bytes an
// entry per message at every replica).
func unmarshalInto(b []byte, known map[string]*op, buf []entry) (message, error) {
	var m message
	d, kind, err := header.OpenMessage(b)
	if err != nil {
		return m, err
	}
	m.Kind = kind
	m.Inc = d.Uvarint()
	m.Removed = d.Uvarint()
	switch m.Kind {
	case kindStream:
		m.Stream = d.Uvarint()
		m.From = d.Uvarint()
		m.To = d.Uvarint()
		m.AckStream = d.Uvarint()
		m.AckSeq = d.Uvarint()
		if d.Bool() {
			m.Stable.C = d.Uvarint()
			r := d.Uvarint()
			if r >= maxReplicas {
				d.Fail(fmt.Errorf("esds: stable label replica id %d out of range", r))
			}
			m.Stable.R, m.Stable.Set = uint32(r), true
		}
		if d.Err() == nil && m.To+1 < m.From {
			return m, fmt.Errorf("esds: stream range %d..%d is backwards", m.From, m.To)
		}
	}
	if reservationKind(m.Kind) {
		m.Seq = d.Uvarint()
		switch m.Kind {
		case kindInitiate:
			m.Inner = d.BytesCopy()
		case kindDone:
			m.AckStream = d.Uvarint()
			m.AckSeq = d.Uvarint()
		}
	}
	// An entry takes at least 2 bytes: its id's length and its flags.
	if n := d.Count(maxEntries, 2); n > 0 {
		if cap(buf) >= n {
			m.Entries = buf[:n]
		} else {
			m.Entries = make([]entry, n)
		}
		var od service.OpDecoder
		if m.Kind != kindStream && m.Kind != kindFull {
			known = nil // a request's, a response's: whole
		}
		for i := range m.Entries {
			m.Entries[i] = decodeEntryKnown(d, &od, n-i-1, known)
		}
		idStrings(m.Entries)
	}
	if m.Kind == kindResponse {
		m.Value = service.DecodeResult(d)
	}
	if (m.Kind == kindRequest || m.Kind == kindResponse) && d.Err() == nil && len(m.Entries) != 1 {
		return message{}, fmt.Errorf("esds: %s message with %d entries", header.Kinds[m.Kind-1], len(m.Entries))
	}
	if reservationKind(m.Kind) && len(m.Entries) != 0 {
		return message{}, fmt.Errorf("esds: %s message with %d entries", header.Kinds[m.Kind-1], len(m.Entries))
	}
	if m.Kind == kindRequest && len(m.Entries) == 1 && m.Entries[0].Flags != 0 {
		return message{}, fmt.Errorf("esds: request entry %q has flags %#x", m.Entries[0].ID, m.Entries[0].Flags)
	}
	if err := d.Done(); err != nil {
		return message{}, err
	}
	return m, nil
}

// idStrings gives each entry, decoded by decodeEntryRaw, its id and record
// key (recOp+id) as parts of one string: one allocation per message
// instead of one per entry, and none for the record a new operation's
// first step writes (flushDirty). Most entries name an operation already
// here (their id is only looked up); an id kept beyond the message (an
// operation's, the id summary's) keeps the message's ids alive, as the
// operations received together are collected together (idSummary.add
// clones an id it keeps for ever).
func idStrings(es []entry) {
	n := 0
	for i := range es {
		n += len(recOp) + len(es[i].raw)
	}
	var b strings.Builder
	b.Grow(n)
	for i := range es {
		b.WriteString(recOp)
		b.Write(es[i].raw)
	}
	s, at := b.String(), 0
	for i := range es {
		x := &es[i]
		end := at + len(recOp) + len(x.raw)
		x.rkey, x.ID, x.raw = s[at:end], s[at+len(recOp):end], nil
		at = end
	}
}
