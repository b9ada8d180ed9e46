package sim

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// The Matchmaker in simulation (the Grid Services thesis III.C.1; service/matchmaker.go):
// a nondeterministic service, its workload and its check.
//
// # Workload
//
// Machines are "m0".."m<Keys-1>": any client advertises (cpu 2-4, mem 2-4,
// disk 1-2) or withdraws any of them, so re-advertising a busy machine
// ends its job, as in the seed. Jobs are unique per client
// ("j<client>-<n>"): a client submits with random requirements (cpu 1-3,
// mem 1-3, disk 1-2: most fit several machines, some none) and a priority 0-2, cancels one of its own jobs, and
// asks where one of its own jobs runs (job); machines and queue read the
// listings. A client keeps at most mmMaxJobs jobs: a submit beyond that
// cancels its oldest job instead, and cancels outweigh submits, so that
// machines are often free and a submit often has several suitable ones to
// choose from (the nondeterministic choice the check is about).
//
// A job that an advertise, a withdraw or a cancel ended, or whose submit
// had no answer (its outcome unknown: it may never have taken effect, as
// after a power loss), makes the client's later "job" query answer
// `no such job "j.."`. That is the service's answer, not a protocol's
// trouble: the simulated client records it as the read's result and moves
// on (mmServiceAnswer), and the check decides it like any reply, so an
// acknowledged submit that was lost shows as an illegal "no such job".
// Until session 46 the client treated it like a TRYAGAIN: it retried the
// read on every node, gave up and recorded it as unknown, and unknown
// reads are not checked (pbd46).
//
// # The check: linearizability against a nondeterministic specification
//
// A Matchmaker history is judged by check.MatchmakerCheck: linearizability
// against the Matchmaker's sequential specification with the choice of a
// submit left open (Porcupine's NondeterministicModel).
//
// Replicas are also held to each other by the convergence check
// (converge.go): a replica that applied a submit with its own randomness
// instead of the agreed environment diverges in state, which the check sees
// at the first submit with two suitable machines, often before any client
// reads the difference.

// MatchmakerService is the simulated name of the Matchmaker.
const MatchmakerService = "matchmaker"

// mmMaxJobs bounds the live jobs of one simulated client.
const mmMaxJobs = 2

func init() {
	serviceMixes[MatchmakerService] = struct {
		kinds []string
		def   string
	}{
		[]string{"advertise", "submit", "cancel", "withdraw", "job", "machines", "queue"},
		"advertise:4,submit:3,cancel:4,withdraw:1,job:2,machines:1,queue:1",
	}
}

// mmServiceAnswer reports whether res, an error reply to req, is the
// Matchmaker's own answer to a job query ("no such job", service/matchmaker.go
// jobStatus): a result the client records, as check.MatchmakerCheck decides
// it (check/matchmaker.go mmServiceAnswer).
func (s *simulator) mmServiceAnswer(req automaton.Request, res service.Result) bool {
	return s.cfg.Service == MatchmakerService && req.Ops == nil && req.Txn == nil &&
		req.Op.Kind == "job" && res.Err == fmt.Sprintf("no such job %q", req.Op.Key)
}

// genMatchmakerOp draws a Matchmaker operation of the given kind for c.
func (s *simulator) genMatchmakerOp(c *client, kind string) service.Op {
	r := s.rngClient
	num := func(lo, hi int) []byte { return []byte(strconv.Itoa(lo + r.Intn(hi-lo+1))) }
	machine := func() string { return "m" + strconv.Itoa(r.Intn(s.cfg.Keys)) }
	if kind == "submit" && len(c.jobs) >= mmMaxJobs {
		kind = "cancel-oldest"
	}
	switch kind {
	case "advertise":
		return service.Op{Kind: kind, Key: machine(), Args: [][]byte{num(2, 4), num(2, 4), num(1, 2)}}
	case "withdraw":
		return service.Op{Kind: kind, Key: machine()}
	case "submit":
		id := "j" + strconv.Itoa(c.idx) + "-" + strconv.Itoa(c.ops)
		c.jobs = append(c.jobs, id)
		return service.Op{Kind: kind, Key: id, Args: [][]byte{num(1, 3), num(1, 3), num(1, 2), num(0, 2)}}
	case "cancel-oldest":
		id := c.jobs[0]
		c.jobs = c.jobs[1:]
		return service.Op{Kind: "cancel", Key: id}
	case "cancel":
		if len(c.jobs) == 0 {
			return service.Op{Kind: "queue"}
		}
		i := r.Intn(len(c.jobs))
		id := c.jobs[i]
		c.jobs = slices.Delete(c.jobs, i, i+1)
		return service.Op{Kind: kind, Key: id}
	case "job":
		if len(c.jobs) == 0 {
			return service.Op{Kind: "machines"}
		}
		return service.Op{Kind: kind, Key: c.jobs[r.Intn(len(c.jobs))]}
	}
	return service.Op{Kind: kind} // machines, queue
}

// --- the nondeterministic specification ---
