package node

// Reader passes for loops that run direct passes (issue 28 item 5; branch
// wake45, session 45). In ABD and ESDS every client operation is a round
// trip from its coordinator to a quorum of replicas: the request, the
// coordinator's messages, each replica's step and reply, the coordinator's
// step of the replies, the response. Until now a peer message for such a
// loop was put into its inbox and the loop woken (a pool worker taken off
// its condition variable, often an OS thread's futex too), on the replica
// for the query or store and again on the coordinator for each reply:
// two hand-offs and worker wake-ups per phase besides the client's own.
//
// The TCP peer reader now treats these loops as it treats the others
// since 948c931 (Node.deliverTCP, readerIdle): it puts what it reads into
// the inbox without waking the loop, and once it has handed over every
// frame it read (transport.Options.Idle) it runs the loop's pool pass
// itself when the loop is idle and holds nothing but those messages. A
// replica thus steps the query and writes its reply frame on the reader's
// goroutine, and the coordinator steps the replies that complete a phase
// there, starts the next phase or responds, and takes with them the
// client requests queued meanwhile. The frames one read returned are
// stepped in one pass and answered in one frame per peer, as the pool's
// pass would (the reader stepping frame by frame, tried before the Idle
// hook existed, doubled the peer writes per operation; loop.go,
// directPass).
//
// What does not change: the pass is the pool's own (poolPass, taken and
// left through the loop's sched state and its pass lock, so a group's
// steps stay serial with the direct passes and the workers' passes), the
// interpreter in release/ decides what leaves (outputs wait for their
// records' durability exactly as in a worker's pass), and a loop that is
// queued, being stepped, parked on a full commit queue, or holding other
// inputs (client requests, other peers' messages) is woken as before, so
// a busy loop's passes still gather what accumulates. A direct pass
// running on a client's goroutine holds the pass lock: the reader then
// waits for it (a worker taking the loop would wait the same), and its
// pass takes the requests that queued meanwhile.

// holds reports whether a TCP reader may put a message into l's inbox
// without waking l, to run or wake its pass once idle (Node.readerIdle).
func (l *nsLoop) holds() bool {
	o := &l.n.opts
	return !o.noDirect && !o.unserialized && (!l.direct || !o.noReaderPass)
}

// readerPass runs l's pass on a TCP reader's goroutine if l is idle
// (readerIdle): inlinePass for a loop without direct passes, the same
// pool pass for one with them. It reports whether it ran the pass.
func (l *nsLoop) readerPass() bool {
	if !l.direct {
		return l.inlinePass()
	}
	if l.n.opts.noReaderPass || l.park.Load() == parkWaiting {
		return false
	}
	return l.passHere()
}
