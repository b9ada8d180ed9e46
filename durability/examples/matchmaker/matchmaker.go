// Package matchmaker is the Grid Services thesis's chapter IV Matchmaker (IV.D.2): it
// keeps track of the machines available in a grid (MachineAdvertise) and
// allocates them to clients (JobSubmit), which get the first suitable
// machine or an error. Two state objects with different durability
// needs: MachineQueue (the available machines; reconstructible from the
// periodic advertisements) and AccountSet (per-client usage records for
// billing; not reconstructible). MachineAdvertise updates the queue;
// JobSubmit may update both.
//
// The four configurations of the seed's experiment are the original
// service (NewOriginalService; as a mapping, original.yaml: both kept
// nowhere) and three mappings: pb.yaml (both replicated), pbdb.yaml
// (queue replicated, accounts in the database: Figs. IV.4 and IV.5),
// db.yaml (both in the database). reconstructible.yaml keeps the queue
// nowhere (rebuilt by the next advertisements) and the accounts in the
// database. synod.go is the service as Synod serves it (gridmatchmaker).
package matchmaker

//go:generate go run ../../../cmd/synod-lab durability gen --dir . --object MachineQueue --object AccountSet --service Service --mapping pbdb.yaml

// Machine is one advertised machine.
type Machine struct {
	Name   string
	CPU    int64 // MHz
	Memory int64 // MB
}

// MachineQueue is the list of available machines, in advertisement order.
type MachineQueue struct {
	Machines []Machine
}

// Advertise adds a machine, or refreshes its resources if it is listed.
func (q *MachineQueue) Advertise(name string, cpu int64, memory int64) {
	for i := range q.Machines {
		if q.Machines[i].Name == name {
			q.Machines[i].CPU, q.Machines[i].Memory = cpu, memory
			return
		}
	}
	q.Machines = append(q.Machines, Machine{Name: name, CPU: cpu, Memory: memory})
}

// Remove takes a machine off the list (it was allocated).
func (q *MachineQueue) Remove(name string) {
	for i := range q.Machines {
		if q.Machines[i].Name == name {
			q.Machines = append(q.Machines[:i:i], q.Machines[i+1:]...)
			return
		}
	}
}

// First returns the first machine with at least cpu and memory.
func (q *MachineQueue) First(cpu int64, memory int64) (string, bool) {
	for _, m := range q.Machines {
		if m.CPU >= cpu && m.Memory >= memory {
			return m.Name, true
		}
	}
	return "", false
}

// Len returns the number of available machines.
func (q *MachineQueue) Len() int { return len(q.Machines) }

// AccountSet holds each client's balance: the resources it was charged for.
type AccountSet struct {
	Bills map[string]int64
}

// InsertBill opens a client's account (Fig. IV.5 insertBill).
func (a *AccountSet) InsertBill(clientID string, balance int64) {
	if a.Bills == nil {
		a.Bills = map[string]int64{}
	}
	a.Bills[clientID] = balance
}

// SetBill changes a client's balance (Fig. IV.5 setBill: arg[0] is the
// balance, arg[1] the client).
func (a *AccountSet) SetBill(balance int64, clientID string) {
	if a.Bills == nil {
		a.Bills = map[string]int64{}
	}
	a.Bills[clientID] = balance
}

// Balance returns a client's balance and whether it has an account.
func (a *AccountSet) Balance(clientID string) (int64, bool) {
	b, ok := a.Bills[clientID]
	return b, ok
}

// Service is the Matchmaker.
type Service struct {
	Queue    MachineQueueAPI
	Accounts AccountSetAPI
}

// MachineAdvertise records a machine's availability.
func (s *Service) MachineAdvertise(name string, cpu int64, memory int64) {
	s.Queue.Advertise(name, cpu, memory)
}

// JobSubmit allocates the first machine with at least cpu and memory to
// client and charges the client one unit per allocation; ok is false when
// no machine fits.
func (s *Service) JobSubmit(client string, cpu int64, memory int64) (machine string, ok bool) {
	m, ok := s.Queue.First(cpu, memory)
	if !ok {
		return "", false
	}
	s.Queue.Remove(m)
	if b, has := s.Accounts.Balance(client); has {
		s.Accounts.SetBill(b+1, client)
	} else {
		s.Accounts.InsertBill(client, 1)
	}
	return m, true
}

// Balance returns a client's balance.
func (s *Service) Balance(client string) int64 {
	b, _ := s.Accounts.Balance(client)
	return b
}

// Available returns the number of available machines.
func (s *Service) Available() int { return s.Queue.Len() }
