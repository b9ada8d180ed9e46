package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/abd"
	"github.com/synod-dev/synod/service"
)

// Client-driven ABD (seed 001 §3.1.2: the "ABD capable client").
//
// ABD returned by GRPC.ABD runs multi-writer ABD's two phases itself, as the
// seed's client does, against every replica of an abd namespace, whose
// replicas then only answer get-tag and conditional-store (protocol/abd,
// direct.go: requests with the option abd.phase) and never talk to each
// other. The GRPC client must be given the gRPC address of every replica of
// the namespace: a majority is counted over those addresses.
//
// Per operation, each phase is one request to every replica at once (the
// seed launches one thread per server); the phase ends when a majority,
// (N/2)+1, has answered (the seed's semaphore), and the requests still in
// flight are cancelled (the seed leaves the stragglers open; ABD needs no
// more than a majority). A replica whose attempt fails without an answer
// (connection refused or broken, TRYAGAIN) is asked again after a short
// pause, doubling to abdMaxPause, until the majority is reached or the
// phase's time runs out: Options.Timeout per phase, or the context's
// deadline when earlier.
//
//   - Write (set KEY VALUE, del KEY): query, take the highest tag (ts, w),
//     store (value or tombstone) with the tag (ts+1, this client's writer
//     id, a fresh sequence number), answer. DEL answers 1 when the highest
//     tag held a value (a hint, as for the node's coordinator).
//   - Read (get, exists): query, take the highest tag; unless a majority of
//     the answers already carries it, store it back (the write-back the
//     seed's read lacks, §3.1.2: without it reads are not linearizable);
//     answer its value.
//
// A write whose store phase did not reach a majority has an unknown outcome
// (the error wraps ErrUnknownOutcome): some replicas may hold it, and a
// later read may write it back. A write whose query phase failed stored
// nothing. A refusal (an unknown namespace, a namespace whose protocol
// declares no abd.phase option, an error answer) is returned at once.

const (
	abdFirstPause = 10 * time.Millisecond
	abdMaxPause   = 500 * time.Millisecond
)

// ABD is a client-driven ABD coordinator over c's connections, for
// namespace ns. It is safe for concurrent use.
type ABD struct {
	c      *GRPC
	ns     string
	writer string
}

// ABD returns the client-driven ABD coordinator for namespace ns (""
// means Options.Namespace, and then the node's default).
func (c *GRPC) ABD(ns string) *ABD {
	return &ABD{c: c, ns: ns, writer: abd.ClientWriter(c.client)}
}

// Writer is the writer id this client puts in its tags.
func (a *ABD) Writer() string { return a.writer }

// Get returns key's value; found is false when the key does not exist.
func (a *ABD) Get(ctx context.Context, key string) (value []byte, found bool, err error) {
	r, err := a.Do(ctx, service.Op{Kind: "get", Key: key})
	if err != nil {
		return nil, false, err
	}
	return r.Bytes, r.Type == service.ResultBytes, nil
}

// Set stores value under key.
func (a *ABD) Set(ctx context.Context, key string, value []byte) error {
	_, err := a.Do(ctx, service.Op{Kind: "set", Key: key, Args: [][]byte{value}})
	return err
}

// Del deletes key and returns 1 if it held a value (a hint; see above).
func (a *ABD) Del(ctx context.Context, key string) (int64, error) {
	r, err := a.Do(ctx, service.Op{Kind: "del", Key: key})
	return r.Int, err
}

// Do runs op (get, exists, set KEY VALUE or del KEY) with ABD's two phases.
// Failures are errors, never error results.
func (a *ABD) Do(ctx context.Context, op service.Op) (service.Result, error) {
	write := false
	switch {
	case op.Kind == "get" || op.Kind == "exists":
	case (op.Kind == "set" && len(op.Args) == 1) || op.Kind == "del":
		write = true
	default:
		return service.Result{}, fmt.Errorf("client: client-driven ABD runs get, exists, set KEY VALUE and del KEY, not %s with %d arguments", op.Kind, len(op.Args))
	}
	a.c.mu.Lock()
	closed := a.c.closed
	a.c.mu.Unlock()
	if closed {
		return service.Result{}, ErrClosed
	}
	what := fmt.Sprintf("client-driven ABD %s %q", op.Kind, op.Key)
	max, nMax, err := a.query(ctx, op.Key)
	if err != nil {
		return service.Result{}, fmt.Errorf("client: %s: query phase: %w", what, err)
	}
	quorum := automaton.Majority(len(a.c.conns))
	if !write {
		if nMax < quorum { // write back (seed 001 §3.1.2 omits it; ABD needs it)
			if err := a.store(ctx, op.Key, max.Tag, max.Tomb, max.Value); err != nil {
				return service.Result{}, fmt.Errorf("client: %s: write-back: %w", what, err)
			}
		}
		switch {
		case op.Kind == "exists" && max.Present():
			return service.Int(1), nil
		case op.Kind == "exists":
			return service.Int(0), nil
		case max.Present():
			return service.Bytes(max.Value), nil
		}
		return service.Nil(), nil
	}
	tag := abd.Tag{TS: max.Tag.TS + 1, Node: a.writer, Seq: a.c.seq.Add(1)}
	var val []byte
	if op.Kind == "set" {
		val = op.Args[0]
	}
	if err := a.store(ctx, op.Key, tag, op.Kind == "del", val); err != nil {
		return service.Result{}, fmt.Errorf("client: %s: store phase: %w: %w", what, err, ErrUnknownOutcome)
	}
	if op.Kind == "set" {
		return service.OK(), nil
	}
	if max.Present() {
		return service.Int(1), nil
	}
	return service.Int(0), nil
}

// query runs the query phase and returns the highest answer and how many
// answers carry its tag.
func (a *ABD) query(ctx context.Context, key string) (abd.QueryAnswer, int, error) {
	res, err := a.phase(ctx, service.Op{Kind: "get", Key: key}, map[string][]string{abd.OptPhase: {abd.PhaseQuery}})
	if err != nil {
		return abd.QueryAnswer{}, 0, err
	}
	var max abd.QueryAnswer
	nMax := 0
	for i, r := range res {
		q, err := abd.ParseQueryAnswer(r)
		if err != nil {
			return abd.QueryAnswer{}, 0, err
		}
		switch {
		case i == 0 || max.Tag.Less(q.Tag, false):
			max, nMax = q, 1
		case q.Tag == max.Tag:
			nMax++
		}
	}
	return max, nMax, nil
}

// store runs the store phase of (tag, value), or of a tombstone.
func (a *ABD) store(ctx context.Context, key string, tag abd.Tag, tomb bool, value []byte) error {
	op := service.Op{Kind: "set", Key: key, Args: [][]byte{value}}
	if tomb {
		op = service.Op{Kind: "del", Key: key}
	}
	res, err := a.phase(ctx, op, map[string][]string{abd.OptPhase: {abd.PhaseStore}, abd.OptTag: {abd.FormatTag(tag)}})
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Type != service.ResultOK {
			return fmt.Errorf("a replica acknowledged a store with %v", r)
		}
	}
	return nil
}

// abdAnswer is one replica's answer to a phase.
type abdAnswer struct {
	idx int
	res service.Result
	err error // nil: res is the answer
}

// phase sends op with the options ext to every replica at once and
// returns the first majority of answers. It fails at once on a refusal,
// and when a majority can no longer answer in time.
func (a *ABD) phase(ctx context.Context, op service.Op, ext map[string][]string) ([]service.Result, error) {
	req, err := a.c.request(a.ns, OpOptions{Ext: ext})
	if err != nil {
		return nil, err
	}
	req.Op = synodpb.FromOp(op)
	pctx, cancel := context.WithTimeout(ctx, a.c.opts.Timeout)
	defer cancel()
	n := len(a.c.conns)
	quorum := automaton.Majority(n)
	answers := make(chan abdAnswer, n)
	for i, g := range a.c.conns {
		go func() {
			res, err := a.ask(pctx, g, req)
			answers <- abdAnswer{i, res, err}
		}()
	}
	var got []service.Result
	var errs []error
	for range n {
		r := <-answers
		if r.err != nil {
			if definite(status.Code(r.err)) {
				return nil, fmt.Errorf("%s: %w", a.c.conns[r.idx].addr, r.err)
			}
			errs = append(errs, fmt.Errorf("%s: %w", a.c.conns[r.idx].addr, r.err))
			continue
		}
		if r.res.IsErr() {
			return nil, fmt.Errorf("%s: %w", a.c.conns[r.idx].addr, &Error{Msg: r.res.Err})
		}
		got = append(got, r.res)
		if len(got) == quorum {
			return got, nil
		}
	}
	return nil, fmt.Errorf("%d of %d replicas answered, fewer than a majority (%d): %w", len(got), n, quorum, errors.Join(errs...))
}

// ask sends req to one replica until it answers (anything but TRYAGAIN),
// refuses it, or ctx ends.
func (a *ABD) ask(ctx context.Context, g *gconn, req *synodpb.Request) (service.Result, error) {
	pause := abdFirstPause
	for {
		_, res, _, err := a.c.attempt(ctx, g, req)
		switch {
		case err != nil && definite(status.Code(err)):
			return service.Result{}, err
		case err == nil && !(res.IsErr() && (&Error{Msg: res.Err}).Code() == "TRYAGAIN"):
			return res, nil
		case err == nil:
			err = &Error{Msg: res.Err}
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return service.Result{}, fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-t.C:
		}
		pause = min(2*pause, abdMaxPause)
	}
}
