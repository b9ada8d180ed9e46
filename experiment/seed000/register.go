package seed000

import "github.com/synod-dev/synod/experiment"

func init() {
	experiment.Register(NewThroughput())
	experiment.Register(NewResponse())
	experiment.Register(NewStrict())
}

const seedSource = "seed 000 (Cheiner 1997), Chapter 5, Figs. 5.1-5.14: the plots did not survive in the text, " +
	"so only the prose's trends are quoted (in the summary), and each is checked against our shape"

// modelNotes state how our figures are produced, under every table.
var modelNotes = []string{
	"sim: deterministic simulator, CPU model on (--op-cost per request, --apply-cost per Apply, --msg-cost per gossip",
	"message; inputs queue while a replica is busy), 0.5-1.5 ms links, no fsync, averaged over --runs seeds.",
	"live: real processes on this machine's loopback, no artificial cost (replicas take microseconds per operation),",
	"bench's open loop (Poisson arrivals at the rate), gRPC clients spread over the nodes, one run per cell.",
}
