package abd

import (
	"flag"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
)

var updateWire = flag.Bool("update-wire", false, "rewrite golden/wire.txt from the current encoders")

// TestWireGolden: every message kind and the register record encode to the
// bytes recorded in golden/wire.txt before the codec moved onto
// protocol/proto's header (wire and disk compatibility), and decode back.
func TestWireGolden(t *testing.T) {
	tag := Tag{TS: 7, Node: "n2", Seq: 300}
	msgs := []struct {
		name string
		m    message
	}{
		{"query", message{Kind: kindQuery, Op: 1, Key: "k"}},
		{"query-reply", message{Kind: kindQueryReply, Op: 2, Key: "k", Tag: tag, Value: []byte("v")}},
		{"store", message{Kind: kindStore, Op: 129, Key: "key", Tag: tag, Tomb: true}},
		{"store-ack", message{Kind: kindStoreAck, Op: 3}},
	}
	var cases []proto.Encoded
	for _, c := range msgs {
		b := c.m.marshal()
		if _, err := unmarshal(b); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		cases = append(cases, proto.Encoded{Name: c.name, Bytes: b})
	}
	// kindBatch (added after version 1's four kinds, whose bytes above
	// are unchanged): a query and a store-ack to one peer.
	b := header.Coalesce([]automaton.Output{
		automaton.Send{To: "n2", Msg: msgs[0].m.marshal()},
		automaton.Send{To: "n2", Msg: msgs[3].m.marshal()},
	}, kindBatch)[0].(automaton.Send).Msg
	if parts, err := header.SplitBatch(b, kindBatch); err != nil || len(parts) != 2 {
		t.Errorf("batch: %d parts, %v", len(parts), err)
	}
	cases = append(cases, proto.Encoded{Name: "batch", Bytes: b})
	rec := entry{Tag: tag, Value: []byte("value")}.marshal()
	if _, err := unmarshalEntry(rec); err != nil {
		t.Error(err)
	}
	cases = append(cases, proto.Encoded{Name: "entry-record", Bytes: rec})
	if err := proto.CheckGolden("golden/wire.txt", cases, *updateWire); err != nil {
		t.Fatal(err)
	}
}
