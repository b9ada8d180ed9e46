package unreplicated

import (
	"flag"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/internal/fuzzcheck"
	"github.com/synod-dev/synod/service"
)

var updateWire = flag.Bool("update-wire", false, "rewrite golden/wire.txt from the current encoders")

// snapRec is the snapshot record's two fields, for the codec table.
type snapRec struct {
	Index uint64
	State []byte
}

// wireCodecs are the package's messages and both records: the golden test
// and the fuzz target run through them (fuzzcheck.Wire).
var wireCodecs = fuzzcheck.Wire{Golden: "golden/wire.txt", Codecs: []fuzzcheck.Codec{
	fuzzcheck.New("message", func(b []byte) (any, error) { return unmarshal(b) }, func(x any) []byte { m := x.(message); return m.marshal() }),
	fuzzcheck.New("write-record", func(b []byte) (any, error) { return unmarshalWrite(b) }, func(x any) []byte { return x.(writeRecord).marshal() }),
	fuzzcheck.New("snap-record", func(b []byte) (any, error) {
		i, s, _, err := unmarshalSnap(b)
		return snapRec{i, s}, err
	}, func(x any) []byte { return marshalSnap(x.(snapRec).Index, x.(snapRec).State, nil) }),
}}

// TestWireGolden: both messages and both records encode to the bytes
// recorded in golden/wire.txt before the codec moved onto
// protocol/proto's header (wire and disk compatibility), and decode back.
func TestWireGolden(t *testing.T) {
	op := service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}
	env := service.Env{Time: 1700000000, Seed: 42}
	id := automaton.RequestID{Client: 0xabcdef, Seq: 9}
	wireCodecs.Check(t, *updateWire, []fuzzcheck.Sample{
		fuzzcheck.Pin("forward", "message", message{Kind: kindForward, Inc: 5, Seq: 300, Req: id, Op: op}),
		fuzzcheck.Pin("forward-group-env", "message", message{Kind: kindForward, Inc: 5, Seq: 301, Req: id, Ops: []service.Op{op, op}, Env: env}),
		fuzzcheck.Pin("reply", "message", message{Kind: kindReply, Inc: 5, Seq: 300, Result: service.OK()}),
		fuzzcheck.Pin("reply-group", "message", message{Kind: kindReply, Inc: 5, Seq: 301, Result: service.OK(), Results: []service.Result{service.OK(), service.Int(2)}}),
		fuzzcheck.Pin("write-record", "write-record", writeRecord{Op: op, Env: env}),
		fuzzcheck.Pin("snap-record", "snap-record", snapRec{40, []byte("state")}),
	})
}

// FuzzCodecs fuzzes the messages and both records (see fuzzcheck.Check).
func FuzzCodecs(f *testing.F) { wireCodecs.Fuzz(f) }
