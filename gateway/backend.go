// Package gateway serves clients: a Redis-protocol (RESP2/RESP3) server that
// turns commands into service operations on a namespace and hands them to a
// Backend (the node runtime, or a fake in tests).
//
// Backends that know a namespace's leader (LeaderBackend, LeaderWatcher)
// also get SYNOD LEADER and the fail-over notifications of the Grid Services thesis,
// chapter III: SUBSCRIBE synod:leader:<namespace>, in Redis pub/sub framing
// (subscribe.go).
//
// Each connection is served by its own goroutine, so commands sent on
// different connections are not served in the order they arrived, as
// Redis's one thread serves them. Where that order changes an outcome,
// a command that blocks or (un)subscribes sent just before a write or
// PUBLISH on another connection, the write first lets such commands that
// have reached the node go first (order.go has the decision, its cost and
// its limits: one node's connections only, at most 16 of them, writes
// only while blocking or subscription commands were served in the last
// minute, and a window of a few instructions the step cannot see).
//
// Keyspace "expired" events come from the leader's active expiry, whose
// result the proposing node hands to every node (notify.go).
package gateway

import (
	"context"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
)

// Backend executes requests on this node's namespaces.
type Backend interface {
	// Do submits req to namespace ns and waits for its response. It returns an
	// error (and no response) when ns is unknown, when the context ends first
	// (the request's outcome is then unknown), or when the node is shutting down.
	// Protocol-level failures (unsupported operation, no quorum) come back as a
	// response whose Result is an error.
	//
	// The caller has validated req (automaton.ValidateRequest, or the
	// service's Validate of each operation): the edges do it once, the RESP
	// gateway when it plans a command (plan.go, check) and the gRPC server
	// when it converts a request (grpcserver prepare). Do does not check
	// again; a request that is invalid all the same is refused by the
	// protocol's own check (every protocol validates the requests it is
	// handed, for the callers that have no edge: the simulator, the model
	// checker, a peer's forwarded request), with the same error.
	Do(ctx context.Context, ns string, req automaton.Request) (automaton.Response, error)
	// Namespaces lists the namespaces this node serves; the first is the default.
	Namespaces() []config.Namespace
	// Info returns "key:value" facts for the INFO command, grouped by section.
	Info() map[string]map[string]string
}

// BatchBackend is a Backend that can also hand several requests of one
// namespace to its loop at once, in order (node.Node). Where the
// namespace's protocol applies a client batch's same-key requests in batch
// order (automaton.OrdersKeyRuns: ABD), a connection's pipelined commands
// on one key then go in one batch (gateway/pipeline.go) instead of one
// after the other. Each request is answered as Do would answer it (errs[i]
// as Do's error).
type BatchBackend interface {
	Backend
	DoBatch(ctx context.Context, ns string, reqs []automaton.Request) (resps []automaton.Response, errs []error)
}

// SubmitBackend is a Backend that can hand a request to its namespace's
// loop without waiting for the answer (node.Node). Submit returns once req
// is handed over, so the requests one goroutine submits reach the loop in
// that order; the function it returns waits for the response and answers
// as Do would (Do's errors included; ctx bounds both). req.Ops, the list,
// is the Backend's once Submit is called: the caller neither changes nor
// reuses it, and reads it only (the Backend may replace its operations'
// argument slices with copies of the same bytes before Submit returns);
// the argument bytes stay the caller's, as for Do. req.Opts.Ext, the map
// and its value lists, is the Backend's likewise: the caller does not
// change it once Submit is called (it may keep reading it; the Backend
// does not change it either: Options are copied on write, Options.Set).
// Where the namespace's protocol applies atomic groups, a connection's pipeline
// batches then go in flight together, same-key batches one after another
// (gateway/pipeline.go, "Batches in flight").
type SubmitBackend interface {
	Backend
	Submit(ctx context.Context, ns string, req automaton.Request) (await func() (automaton.Response, error))
}

// ReplyBackend is a SubmitBackend that can also answer a request through
// a callback run by the goroutine that completes it (node.Node), so that
// the reply is written there and the connection's goroutine is not woken
// to write it (replyfn.go). SubmitReply returns false, having handed
// nothing over, when it cannot take req so (the caller then uses Submit or
// Do); else done is called exactly once, on the calling goroutine or the
// one that completes the request, with the response or Do's error, unless
// Abandon withdraws the request first and returns true. done must not
// block: it runs on the namespace loop's goroutines. The req.Ops contract
// is Submit's.
type ReplyBackend interface {
	SubmitBackend
	SubmitReply(ctx context.Context, ns string, req automaton.Request, done func(automaton.Response, error)) bool
	Abandon(ns string, id automaton.RequestID) bool
}

// TurnBackend is a ReplyBackend that can hold requests for one pass
// (node.Node): the event loop (evloop.go), with several clients' commands
// read in one turn, submits them with SubmitReplyHeld, which queues each
// without stepping it (else as SubmitReply), then calls Kick for each
// namespace it submitted to, so that one pass steps them together.
type TurnBackend interface {
	ReplyBackend
	SubmitReplyHeld(ctx context.Context, ns string, req automaton.Request, done func(automaton.Response, error)) bool
	Kick(ns string)
}

// BatchReplyBackend is a ReplyBackend that can also hand several
// independent requests of one namespace to its loop at once, in order,
// as BatchBackend's DoBatch does, each answered through a callback
// (node.Node): the event loop hands an ABD or ESDS pipeline batch over so
// without waiting (pipeline.go, "Independent batches in flight").
// SubmitReplyBatch returns false, having handed nothing over, when it
// cannot take reqs so; else done(i, ...) is called exactly once for each
// reqs[i] (on the calling goroutine or the one that completes it), unless
// Abandon withdraws reqs[i] first. held: the batch may wait in the queue
// for Kick (TurnBackend's SubmitReplyHeld). done must not block. Each
// reqs[i].Ops follows Submit's contract.
type BatchReplyBackend interface {
	ReplyBackend
	SubmitReplyBatch(ctx context.Context, ns string, reqs []automaton.Request, held bool, done func(int, automaton.Response, error)) bool
}
