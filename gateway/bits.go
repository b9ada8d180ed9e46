package gateway

// Bit commands on strings (issue 34): BITCOUNT, BITPOS, BITOP, BITFIELD
// and BITFIELD_RO, each one KV operation (service/kv_bits.go), so BITOP is
// atomic across its keys wherever it runs. SETBIT and GETBIT are in
// strings.go.

func init() {
	register("bitmap",
		key1("bitcount", -2, fRead, keyPlan("bitcount", 4, []string{"byte", "bit"}, nil)),
		key1("bitpos", -3, fRead, keyPlan("bitpos", 5, []string{"byte", "bit"}, nil)),
		&command{name: "bitop", arity: -4, flags: fWriteMem, first: 2, last: -1, step: 1, plan: planBitOp},
		key1("bitfield", -2, fWriteMem, keyPlan("bitfield", 0, nil, nil)),
		key1("bitfield_ro", -2, []string{"readonly", "fast"}, keyPlan("bitfield_ro", 0, nil, nil)),
	)
}

// planBitOp is BITOP AND|OR|XOR|NOT destkey key [key ...]: one operation
// on the destination naming the sources.
func planBitOp(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("bitop"); !ok {
		return p
	}
	a := append([][]byte{[]byte(lower(args[1]))}, args[3:]...)
	return opPlan(kvOp("bitop", args[2], a...), nil)
}
