package client

import (
	crand "crypto/rand"
	"encoding/binary"
	"sync"

	"github.com/synod-dev/synod/api/synodpb"
)

// Lanes: a GRPC client used by several goroutines at once.
//
// The contract's client (automaton.RequestID) has one request in flight at
// a time, its seq increasing: protocols deduplicating by the last seq per
// client (pbpaxos, eve, orca-bcast, orca-primary) refuse or drop a request
// overtaken by a later one of its client. So a request sent while others
// are in flight goes out under a lane: a client id of its own, chosen at
// random, with its own seq, held for the whole request (retries and
// fail-over keep its RequestID) and reused afterwards. A client used by
// one goroutine at a time always uses its own id, ClientID, with seqs
// 1, 2, 3, ... (the gateway does the same for a multi-key command's
// requests: gateway/commands.go, runAll).

type lane struct {
	client, seq uint64
	own         bool     // the client's own id (GRPC.client, seq GRPC.seq)
	wrote       []string // namespaces with sessions it wrote to (sessions.go)
}

// lanes are the idle lanes, the own one last when idle (taken first).
type lanes struct {
	mu   sync.Mutex
	init bool
	free []*lane
}

// get returns an idle lane, creating one when none is.
func (ls *lanes) get() *lane {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if !ls.init {
		ls.init = true
		ls.free = append(ls.free, &lane{own: true})
	}
	if n := len(ls.free); n > 0 {
		l := ls.free[n-1]
		ls.free = ls.free[:n-1]
		return l
	}
	var b [8]byte
	crand.Read(b[:])
	return &lane{client: binary.LittleEndian.Uint64(b[:]) | 1}
}

// put makes l idle again; the own lane goes last, to be taken first.
func (ls *lanes) put(l *lane) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.free = append(ls.free, l)
	if n := len(ls.free); !l.own && n >= 2 && ls.free[n-2].own {
		ls.free[n-2], ls.free[n-1] = l, ls.free[n-2] // the own lane stays last
	}
}

// takeLane takes an idle lane for req and gives req its RequestID: on the
// own lane the seq request assigned, unless a later one was assigned since
// (then a fresh one: the own id's seqs only increase); on another lane
// that lane's next seq.
func (c *GRPC) takeLane(req *synodpb.Request) *lane {
	l := c.lanes.get()
	if l.own {
		if req.ClientId != c.client || req.Seq != c.seq.Load() {
			req.ClientId, req.Seq = c.client, c.seq.Add(1)
		}
		return l
	}
	l.seq++
	req.ClientId, req.Seq = l.client, l.seq
	return l
}
