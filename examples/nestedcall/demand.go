package main

import (
	"example.com/inventory/inventory"
	"github.com/synod-dev/synod/synod"
)

// Demand is a nested-call program over a user's data type, the Inventory
// of examples/datatype (not the KV). The shop is an adam namespace serving
// inventory; every take at the shop (a customer asking for units) is
// counted at the warehouse, the callee, a namespace serving inventory too,
// which plans its deliveries by demand:
//
//	take apples 2   step 0: call stock apples 2 at the warehouse (its
//	                demand count) and suspend; the call leaves once the
//	                shop's replicas have verified the state holding the
//	                request;
//	                step 1, with the warehouse's answer: take 2 apples at
//	                the shop; answer what Inventory answers (the shop's
//	                new count, or "out of stock": demand counts the units
//	                asked for, served or not).
//
// A call the warehouse refuses (or that cannot be carried) fails the take,
// which then takes nothing. stock and count are the shop's own operations,
// run whole. Inventory's Validate, IsRead and conflict declaration are the
// namespace's; Keys is the program's.
type Demand struct{}

func (Demand) Name() string { return "demand" }

// Nested: every take is counted at the warehouse.
func (Demand) Nested(op synod.Op) bool { return op.Kind == "take" }

func (Demand) Encode(op synod.Op) []byte { return synod.EncodeNestedOp(op) }

func (Demand) Decode(key string, b []byte) (synod.Op, error) { return synod.DecodeNestedOp(key, b) }

// Begin names the call: the units asked for, added to the demand count.
func (Demand) Begin(op synod.Op, _ func(synod.Op) synod.Result) (synod.Op, [][]byte) {
	return synod.Op{Kind: "stock", Key: op.Key, Args: op.Args}, op.Args
}

// Resume takes the units at the shop.
func (Demand) Resume(key string, locals [][]byte, _ synod.Result, apply func(synod.Op) synod.Result) synod.Result {
	return apply(synod.Op{Kind: "take", Key: key, Args: locals})
}

// Keys: the item is all a take touches at the shop.
func (Demand) Keys(key string) []string { return []string{key} }

// Inventory is the shop's and the warehouse's data type.
type Inventory = inventory.Inventory
