package matchmaker

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/synod-dev/synod/service"
)

// ServiceName is the seed's Matchmaker as a Synod service (cluster files,
// `synod-lab sim --service`, SYNOD OP). Synod's own "matchmaker" (package
// service) is chapter III's nondeterministic one; this is chapter IV's,
// deterministic (the first suitable machine), with the two state objects
// whose durability a mapping chooses.
const ServiceName = "gridmatchmaker"

// Operations (SYNOD OP kind [key [arg ...]]):
//
//	advertise <machine> <cpu> <memory>   MachineAdvertise; OK
//	submit <client> <cpu> <memory>       JobSubmit; the machine, or nil when none fits
//	balance <client>                     Balance (read); an integer
//	available                            Available (read); an integer
type Synod struct{}

func init() { service.Register(Synod{}) }

// Name implements service.Service.
func (Synod) Name() string { return ServiceName }

// Validate implements service.Service.
func (Synod) Validate(op service.Op) error {
	switch op.Kind {
	case "advertise", "submit":
		if op.Key == "" || len(op.Args) != 2 {
			return fmt.Errorf("%s takes a name and two integers (cpu, memory)", op.Kind)
		}
		for _, a := range op.Args {
			if _, err := strconv.ParseInt(string(a), 10, 64); err != nil {
				return fmt.Errorf("%s: %q is not an integer", op.Kind, a)
			}
		}
		return nil
	case "balance":
		if op.Key == "" || len(op.Args) != 0 {
			return fmt.Errorf("balance takes a client")
		}
		return nil
	case "available":
		if op.Key != "" || len(op.Args) != 0 {
			return fmt.Errorf("available takes no arguments")
		}
		return nil
	}
	return fmt.Errorf("unknown %s operation %q", ServiceName, op.Kind)
}

// IsRead implements service.Service.
func (Synod) IsRead(op service.Op) bool { return op.Kind == "balance" || op.Kind == "available" }

// NewState implements service.Service: the original service (no proxies).
func (Synod) NewState() service.State { return &State{S: NewOriginalService()} }

// State is one replica's Matchmaker: Service on its two objects.
type State struct{ S *Service }

// Call runs op on s (the original service or the rewired one: the same
// code, seed IV.C.4). Validated ops only.
func Call(s *Service, op service.Op) service.Result {
	num := func(i int) int64 { n, _ := strconv.ParseInt(string(op.Args[i]), 10, 64); return n }
	switch op.Kind {
	case "advertise":
		s.MachineAdvertise(op.Key, num(0), num(1))
		return service.OK()
	case "submit":
		m, ok := s.JobSubmit(op.Key, num(0), num(1))
		if !ok {
			return service.Nil()
		}
		return service.Bytes([]byte(m))
	case "balance":
		return service.Int(s.Balance(op.Key))
	case "available":
		return service.Int(int64(s.Available()))
	}
	return service.Errorf("unknown %s operation %q", ServiceName, op.Kind)
}

// Apply implements service.State.
func (st *State) Apply(op service.Op) service.Result {
	if err := (Synod{}).Validate(op); err != nil {
		return service.Errorf("%v", err)
	}
	return Call(st.S, op)
}

type snap struct {
	Queue    *MachineQueue
	Accounts *AccountSet
}

// Snapshot implements service.State.
func (st *State) Snapshot() []byte {
	b, _ := json.Marshal(snap{st.S.Queue.(*MachineQueue), st.S.Accounts.(*AccountSet)})
	return b
}

// Restore implements service.State.
func (st *State) Restore(b []byte) error {
	s := snap{new(MachineQueue), new(AccountSet)}
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	st.S = &Service{Queue: s.Queue, Accounts: s.Accounts}
	return nil
}
