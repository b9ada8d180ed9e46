package pbdurable

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/synod-dev/synod/durability"
	"github.com/synod-dev/synod/service"
)

// The Matchmaker on pbdurable (seed 002 IV.D.2; issue 11 item 6). Synod's
// matchmaker service (service.Matchmaker: machines, queued jobs, a
// nondeterministic choice among suitable machines) keeps its machines and
// its job queue in one opaque state, so they are one state object, State,
// as for any other service (service.go). The seed's second object, the
// billing records (AccountSet: "not reconstructible"), is Billing here: one
// record per allocation (job -> machine), written by the proxies when a
// submit, or an advertise that frees a machine for a queued job, allocates
// a machine. Billing is not read by the service's operations; it is the
// accounting the seed's experiment keeps in the database.
//
// Mappings (parameter mapping):
//
//	pb    State and Billing replicated
//	pbdb  State replicated, Billing in the database (Figs. IV.4 and IV.5)
//	db    both in the database
//	reconstructible  nothing kept (State comes back empty at a fail-over)
var billingInfo = durability.ObjectInfo{
	Name: "Billing",
	Updates: []durability.MethodInfo{{Name: "Charge", Params: []durability.Param{
		{Name: "job", Kind: durability.KindString}, {Name: "machine", Kind: durability.KindString}}}},
}

// The State object's mappings (every service: service.go) and Billing's.
const (
	mmStatePB = `
  State:
    mechanism: replicated
    methods:
      Put: repeat
`
	mmStateDB = `
  State:
    mechanism: database
    init:
      - CREATE TABLE IF NOT EXISTS synod_state (id INTEGER PRIMARY KEY, state BLOB NOT NULL)
    recover:
      - query: SELECT state FROM synod_state WHERE id = 1
        call: Put
    methods:
      Put:
        sql: INSERT INTO synod_state (id, state) VALUES (1, :state) ON CONFLICT (id) DO UPDATE SET state = excluded.state
`
	mmBillingPB = `
  Billing:
    mechanism: replicated
    methods:
      Charge: repeat
`
	mmBillingDB = `
  Billing:
    mechanism: database
    init:
      - CREATE TABLE IF NOT EXISTS synod_billing (job TEXT PRIMARY KEY, machine TEXT NOT NULL)
    recover:
      - query: SELECT job, machine FROM synod_billing
        call: Charge
    methods:
      Charge:
        sql: INSERT INTO synod_billing (job, machine) VALUES (:job, :machine) ON CONFLICT (job) DO UPDATE SET machine = excluded.machine
`
	mmReconstructible = `
  State:
    mechanism: reconstructible
  Billing:
    mechanism: reconstructible
`
)

// matchmakerMappings are the Matchmaker's mappings, by name.
var matchmakerMappings = map[string]string{
	"pb":              "service: matchmaker\nobjects:" + mmStatePB + mmBillingPB,
	"pbdb":            "service: matchmaker\nobjects:" + mmStatePB + mmBillingDB,
	"db":              "service: matchmaker\nobjects:" + mmStateDB + mmBillingDB,
	"reconstructible": "service: matchmaker\nobjects:" + mmReconstructible,
}

// bills is the Billing object: the machine each job was allocated.
type bills struct {
	Jobs map[string]string
}

func (b *bills) charge(job, machine string) {
	if b.Jobs == nil {
		b.Jobs = map[string]string{}
	}
	b.Jobs[job] = machine
}

func (b *bills) hooks() durability.Hooks {
	return durability.Hooks{
		Replay: func(method string, args []durability.Value) error {
			if method != "Charge" || len(args) != 2 {
				return fmt.Errorf("Billing has no update method %s/%d", method, len(args))
			}
			job, err := durability.AsString(args[0])
			if err != nil {
				return err
			}
			m, err := durability.AsString(args[1])
			if err != nil {
				return err
			}
			b.charge(job, m)
			return nil
		},
		Reset: func() { b.Jobs = nil },
		Save:  func() ([]byte, error) { return json.Marshal(b) },
		Load: func(x []byte) error {
			b.Jobs = nil
			return json.Unmarshal(x, b)
		},
	}
}

// allocation is the job and machine a Matchmaker write allocated, if any:
// a submit answered with a machine, or an advertise answered with the
// queued job that took the machine.
func allocation(op service.Op, res service.Result) (job, machine string, ok bool) {
	if res.Type != service.ResultBytes {
		return "", "", false
	}
	switch op.Kind {
	case "submit":
		return op.Key, string(res.Bytes), true
	case "advertise":
		return string(res.Bytes), op.Key, true
	}
	return "", "", false
}

// billingDump lists the Billing records, for Dump.
func (b *bills) String() string {
	jobs := make([]string, 0, len(b.Jobs))
	for j, m := range b.Jobs {
		jobs = append(jobs, j+"->"+m)
	}
	slices.Sort(jobs)
	return fmt.Sprint(jobs)
}
