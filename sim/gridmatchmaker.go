package sim

import (
	"strconv"

	"github.com/synod-dev/synod/durability/examples/matchmaker"
	"github.com/synod-dev/synod/service"
)

// The seed's chapter IV Matchmaker in simulation (the Grid Services thesis IV.D.2;
// durability/examples/matchmaker, service gridmatchmaker): deterministic,
// the first suitable machine.
//
// # Workload
//
// Machines are "m0".."m<min(Keys,4)-1>": any client advertises any of them
// (cpu and memory 1-4; a machine that is listed has its resources
// refreshed, one that was allocated comes back). A client submits as itself
// ("c<client>", so balances count its own allocations) with cpu and memory
// 1-4: small jobs fit several machines, large ones often none, and submits
// outnumber the machines, so the queue empties and refills and both answers
// (a machine, nil) occur. balance asks for any client's balance; available
// counts the listed machines.
//
// # The check
//
// The service is deterministic, so check.Linearizable judges it with its
// generic model (check/generic.go): the service itself is the sequential
// specification, the whole namespace one object.

// GridMatchmakerService is the simulated name of the seed's chapter IV
// Matchmaker.
const GridMatchmakerService = matchmaker.ServiceName

// gridMachines bounds the machine names, so that advertisements refresh
// and return machines rather than only add new ones.
const gridMachines = 4

// genGridMatchmakerOp draws a gridmatchmaker operation of the given kind for c.
func (s *simulator) genGridMatchmakerOp(c *client, kind string) service.Op {
	r := s.rngClient
	num := func() []byte { return []byte(strconv.Itoa(1 + r.Intn(4))) }
	switch kind {
	case "advertise":
		m := "m" + strconv.Itoa(r.Intn(min(s.cfg.Keys, gridMachines)))
		return service.Op{Kind: kind, Key: m, Args: [][]byte{num(), num()}}
	case "submit":
		return service.Op{Kind: kind, Key: "c" + strconv.Itoa(c.idx), Args: [][]byte{num(), num()}}
	case "balance":
		return service.Op{Kind: kind, Key: "c" + strconv.Itoa(r.Intn(s.cfg.Clients))}
	}
	return service.Op{Kind: kind} // available
}
