package orca

import (
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strings"

	"github.com/synod-dev/synod/service"
)

// The object service in the simulator (service.Simulated): random clients
// create and use objects of every type that declares a TypeSim. Object i of
// type T is named "T:i" (i below the run's --keys), so each name always
// holds one type; the mix kinds are "T.op" and "T.new" (creation), weighed
// by the type's TypeSim.Mix. Each client's first --keys operations create
// objects 0, 1, ... of the type its draw named. The history is judged by the service itself
// as its sequential specification (check/seq_generic.go under the Orca
// runtimes, which promise sequential consistency; check/generic.go under a
// linearizable protocol).

var _ service.Simulated = (*Service)(nil)

// SimMix implements service.Simulated: the mixes of the types that declare
// one, each kind prefixed by its type ("" when no type does).
func (s *Service) SimMix() string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(s.Types)) {
		t := s.Types[name]
		if t.Sim == nil {
			continue
		}
		for _, p := range strings.Split(t.Sim.Mix, ",") {
			if p = strings.TrimSpace(p); p != "" {
				parts = append(parts, name+"."+p)
			}
		}
	}
	return strings.Join(parts, ",")
}

// SimOp implements service.Simulated.
func (s *Service) SimOp(kind string, r *rand.Rand, keys, client, n int) service.Op {
	tn, on, _ := SplitKind(kind)
	t := s.Types[tn]
	key := fmt.Sprintf("%s:%d", tn, r.Intn(keys))
	if t == nil || t.Sim == nil {
		return service.Op{Kind: kind, Key: key}
	}
	if n < keys {
		// A client's first operations create the objects (most answer
		// that the object exists): operations on objects nobody created
		// yet would wait (guarded) or fail, all run long.
		on, key = KindNew, fmt.Sprintf("%s:%d", tn, n)
	}
	if on == KindNew {
		args := [][]byte{[]byte(tn)}
		if t.Sim.New != nil {
			args = append(args, t.Sim.New(r)...)
		}
		return service.Op{Kind: KindNew, Key: key, Args: args}
	}
	var args [][]byte
	if t.Sim.Args != nil {
		args = t.Sim.Args(on, r, client, n)
	}
	return service.Op{Kind: kind, Key: key, Args: args}
}
