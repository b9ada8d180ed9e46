package blocking

import (
	"flag"
	"testing"

	"github.com/synod-dev/synod/internal/fuzzcheck"
)

var updateWire = flag.Bool("update-wire", false, "rewrite golden/wire.txt from the current encoders")

// wireCodecs are the package's messages and records: the golden test and
// the fuzz target run through them (fuzzcheck.Wire).
var wireCodecs = fuzzcheck.Wire{Golden: "golden/wire.txt", Codecs: []fuzzcheck.Codec{
	fuzzcheck.New("message", func(b []byte) (any, error) { return unmarshal(b) }, func(x any) []byte { m := x.(message); return m.marshal() }),
	fuzzcheck.New("ballot-record", func(b []byte) (any, error) { return unmarshalBallot(b) }, func(x any) []byte { return marshalBallot(x.(Ballot)) }),
	fuzzcheck.New("view-record", func(b []byte) (any, error) { return unmarshalView(b) }, func(x any) []byte { return x.(viewRecord).marshal() }),
	fuzzcheck.New("kentry-record", func(b []byte) (any, error) { return unmarshalKEntry(b) }, func(x any) []byte { return marshalKEntry(x.(kentry)) }),
	fuzzcheck.New("snap-record", func(b []byte) (any, error) { return unmarshalSnap(b) }, func(x any) []byte { return marshalSnap(x.([]kentry)) }),
}}

// FuzzCodecs fuzzes every message and record decoder of the package (see
// fuzzcheck.Check), seeded with the encodings in golden/wire.txt.
func FuzzCodecs(f *testing.F) { wireCodecs.Fuzz(f) }

// TestWireGolden: every message kind and every record encode to the bytes
// recorded in golden/wire.txt before the codec moved onto
// protocol/proto's header and ballot (wire and disk compatibility), and
// decode back.
func TestWireGolden(t *testing.T) {
	tag := Tag{View: Ballot{Round: 3, Node: 1}, Seq: 7}
	ke := kentry{Key: "a", E: entry{Tag: tag, Value: []byte("x")}}
	msg := func(name string, m message) fuzzcheck.Sample { return fuzzcheck.Pin(name, "message", m) }
	wireCodecs.Check(t, *updateWire, []fuzzcheck.Sample{
		msg("state", message{Kind: kindState, View: Ballot{Round: 2, Node: 0}, Active: true, Promised: Ballot{Round: 200, Node: 2}, Members: []bool{true, false, true}, Clock: 9, Reqs: []lockReq{{"", 4}, {"k", 5}}}),
		msg("write", message{Kind: kindWrite, View: Ballot{Round: 1, Node: 1}, Lock: "k", Seq: 3, W: ke}),
		msg("write-ack", message{Kind: kindWriteAck, View: Ballot{Round: 1, Node: 1}, Lock: "k", Seq: 3}),
		msg("commit", message{Kind: kindCommit, View: Ballot{Round: 1, Node: 1}, Lock: "", Seq: 4}),
		msg("commit-ack", message{Kind: kindCommitAck, View: Ballot{Round: 1, Node: 1}, Lock: "", Seq: 4}),
		msg("prepare", message{Kind: kindPrepare, Ballot: Ballot{Round: 5, Node: 2}}),
		msg("promise", message{Kind: kindPromise, Ballot: Ballot{Round: 5, Node: 2}, View: Ballot{Round: 4, Node: 0}, Members: []bool{true, true}, Snap: []kentry{ke, {Key: "b", E: entry{Tag: tag, Tomb: true}}}}),
		msg("nack", message{Kind: kindNack, Ballot: Ballot{Round: 5, Node: 2}, Promised: Ballot{Round: 6, Node: 0}}),
		msg("install", message{Kind: kindInstall, Ballot: Ballot{Round: 5, Node: 2}, Members: []bool{true, true}, Snap: []kentry{ke}}),
		msg("install-ack", message{Kind: kindInstallAck, Ballot: Ballot{Round: 5, Node: 2}}),
		fuzzcheck.Pin("ballot-record", "ballot-record", Ballot{Round: 130, Node: 2}),
		fuzzcheck.Pin("view-record", "view-record", viewRecord{View: Ballot{Round: 9, Node: 1}, Members: []bool{true, true, false}, Active: true}),
		fuzzcheck.Pin("kentry-record", "kentry-record", ke),
		fuzzcheck.Pin("snap-record", "snap-record", []kentry{ke, ke}),
	})
}
