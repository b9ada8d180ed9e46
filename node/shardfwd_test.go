package node

import (
	"bytes"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// The forward frame's request: the bound round-trips; without it the
// bytes are those of the frame before session 52; and a node of that
// build (oldDecodeRequest, its decoder as it was) still reads a frame
// with the bound, whole, and serves the request without it.
func TestForwardRequestBound(t *testing.T) {
	r := automaton.Request{ID: automaton.RequestID{Client: 7, Seq: 9}, Op: service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}}
	r.Opts.Set("zeta", []string{"1"})
	var plain wire.Encoder
	encodeRequest(&plain, r)
	var old wire.Encoder
	old.Uvarint(7)
	old.Uvarint(9)
	old.Byte(0)
	old.Uvarint(0)
	service.EncodeOp(&old, r.Op)
	old.Uvarint(1)
	old.String("zeta")
	old.Uvarint(1)
	old.String("1")
	if !bytes.Equal(plain.B, old.B) {
		t.Fatal("a request without a bound is not encoded as before")
	}
	r.Unanswered = 8
	var e wire.Encoder
	encodeRequest(&e, r)
	d := wire.NewDecoder(e.B)
	got := decodeRequest(d)
	if err := d.Done(); err != nil || got.Unanswered != 8 || got.Opts.String("zeta") != "1" || len(got.Opts.Ext) != 1 {
		t.Fatalf("decoded %+v, %v; want the bound 8 and the one option", got, err)
	}
	d = wire.NewDecoder(e.B)
	was := oldDecodeRequest(d)
	if err := d.Done(); err != nil || was.ID != r.ID || was.Op.Key != "k" || was.Opts.String("zeta") != "1" {
		t.Fatalf("an earlier build's decoder: %+v, %v", was, err)
	}
}

// oldDecodeRequest is decodeRequest as of 9cd4774 (before the bound).
func oldDecodeRequest(d *wire.Decoder) automaton.Request {
	r := automaton.Request{ID: automaton.RequestID{Client: d.Uvarint(), Seq: d.Uvarint()}}
	r.Opts.Read = automaton.ReadMode(d.Byte())
	k := d.Count(maxForwardOps, 2)
	for i := 0; i < k && d.Err() == nil; i++ {
		r.Ops = append(r.Ops, service.DecodeOp(d))
	}
	if k == 0 {
		r.Op = service.DecodeOp(d)
	}
	x := d.Count(maxForwardOps, 2)
	for i := 0; i < x && d.Err() == nil; i++ {
		name := d.String()
		m := d.Count(maxForwardOps, 1)
		var vs []string
		for j := 0; j < m && d.Err() == nil; j++ {
			vs = append(vs, d.String())
		}
		if r.Opts.Ext == nil {
			r.Opts.Ext = map[string][]string{}
		}
		r.Opts.Ext[name] = vs
	}
	return r
}
