package service

import "testing"

// TestKVBitField: BITFIELD's answers from Redis's own tests/unit/bitfield.tcl
// (signed and unsigned SET/GET, the #index form, INCRBY with wrap, sat and
// fail overflow) and its errors.
func TestKVBitField(t *testing.T) {
	s := newKVState()
	kvScript(t, s, 0, `
bitfield k set i8 0 -100 => [(integer) 0]
bitfield k set i8 0 101 => [(integer) -100]
bitfield k get i8 0 => [(integer) 101]
bitfield u set u8 0 255 => [(integer) 0]
bitfield u set u8 0 100 => [(integer) 255]
bitfield u get u8 0 => [(integer) 100]
bitfield h set u8 #0 65 set u8 #1 66 set u8 #2 67 => [(integer) 0 (integer) 0 (integer) 0]
get h => "ABC"
bitfield n set u8 #0 10 => [(integer) 0]
bitfield n incrby u8 #0 100 incrby u8 #0 100 => [(integer) 110 (integer) 210]
bitfield w set u8 #0 100 => [(integer) 0]
bitfield w incrby u8 #0 257 => [(integer) 101]
bitfield w incrby u8 #0 255 => [(integer) 100]
bitfield sa set u8 #0 100 => [(integer) 0]
bitfield sa overflow sat incrby u8 #0 257 => [(integer) 255]
bitfield sa overflow sat incrby u8 #0 -255 => [(integer) 0]
bitfield sw set i8 0 100 => [(integer) 0]
bitfield sw overflow wrap incrby i8 0 257 => [(integer) 101]
bitfield sw overflow wrap incrby i8 0 255 => [(integer) 100]
bitfield ss set u8 0 100 => [(integer) 0]
bitfield ss overflow sat incrby i8 0 257 => [(integer) 127]
bitfield ss overflow sat incrby i8 0 -255 => [(integer) -128]
bitfield f overflow fail incrby u2 0 4 get u2 0 => [(nil) (integer) 0]
exists f => (integer) 1
set one 1 => OK
bitfield one get i8 0 => [(integer) 49]
bitfield_ro one get u4 4 => [(integer) 1]
bitfield none get u8 0 => [(integer) 0]
exists none => (integer) 0
bitfield k get u64 0 => (error) Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.
bitfield k get i8 #-1 => (error) bit offset is not an integer or out of range
bitfield k overflow nope => (error) Invalid OVERFLOW type specified
bitfield k incrby i8 0 => (error) syntax error
bitfield_ro k set i8 0 1 => (error) ERR BITFIELD_RO only supports the GET subcommand
`)
}

// TestKVBitCountPos: BITCOUNT and BITPOS ranges in bytes and bits, with
// the answers of Redis's tests/unit/bitops.tcl.
func TestKVBitCountPos(t *testing.T) {
	s := newKVState()
	s.Apply(Op{Kind: "set", Key: "s", Args: [][]byte{[]byte("\xff\xf0\x00")}})
	s.Apply(Op{Kind: "set", Key: "ones", Args: [][]byte{[]byte("\xff\xff\xff")}})
	s.Apply(Op{Kind: "set", Key: "mis", Args: [][]byte{[]byte("__PPxxxxxxxxxxxxxxxxRR__")}})
	kvScript(t, s, 0, `
bitcount s => (integer) 12
bitcount s 1 -1 => (integer) 4
bitcount s -1 -2 => (integer) 0
bitcount s 5 30 bit => (integer) 7
bitcount mis 2 -3 => (integer) 74
bitcount s 0 => (error) syntax error
bitcount nosuch 0 => (integer) 0
bitpos s 0 => (integer) 12
bitpos s 1 2 => (integer) -1
bitpos s 0 13 20 bit => (integer) 13
bitpos ones 0 => (integer) 24
bitpos ones 0 0 => (integer) 24
bitpos ones 0 0 -1 => (integer) -1
bitpos ones 0 0 -1 bit => (integer) -1
bitpos nosuch 0 => (integer) 0
bitpos nosuch 1 => (integer) -1
`)
}

// TestKVBitOp: BITOP's zero padding, NOT, the empty result deleting the
// destination, and its errors.
func TestKVBitOp(t *testing.T) {
	s := newKVState()
	s.Apply(Op{Kind: "set", Key: "a", Args: [][]byte{[]byte("\x01\x02\xff\xff")}})
	s.Apply(Op{Kind: "set", Key: "b", Args: [][]byte{[]byte("\x01\x02\xff")}})
	kvScript(t, s, 0, `
bitop d and a b => (integer) 4
get d => "\x01\x02\xff\x00"
bitop d xor a b nosuch => (integer) 4
get d => "\x00\x00\x00\xff"
bitop d not b => (integer) 3
get d => "\xfe\xfd\x00"
bitop d or nosuch => (integer) 0
exists d => (integer) 0
`)
	if err := (KV{}).Validate(op("bitop", "d", "not", "a", "b")); err == nil || err.Error() != "ERR BITOP NOT must be called with a single source key." {
		t.Errorf("BITOP NOT of two keys: %v", err)
	}
}
