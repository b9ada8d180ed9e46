// Package proto holds the pieces every protocol package shares, so that they
// live once (issue 9 item 9): the declarative parameter table (params.go)
// that yields a protocol's ParseParams, its DefaultParams and the parameter
// table of its package doc; the message and record header (header.go: a
// version byte, a kind byte, one decoder reporting "bad version" and
// "unknown message type" alike for every protocol); node indexing
// (nodes.go); the (round, node) ballot that Paxos and the blocking protocol
// both number proposals with (ballot.go); and CheckGolden (golden.go), which
// each protocol's tests use to prove that its encoders still write the bytes
// recorded before a refactoring.
//
// It imports automaton and wire, never a protocol package. Quorum sizes stay
// automaton.Majority, which already lived once.
package proto
