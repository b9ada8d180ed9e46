package blocking

import (
	"flag"
	"testing"

	"github.com/synod-dev/synod/protocol/proto"
)

var updateWire = flag.Bool("update-wire", false, "rewrite golden/wire.txt from the current encoders")

// TestWireGolden: every message kind and every record encode to the bytes
// recorded in golden/wire.txt before the codec moved onto
// protocol/proto's header and ballot (wire and disk compatibility), and
// decode back.
func TestWireGolden(t *testing.T) {
	tag := Tag{View: Ballot{Round: 3, Node: 1}, Seq: 7}
	ke := kentry{Key: "a", E: entry{Tag: tag, Value: []byte("x")}}
	msgs := []struct {
		name string
		m    message
	}{
		{"state", message{Kind: kindState, View: Ballot{Round: 2, Node: 0}, Active: true, Promised: Ballot{Round: 200, Node: 2}, Members: []bool{true, false, true}, Clock: 9, Reqs: []lockReq{{"", 4}, {"k", 5}}}},
		{"write", message{Kind: kindWrite, View: Ballot{Round: 1, Node: 1}, Lock: "k", Seq: 3, W: ke}},
		{"write-ack", message{Kind: kindWriteAck, View: Ballot{Round: 1, Node: 1}, Lock: "k", Seq: 3}},
		{"commit", message{Kind: kindCommit, View: Ballot{Round: 1, Node: 1}, Lock: "", Seq: 4}},
		{"commit-ack", message{Kind: kindCommitAck, View: Ballot{Round: 1, Node: 1}, Lock: "", Seq: 4}},
		{"prepare", message{Kind: kindPrepare, Ballot: Ballot{Round: 5, Node: 2}}},
		{"promise", message{Kind: kindPromise, Ballot: Ballot{Round: 5, Node: 2}, View: Ballot{Round: 4, Node: 0}, Members: []bool{true, true}, Snap: []kentry{ke, {Key: "b", E: entry{Tag: tag, Tomb: true}}}}},
		{"nack", message{Kind: kindNack, Ballot: Ballot{Round: 5, Node: 2}, Promised: Ballot{Round: 6, Node: 0}}},
		{"install", message{Kind: kindInstall, Ballot: Ballot{Round: 5, Node: 2}, Members: []bool{true, true}, Snap: []kentry{ke}}},
		{"install-ack", message{Kind: kindInstallAck, Ballot: Ballot{Round: 5, Node: 2}}},
	}
	var cases []proto.Encoded
	for _, c := range msgs {
		b := c.m.marshal()
		if _, err := unmarshal(b); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		cases = append(cases, proto.Encoded{Name: c.name, Bytes: b})
	}
	bal := marshalBallot(Ballot{Round: 130, Node: 2})
	view := viewRecord{View: Ballot{Round: 9, Node: 1}, Members: []bool{true, true, false}, Active: true}.marshal()
	kr := marshalKEntry(ke)
	snap := marshalSnap([]kentry{ke, ke})
	for _, err := range []error{
		func() error { _, err := unmarshalBallot(bal); return err }(),
		func() error { _, err := unmarshalView(view); return err }(),
		func() error { _, err := unmarshalKEntry(kr); return err }(),
		func() error { _, err := unmarshalSnap(snap); return err }(),
	} {
		if err != nil {
			t.Error(err)
		}
	}
	cases = append(cases, proto.Encoded{Name: "ballot-record", Bytes: bal}, proto.Encoded{Name: "view-record", Bytes: view},
		proto.Encoded{Name: "kentry-record", Bytes: kr}, proto.Encoded{Name: "snap-record", Bytes: snap})
	if err := proto.CheckGolden("golden/wire.txt", cases, *updateWire); err != nil {
		t.Fatal(err)
	}
}
