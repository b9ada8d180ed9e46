package node

import "github.com/synod-dev/synod/automaton"

// Stage tracing: a test-only hook (Options.trace) that the runtime calls at
// each stage of a request's path, so that one client's put can be timed stage
// by stage across the nodes of one process (docs/COSTS.md, "One client's
// put, stage by stage"; BenchmarkPutStages in stages_test.go). Nil in production:
// a nil check per stage.

// Stages, in the order a put meets them.
const (
	stageDo          = "do"           // Node.Do has the request (gateway or caller goroutine)
	stageStepRequest = "step-request" // the loop steps it
	stageCommitStart = "commit-start" // the committer (or the loop) starts a storage commit
	stageCommitEnd   = "commit-end"   // ... and it is durable
	stageSend        = "send"         // a peer message handed to the transport
	stageDeliver     = "deliver"      // a peer message read by the transport
	stageStepMsg     = "step-msg"     // the loop steps a peer message
	stageRespond     = "respond"      // a response handed to the waiting client
	stageDoDone      = "do-done"      // Node.Do returns it
)

// tracer is called with a stage, the peer (for send and deliver) and the
// message's kind byte (its second byte: package proto's message header), or
// zero.
type tracer func(stage string, peer automaton.NodeID, kind byte)

func msgKind(msg []byte) byte {
	if len(msg) < 2 {
		return 0
	}
	return msg[1]
}
