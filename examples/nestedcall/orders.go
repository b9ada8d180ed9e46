package main

import (
	"strconv"

	"github.com/synod-dev/synod/synod"
)

// Orders is a user's nested-call program for an adam namespace (the shop)
// whose requests call another namespace (the stock counter, a paxos
// namespace):
//
//	SET order:7 apples   step 0: call INCRBY sold:apples 1 at the callee and
//	                     suspend (the call leaves once the shop's replicas
//	                     have verified the state holding the request);
//	                     step 1, with the answer n: store apples in
//	                     order:7 and "apples #n" in receipt:order:7; OK.
//
// Every other command is the shop's own KV, run whole. A failed call
// (the callee refuses it) fails the SET with the callee's error.
type Orders struct{}

func (Orders) Name() string { return "orders" }

// Nested: a plain SET is an order.
func (Orders) Nested(op synod.Op) bool { return op.Kind == "set" && len(op.Args) == 1 }

func (Orders) Encode(op synod.Op) []byte { return synod.EncodeNestedOp(op) }

func (Orders) Decode(key string, b []byte) (synod.Op, error) { return synod.DecodeNestedOp(key, b) }

// Begin names the call (KV's operation incr takes the increment: Redis's
// INCRBY); the item is the only local kept.
func (Orders) Begin(op synod.Op, _ func(synod.Op) synod.Result) (synod.Op, [][]byte) {
	item := op.Args[0]
	return synod.Op{Kind: "incr", Key: "sold:" + string(item), Args: [][]byte{[]byte("1")}}, [][]byte{item}
}

// Resume stores the order and its receipt.
func (Orders) Resume(key string, locals [][]byte, answer synod.Result, apply func(synod.Op) synod.Result) synod.Result {
	item := locals[0]
	apply(synod.Op{Kind: "set", Key: key, Args: [][]byte{item}})
	receipt := string(item) + " #" + strconv.FormatInt(answer.Int, 10)
	apply(synod.Op{Kind: "set", Key: "receipt:" + key, Args: [][]byte{[]byte(receipt)}})
	return synod.OK()
}

// Keys: the two keys an order touches (its conflict declaration).
func (Orders) Keys(key string) []string { return []string{key, "receipt:" + key} }
