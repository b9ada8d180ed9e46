package pbdurable

import (
	"encoding/hex"
	"errors"
	"flag"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/durability"
	"github.com/synod-dev/synod/internal/fuzzcheck"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

var updateWire = flag.Bool("update-wire", false, "rewrite golden/wire.txt from the current encoders")

// wireCodecs are the package's messages: the golden test and the fuzz
// target run through them (fuzzcheck.Wire).
var wireCodecs = fuzzcheck.Wire{Golden: "golden/wire.txt", Codecs: []fuzzcheck.Codec{
	fuzzcheck.New("message", func(b []byte) (any, error) { return decode(b) }, func(x any) []byte { return x.(msg).encode() }),
	fuzzcheck.New("record", func(b []byte) (any, error) { return decodeAs(recordHeader, b) }, func(x any) []byte { return x.(msg).encodeAs(recordHeader) }),
	fuzzcheck.New("batch", decodeBatch, encodeBatch),
}}

// decodeBatch decodes a batch message (batch.go) and each message in it.
func decodeBatch(b []byte) (any, error) {
	raw, err := header.SplitBatch(b, kindBatch)
	if err != nil {
		return nil, err
	}
	ms := make([]msg, len(raw))
	for i, r := range raw {
		if ms[i], err = decode(r); err != nil {
			return nil, err
		}
	}
	return ms, nil
}

// encodeBatch is a batch step's coalescing of the messages to one peer.
func encodeBatch(x any) []byte {
	var outs []automaton.Output
	for _, m := range x.([]msg) {
		outs = append(outs, automaton.Send{To: "n2", Msg: m.encode()})
	}
	return header.Coalesce(outs, kindBatch)[0].(automaton.Send).Msg
}

// TestWireGolden: one message of each kind encodes to the bytes in
// golden/wire.txt (wire compatibility) and decodes back. A message is
// pinned as its kind's fields carry it (the sample sets every field).
func TestWireGolden(t *testing.T) {
	var samples []fuzzcheck.Sample
	byKind := map[byte]msg{}
	for k := byte(1); int(k) <= len(header.Kinds); k++ {
		if k == kindBatch {
			continue // below: messages of the other kinds in one
		}
		m, err := decode(msg{kind: k, view: proto.Ballot{Round: 2, Node: 1}, index: 9, commit: 7, db: true, state: []byte("state"),
			ups: []durability.Update{{Object: "c", Method: "inc", State: []byte("s")}},
			id:  automaton.RequestID{Client: 3, Seq: 4}, op: service.Op{Kind: "incr", Key: "k"}, res: service.Int(5)}.encode())
		if err != nil {
			t.Fatalf("kind %s: %v", header.KindName(k), err)
		}
		byKind[k] = m
		samples = append(samples, fuzzcheck.Pin(header.KindName(k), "message", m))
		if k == kindState || k == kindUpdate {
			// The state image and the update buffers are records too
			// (durable.go), framed by recordHeader.
			samples = append(samples, fuzzcheck.Pin(header.KindName(k)+"-record", "record", m))
		}
	}
	// A backup's batch of update buffers; a forwarder's forwards.
	samples = append(samples, fuzzcheck.Pin("batch", "batch", []msg{byKind[kindUpdate], byKind[kindHeartbeat], byKind[kindForward]}))
	wireCodecs.Check(t, *updateWire, samples)
}

// FuzzCodecs fuzzes every message decoder of the package (see
// fuzzcheck.Check), seeded with the encodings in golden/wire.txt.
func FuzzCodecs(f *testing.F) { wireCodecs.Fuzz(f) }

// TestMessageVersion (session 44): the promise (9886577) made the
// messages version 4. A version 3 message, here as the earlier code
// wrote it, is refused with ErrBadVersion: a version 3 node, which never
// promises, does not take part in a version 4 cluster silently. The
// records that are message encodings (the state image, the update
// buffers) stay version 3 and still decode, so a data directory of the
// earlier version restarts. Fails on the code before the bump (the
// version 3 messages decoded).
func TestMessageVersion(t *testing.T) {
	for name, h := range map[string]string{
		"heartbeat": "030102010907",
		"ack":       "0303020109",
		"report":    "0308020109000001",
		"promise":   "03090201090000057374617465",
		// Version 4 (before the batch message, session 54): refused too,
		// so that a version 4 node, which drops batches, stays out.
		"v4 heartbeat": "040102010907",
		"v4 update":    "0402020109070101016303696e63017300",
		"v4 forward":   "0406020109030404696e6372016b000000",
	} {
		b, _ := hex.DecodeString(h)
		if _, err := decode(b); !errors.Is(err, proto.ErrBadVersion) {
			t.Errorf("version 3 %s message: error %v, want %v", name, err, proto.ErrBadVersion)
		}
	}
	for name, h := range map[string]string{
		"state image":   "0304020109057374617465",
		"update buffer": "0302020109070101016303696e63017300",
	} {
		b, _ := hex.DecodeString(h)
		if _, err := decodeAs(recordHeader, b); err != nil {
			t.Errorf("version 3 %s record: %v", name, err)
		}
	}
}
