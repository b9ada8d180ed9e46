package durability_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/synod-dev/synod/durability"
	"github.com/synod-dev/synod/durability/examples/counter"
	"github.com/synod-dev/synod/durability/examples/matchmaker"
	"github.com/synod-dev/synod/wire"
)

func load(t *testing.T, path string) *durability.Mapping {
	t.Helper()
	m, err := durability.LoadMapping(path)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mm(t *testing.T, name string) *matchmaker.DurableService {
	t.Helper()
	d, err := matchmaker.NewDurableService(load(t, "examples/matchmaker/"+name))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The replication proxy: the primary's commitA buffer, applied at a
// backup, leaves the backup's objects equal to the primary's; a request
// that updates two objects ships one buffer holding both.
func TestReplicationShipsOneBufferPerRequest(t *testing.T) {
	pri, bak := mm(t, "pb.yaml"), mm(t, "pb.yaml")
	bak.Set.SetRole(durability.Backup)
	for _, m := range []string{"m1", "m2", "m3"} {
		w, err := pri.MachineAdvertise(m, 2000, 1024)
		if err != nil || len(w.Ship) != 1 || len(w.SQL) != 0 {
			t.Fatalf("advertise: work %+v err %v", w, err)
		}
		if err := bak.Set.Apply(w.Ship); err != nil {
			t.Fatal(err)
		}
	}
	got, ok, w, err := pri.JobSubmit("alice", 1000, 512)
	if err != nil || !ok || got != "m1" {
		t.Fatalf("jobSubmit = %q %v %v", got, ok, err)
	}
	if len(w.Ship) != 2 || w.Ship[0].Object == w.Ship[1].Object {
		t.Fatalf("jobSubmit touched both objects, shipped %+v", w.Ship)
	}
	// The buffer crosses the wire.
	e := &wire.Encoder{}
	durability.EncodeUpdates(e, w.Ship)
	d := wire.NewDecoder(e.B)
	ups := durability.DecodeUpdates(d)
	if err := d.Done(); err != nil || !reflect.DeepEqual(ups, w.Ship) {
		t.Fatalf("wire round trip: %+v, %v", ups, err)
	}
	if err := bak.Set.Apply(ups); err != nil {
		t.Fatal(err)
	}
	pq, bq := pri.Service.Queue.(*matchmaker.MachineQueueProxy).Object(), bak.Service.Queue.(*matchmaker.MachineQueueProxy).Object()
	pa, ba := pri.Service.Accounts.(*matchmaker.AccountSetProxy).Object(), bak.Service.Accounts.(*matchmaker.AccountSetProxy).Object()
	if !reflect.DeepEqual(pq, bq) || !reflect.DeepEqual(pa, ba) {
		t.Fatalf("backup diverged: %+v %+v, primary %+v %+v", bq, ba, pq, pa)
	}
	// recover at the backup: a role change, the state is already there.
	if w := bak.Set.Recover(); !w.Empty() {
		t.Fatalf("replicated recover asked for work %+v", w)
	}
	if bak.Service.Balance("alice") != 1 || bak.Service.Available() != 2 {
		t.Fatalf("promoted backup lost state: balance %d, available %d", bak.Service.Balance("alice"), bak.Service.Available())
	}
	// A read ships nothing.
	if _, w, _ := pri.Balance("alice"); !w.Empty() {
		t.Fatalf("a read produced work %+v", w)
	}
}

// The database proxy turns the buffer into the mapping's statements with
// the method's named arguments bound in order.
func TestDatabaseStatementsFromTemplates(t *testing.T) {
	d := mm(t, "pbdb.yaml")
	d.MachineAdvertise("m1", 2000, 1024)
	_, _, w, err := d.JobSubmit("bob", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.SQL) != 1 || len(w.Ship) != 1 {
		t.Fatalf("PB+DB jobSubmit: %+v", w)
	}
	st := w.SQL[0]
	if st.SQL != "INSERT INTO bills (clientID, balance) VALUES (?, ?)" || !reflect.DeepEqual(st.Args, []durability.Value{"bob", int64(1)}) {
		t.Fatalf("insertBill statement %v", st)
	}
	_, _, w, _ = d.JobSubmit("bob", 1, 1) // no machine left: nothing changes
	if !w.Empty() {
		t.Fatalf("a refused jobSubmit produced work %+v", w)
	}
	d.MachineAdvertise("m2", 2000, 1024)
	_, _, w, _ = d.JobSubmit("bob", 1, 1)
	// setBill(balance, clientID): the template names them the other way round.
	if got := w.SQL[0]; got.SQL != "UPDATE bills SET balance = ? WHERE clientID = ?" || !reflect.DeepEqual(got.Args, []durability.Value{int64(2), "bob"}) {
		t.Fatalf("setBill statement %v", got)
	}
}

// Reconstructible objects record nothing, and recover to empty.
func TestReconstructionRecoversEmpty(t *testing.T) {
	d := mm(t, "reconstructible.yaml")
	w, _ := d.MachineAdvertise("m1", 1, 1)
	if !w.Empty() {
		t.Fatalf("a reconstructible update produced work %+v", w)
	}
	w = d.Set.Recover()
	if d.Service.Available() != 0 {
		t.Fatal("the reconstructible queue survived recover")
	}
	if len(w.Queries) != 1 || w.Queries[0].Object != "AccountSet" {
		t.Fatalf("recover should query the accounts only: %+v", w)
	}
}

// Transactions: startTA checkpoints, the buffer is held until commitTA,
// and abortTA rolls every object back (replicated: to the checkpoint;
// reconstructible: to empty).
func TestTransactionsRollBackEveryProxy(t *testing.T) {
	d := mm(t, "pb.yaml")
	d.MachineAdvertise("m1", 1, 1)
	d.MachineAdvertise("m2", 1, 1)
	if err := d.Set.StartTA("t1"); err != nil {
		t.Fatal(err)
	}
	_, _, w, _ := d.JobSubmit("carol", 1, 1)
	if !w.Empty() {
		t.Fatalf("commitA inside a transaction produced work %+v", w)
	}
	if _, err := d.Set.AbortTA(); err != nil {
		t.Fatal(err)
	}
	if d.Service.Available() != 2 || d.Service.Balance("carol") != 0 {
		t.Fatalf("abortTA left %d machines, balance %d", d.Service.Available(), d.Service.Balance("carol"))
	}
	_ = d.Set.StartTA("t2")
	d.JobSubmit("carol", 1, 1)
	d.JobSubmit("carol", 1, 1)
	w, err := d.Set.CommitTA()
	if err != nil || len(w.Ship) != 4 {
		t.Fatalf("commitTA shipped %+v (%v), want the 4 updates of the transaction", w.Ship, err)
	}
	if err := d.Set.StartTA("t3"); err != nil {
		t.Fatal(err)
	}
	if err := d.Set.StartTA("t4"); err == nil {
		t.Fatal("a second startTA inside a transaction was accepted")
	}
}

// A snapshot instruction ships the object's state, once per request.
func TestSnapshotInstruction(t *testing.T) {
	m := load(t, "examples/counter/pb.yaml")
	m.Objects["Counter"].Methods["SetValue"] = &durability.Instruction{Keyword: durability.Snapshot}
	pri, err := counter.NewDurableService(m)
	if err != nil {
		t.Fatal(err)
	}
	bak, _ := counter.NewDurableService(m)
	v, w, _ := pri.Add()
	if v != 1 || len(w.Ship) != 1 || w.Ship[0].State == nil {
		t.Fatalf("snapshot update %+v", w.Ship)
	}
	if err := bak.Set.Apply(w.Ship); err != nil || bak.Service.Get() != 1 {
		t.Fatalf("backup value %d, %v", bak.Service.Get(), err)
	}
}

// Validation errors name the field.
func TestMappingValidation(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
		{"unknown object", "objects:\n  Counter: {mechanism: replicated, methods: {SetValue: repeat}}\n  Bogus: {mechanism: replicated}\n",
			"objects.Bogus: unknown state object"},
		{"missing object", "objects:\n  MachineQueue: {mechanism: reconstructible}\n", "objects.AccountSet: missing"},
		{"unknown mechanism", "objects:\n  Counter: {mechanism: tape}\n", "objects.Counter.mechanism: unknown mechanism \"tape\""},
		{"database missing a method", "objects:\n  Counter:\n    mechanism: database\n    recover: [{query: SELECT 1, call: SetValue}]\n",
			"objects.Counter.methods.SetValue: missing: the database mechanism needs an instruction"},
		{"unknown argument", "objects:\n  Counter:\n    mechanism: database\n    recover: [{query: SELECT 1, call: SetValue}]\n    methods: {SetValue: {sql: 'UPDATE c SET v = :v'}}\n",
			"objects.Counter.methods.SetValue.sql[0]: :v is not an argument of SetValue (:value)"},
		{"replicated with sql", "objects:\n  Counter:\n    mechanism: replicated\n    methods: {SetValue: {sql: 'UPDATE c SET v = :value'}}\n",
			"objects.Counter.methods.SetValue: the replicated mechanism takes repeat or snapshot"},
		{"not an update method", "objects:\n  Counter:\n    mechanism: replicated\n    methods: {SetValue: repeat, GetValue: repeat}\n",
			"objects.Counter.methods.GetValue: not an update method of Counter"},
		{"recover call unknown", "objects:\n  Counter:\n    mechanism: database\n    recover: [{query: SELECT 1, call: Put}]\n    methods: {SetValue: {sql: 'UPDATE c SET v = :value'}}\n",
			"objects.Counter.recover[0].call: Put is not an update method"},
		{"restore recover for replicated", "objects:\n  Counter: {mechanism: replicated, restore: recover, methods: {SetValue: repeat}}\n",
			"objects.Counter.restore: restore by recover needs the database mechanism"},
		{"unknown field", "objects:\n  Counter: {mechanism: replicated, method: {}}\n", "field method not found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := durability.ParseMapping([]byte(c.yaml))
			if err == nil {
				infos := []durability.ObjectInfo{counter.CounterInfo}
				if strings.Contains(c.yaml, "MachineQueue") {
					infos = matchmaker.ServiceObjects
				}
				err = m.Validate(infos)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
	for _, f := range []string{"examples/counter/pb.yaml", "examples/counter/db.yaml", "examples/counter/reconstructible.yaml"} {
		if err := load(t, f).Validate([]durability.ObjectInfo{counter.CounterInfo}); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	for _, f := range []string{"pb.yaml", "pbdb.yaml", "db.yaml", "reconstructible.yaml"} {
		if err := load(t, "examples/matchmaker/"+f).Validate(matchmaker.ServiceObjects); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestDialect(t *testing.T) {
	in := "UPDATE t SET a = ?, b = '?' WHERE c = ?"
	if got := durability.Dialect("pgx", in); got != "UPDATE t SET a = $1, b = '?' WHERE c = $2" {
		t.Fatalf("postgres: %s", got)
	}
	if got := durability.Dialect("sqlite", in); got != in {
		t.Fatalf("sqlite: %s", got)
	}
}
