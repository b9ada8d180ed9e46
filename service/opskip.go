package service

import "github.com/synod-dev/synod/wire"

// SkipOp reads past an operation written by EncodeOp without decoding it:
// no string, argument list or buffer is made. A reader that already holds
// the operation (an ESDS replica receiving gossip about an operation it
// has: protocol/esds unmarshalKnown) skips it so. The checks are
// DecodeOp's: the same encodings fail (TestSkipOp).
func SkipOp(d *wire.Decoder) {
	d.Bytes() // kind
	d.Bytes() // key
	n := d.Count(maxArgs, 1)
	for i := 0; i < n && d.Err() == nil; i++ {
		d.Bytes()
	}
}
