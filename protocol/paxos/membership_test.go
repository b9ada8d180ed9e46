package paxos

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/service"
)

// newMemberCluster boots n1..nN as the bootstrap configuration and keeps
// spares more nodes (known to the runtime, outside the configuration) down
// until a test starts them with join.
func newMemberCluster(t *testing.T, n, spares int, params map[string]string) *cluster {
	return newMemberClusterOf(t, "paxos", n, spares, params)
}

// newMemberClusterOf is newMemberCluster running protocol proto.
func newMemberClusterOf(t *testing.T, proto string, n, spares int, params map[string]string) *cluster {
	p := map[string]string{}
	for k, v := range params {
		p[k] = v
	}
	var boot []string
	for i := 1; i <= n; i++ {
		boot = append(boot, fmt.Sprintf("n%d", i))
	}
	p["members"] = strings.Join(boot, ",")
	c := newClusterOf(t, proto, n, "kv", p)
	for i := n + 1; i <= n+spares; i++ {
		id := automaton.NodeID(fmt.Sprintf("n%d", i))
		c.AddNode(id)
	}
	return c
}

func (c *cluster) members(id automaton.NodeID) []automaton.NodeID {
	return c.node(id).Status().Members
}

// admin submits a membership change at node at and ticks the leader until
// it is answered (the learner of an add catches up over heartbeats).
func (c *cluster) admin(at, leader automaton.NodeID, seq uint64, op service.Op) (service.Result, bool) {
	id := automaton.RequestID{Client: 1 << 40, Seq: seq}
	r, ok := c.do(at, id, op, 0)
	for i := 0; !ok && i < 20; i++ {
		c.fire(leader, tmTick)
		r, ok = c.Response(id)
	}
	return r, ok
}

func mustOK(t *testing.T, what string, r service.Result, ok bool) {
	t.Helper()
	if !ok || r.IsErr() {
		t.Fatalf("%s: answered=%v %v", what, ok, r)
	}
}

func (c *cluster) mustDo(what string, at automaton.NodeID, id automaton.RequestID, op service.Op) {
	c.t.Helper()
	r, ok := c.do(at, id, op, 0)
	mustOK(c.t, what, r, ok)
}

// memberOf finds node id in a Members output.
func memberOf(ms []automaton.Member, id automaton.NodeID) (automaton.Member, bool) {
	for _, m := range ms {
		if m.ID == id {
			return m, true
		}
	}
	return automaton.Member{}, false
}

func ids(s ...string) []automaton.NodeID {
	out := make([]automaton.NodeID, len(s))
	for i, x := range s {
		out[i] = automaton.NodeID(x)
	}
	return out
}

// Adding a node: it refuses clients while outside the configuration, catches
// up as a learner, and is in the configuration of every replica after its
// add executed, with the data. Its add instance k is decided by a majority
// of the old configuration; instance k+1 needs a majority of the new one.
func TestMemberAddQuorumSwitchesAfterTheChange(t *testing.T) {
	c := newMemberCluster(t, 3, 1, map[string]string{"window": "2"})
	c.elect("n1")
	for i := 0; i < 5; i++ {
		c.mustDo("write", "n2", automaton.RequestID{Client: 7, Seq: uint64(i + 1)}, set(fmt.Sprint("k", i), "v"))
	}
	c.Boot("n4")
	r, ok := c.do("n4", automaton.RequestID{Client: 8, Seq: 1}, get("k0"), automaton.ReadLocal)
	if !ok || !r.IsErr() || !strings.Contains(r.Err, "not a member") {
		t.Fatalf("a node outside the configuration answered a client: %v %v", ok, r)
	}
	// n4 catches up as a learner; then n3 and n4 go down: the add (instance
	// k) is still chosen by n1+n2, a majority of {n1,n2,n3}.
	id := automaton.RequestID{Client: 1 << 40, Seq: 1}
	c.Step("n1", automaton.ClientRequest{Req: automaton.Request{ID: id, Op: automaton.MemberAdd("n4", "p4", "c4")}})
	c.DeliverAll()
	if _, done := c.Response(id); done {
		t.Fatal("add answered before its learner caught up")
	}
	for i := 0; i < 5 && c.node("n4").Status().Executed < c.node("n1").Status().Executed; i++ {
		c.fire("n1", tmTick)
	}
	if c.node("n4").Status().Executed != c.node("n1").Status().Executed {
		t.Fatalf("learner did not catch up: %+v vs %+v", c.node("n4").Status(), c.node("n1").Status())
	}
	// The leader tells its runtime to talk to the learner (addresses from
	// the add), not yet as a voter.
	if m, ok := memberOf(c.Members("n1"), "n4"); !ok || m.Voting || m.Peer != "p4" || m.Client != "c4" {
		t.Fatalf("n1's Members output while n4 learns: %+v", c.Members("n1"))
	}
	// One more heartbeat: the learner's ack makes the leader propose the
	// add. n3 and n4 go down the moment it is proposed.
	if !c.FireTimer("n1", tmTick) {
		t.Fatal("the leader n1 has no tick timer")
	}
	for c.DeliverOne() {
		if len(c.node("n1").changes) > 0 {
			c.Crash("n3")
			c.Crash("n4")
		}
	}
	if c.Up("n4") {
		t.Fatal("the add was not proposed after the learner caught up")
	}
	res, done := c.Response(id)
	mustOK(t, "add with n1+n2 of {n1,n2,n3}", res, done)
	k := c.node("n1").Status().ConfEpoch
	if want := ids("n1", "n2", "n3", "n4"); !reflect.DeepEqual(c.members("n1"), want) || k == 0 {
		t.Fatalf("members %v epoch %d, want %v", c.members("n1"), k, want)
	}
	if m, ok := memberOf(c.Members("n1"), "n4"); !ok || !m.Voting {
		t.Fatalf("n1's Members output after the add: %+v", c.Members("n1"))
	}
	// Instance k+1 needs 3 of {n1..n4}: n1+n2 are not enough.
	if _, ok := c.do("n1", automaton.RequestID{Client: 7, Seq: 100}, set("after", "x"), 0); ok {
		t.Fatal("a write was chosen by 2 of 4 members")
	}
	c.Restart("n4")
	for i := 0; i < 10; i++ {
		c.fire("n1", tmTick)
	}
	if r, ok := c.Response(automaton.RequestID{Client: 7, Seq: 100}); !ok || r.IsErr() {
		t.Fatalf("write with n1+n2+n4 of 4: %v %v", ok, r)
	}
	if st := c.node("n4").Status(); !st.Member || !reflect.DeepEqual(st.Members, ids("n1", "n2", "n3", "n4")) {
		t.Fatalf("n4 after its add: %+v", st)
	}
	if r, ok := c.do("n4", automaton.RequestID{Client: 8, Seq: 2}, get("k3"), automaton.ReadLocal); !ok || string(r.Bytes) != "v" {
		t.Fatalf("n4 lacks the data written before it joined: %v %v", ok, r)
	}
}

// An add waits for its learner's answer: with a log shorter than one
// window, a learner that never acknowledged a heartbeat (down, paused, cut
// off) is not caught up, so its add is not proposed (the old rule, "its
// acknowledged prefix within one window of the leader's", held at once and
// made {n1..n4} with n4 absent: issue 33, the sharded simulation's seed 3
// on 5 machines). Once n4 answers, the add goes through.
func TestMemberAddWaitsForTheLearnersAnswer(t *testing.T) {
	c := newMemberCluster(t, 3, 1, nil)
	c.elect("n1")
	c.mustDo("write", "n2", automaton.RequestID{Client: 7, Seq: 1}, set("k", "v"))
	if up, w := c.node("n1").chosenUpTo, c.node("n1").prm.Window; up >= uint64(w) {
		t.Fatalf("the log holds %d instances, not fewer than a window (%d)", up, w)
	}
	id := automaton.RequestID{Client: 1 << 40, Seq: 1}
	c.Step("n1", automaton.ClientRequest{Req: automaton.Request{ID: id, Op: automaton.MemberAdd("n4", "p4", "c4")}})
	c.DeliverAll()
	for i := 0; i < 5; i++ {
		c.fire("n1", tmTick)
	}
	if n := len(c.node("n1").changes); n > 0 {
		t.Fatalf("the add of n4, which never answered, was proposed (%d changes in flight)", n)
	}
	if _, done := c.Response(id); done {
		t.Fatal("the add of n4 was answered although n4 never answered")
	}
	if got := c.members("n1"); !reflect.DeepEqual(got, ids("n1", "n2", "n3")) {
		t.Fatalf("n1's members %v while n4 is down", got)
	}
	c.Boot("n4")
	for i := 0; i < 5; i++ {
		if _, done := c.Response(id); done {
			break
		}
		c.fire("n1", tmTick)
	}
	res, done := c.Response(id)
	mustOK(t, "add of n4 once it answers", res, done)
	if got := c.members("n1"); !reflect.DeepEqual(got, ids("n1", "n2", "n3", "n4")) {
		t.Fatalf("n1's members %v after the add", got)
	}
}

// Removing the leader: the change executes, the old leader steps down and
// refuses clients, and the remaining members elect a leader and serve with
// majorities of the new configuration.
func TestMemberRemoveLeader(t *testing.T) {
	c := newMemberCluster(t, 3, 0, nil)
	c.elect("n1")
	c.mustDo("write", "n1", automaton.RequestID{Client: 7, Seq: 1}, set("a", "1"))
	r, ok := c.admin("n2", "n1", 1, automaton.MemberRemove("n1"))
	mustOK(t, "remove the leader", r, ok)
	st := c.node("n1").Status()
	if st.Role != "follower" || st.Member {
		t.Fatalf("removed leader: %+v", st)
	}
	r, ok = c.do("n1", automaton.RequestID{Client: 7, Seq: 2}, set("a", "2"), 0)
	if !ok || !r.IsErr() || !strings.Contains(r.Err, "removed") {
		t.Fatalf("removed node answered a write: %v %v", ok, r)
	}
	c.tickAll()
	c.elect("n2")
	if got := c.members("n3"); !reflect.DeepEqual(got, ids("n2", "n3")) {
		t.Fatalf("n3's members %v", got)
	}
	c.mustDo("write after the removal", "n3", automaton.RequestID{Client: 7, Seq: 3}, set("a", "3"))
	// {n2,n3}: both are needed now.
	c.Crash("n3")
	if _, ok := c.do("n2", automaton.RequestID{Client: 7, Seq: 4}, set("a", "4"), 0); ok {
		t.Fatal("a write was chosen by 1 of 2 members")
	}
}

// Removing the leader hands off: the removed leader names the remaining
// member that acknowledged the most (n2; ties go to the lower number) in a
// TakeOver, n2 runs phase 1 at once, and n3 promises although it heard n1
// alive within election_timeout (its "alive" timer is still set): n1 is not
// in the configuration n3 executed. No election or alive timer fires here;
// without the hand-off nobody would stand for election.
func TestMemberRemoveLeaderHandsOff(t *testing.T) {
	c := newMemberCluster(t, 3, 0, nil)
	c.elect("n1")
	c.mustDo("write", "n2", automaton.RequestID{Client: 7, Seq: 1}, set("a", "1"))
	c.tickAll() // heartbeats: every node hears n1 alive
	for _, id := range ids("n2", "n3") {
		if !c.timerSet(id, tmAlive) {
			t.Fatalf("%s has no alive timer after n1's heartbeat", id)
		}
	}
	r, ok := c.admin("n3", "n1", 1, automaton.MemberRemove("n1"))
	mustOK(t, "remove the leader", r, ok)
	if st := c.node("n1").Status(); st.Role != "follower" || st.Member {
		t.Fatalf("removed leader: %+v", st)
	}
	st2, st3 := c.node("n2").Status(), c.node("n3").Status()
	if st2.Role != "leader" || st3.Leader != "n2" {
		t.Fatalf("no hand-off to n2: n2 %+v, n3 %+v", st2, st3)
	}
	if !c.node("n1").Status().Ballot.Less(st2.Ballot) {
		t.Fatalf("n2's ballot %v is not above n1's %v", st2.Ballot, c.node("n1").Status().Ballot)
	}
	if !c.timerSet("n3", tmAlive) {
		t.Fatal("n3's alive timer is gone: the test no longer shows that the protection was dropped")
	}
	// The new leader serves with n2+n3, a majority of {n2,n3}, at once.
	c.mustDo("write after the hand-off", "n3", automaton.RequestID{Client: 7, Seq: 2}, set("a", "2"))
	if r, ok := c.do("n2", automaton.RequestID{Client: 8, Seq: 1}, get("a"), automaton.ReadDefault); !ok || string(r.Bytes) != "2" {
		t.Fatalf("read after the hand-off: %v %v", ok, r)
	}
	// A stale TakeOver (from n1's old ballot, below n3's promise now) is ignored.
	stale := (&message{Kind: kindTakeOver, Ballot: c.node("n1").Status().Ballot, Commit: 1, OK: true}).marshal()
	c.Step("n3", automaton.PeerMessage{From: "n1", Msg: stale})
	c.DeliverAll()
	if st := c.node("n3").Status(); st.Role != "follower" || st.Leader != "n2" || c.node("n2").Status().Role != "leader" {
		t.Fatalf("a stale TakeOver disturbed the new leader: n3 %+v", st)
	}
}

// The hand-off survives a lost TakeOver and a late heartbeat of the removed
// leader: n3 never gets its TakeOver (it has not executed the removal when
// n2's Prepare comes, and refuses), but it fetches the chosen instances the
// Prepare shows n2 has, and grants n2's Prepare retransmitted on n2's next
// heartbeat tick; a heartbeat n1 sent before its removal, delivered to the
// candidate n2 late, does not make it give up. Still no election timer.
func TestMemberRemoveLeaderHandOffLostTakeOver(t *testing.T) {
	c := newMemberCluster(t, 3, 0, nil)
	c.elect("n1")
	c.mustDo("write", "n2", automaton.RequestID{Client: 7, Seq: 1}, set("a", "1"))
	var late *harness.Message
	if !c.FireTimer("n1", tmTick) {
		t.Fatal("the leader n1 has no tick timer")
	}
	id := automaton.RequestID{Client: 1 << 40, Seq: 1}
	c.Step("n1", automaton.ClientRequest{Req: automaton.Request{ID: id, Op: automaton.MemberRemove("n1")}})
	for m, ok := c.Pop(); ok; m, ok = c.Pop() {
		pm, err := unmarshal(m.Msg)
		if err != nil {
			t.Fatal(err)
		}
		if late == nil && m.From == "n1" && m.To == "n2" && pm.Kind == kindHeartbeat {
			late = &m // held back
			continue
		}
		if pm.Kind == kindTakeOver && m.To == "n3" {
			continue // lost
		}
		c.DeliverMessage(m)
	}
	r, ok := c.Response(id)
	mustOK(t, "remove the leader", r, ok)
	if st := c.node("n2").Status(); st.Role != "candidate" {
		t.Fatalf("n2 after the TakeOver with n3's promise missing: %+v", st)
	}
	if st := c.node("n3").Status(); !reflect.DeepEqual(st.Members, ids("n2", "n3")) {
		t.Fatalf("n3 did not catch up to the removal from the candidate's Prepare: %+v", st)
	}
	c.DeliverMessage(*late)
	c.DeliverAll()
	if st := c.node("n2").Status(); st.Role != "candidate" {
		t.Fatalf("n2 gave up its candidacy for a removed leader's late heartbeat: %+v", st)
	}
	c.fire("n2", tmTick)
	if st := c.node("n2").Status(); st.Role != "leader" {
		t.Fatalf("n2 not elected after its retransmitted Prepare: %+v", st)
	}
	c.mustDo("write after the hand-off", "n3", automaton.RequestID{Client: 7, Seq: 2}, set("a", "2"))
}

// A follower keeps protecting a live leader that is still a member: a
// Prepare from another member is refused while n1 leads (the hand-off rule
// only drops the protection for a leader outside the executed configuration).
func TestFollowerStillProtectsAMemberLeader(t *testing.T) {
	c := newMemberCluster(t, 3, 0, nil)
	c.elect("n1")
	c.tickAll()
	c.fire("n2", tmAlive) // n2 alone stops hearing n1 and runs
	c.fire("n2", tmElection)
	if st := c.node("n2").Status(); st.Role != "candidate" {
		t.Fatalf("n2 did not run: %+v", st)
	}
	if st := c.node("n2").Status(); st.Role == "leader" {
		t.Fatalf("n2 was elected while n1 led: %+v", st)
	}
}

// Replacing a dead node: remove it, add a fresh one; the cluster serves with
// the dead node gone for good, and the configuration survives restarts from
// the records, also when it is only in a snapshot.
func TestMemberReplaceDeadNodeAndRestart(t *testing.T) {
	c := newMemberCluster(t, 3, 1, map[string]string{"snapshot_every": "2"})
	c.elect("n1")
	c.Crash("n3")
	r, ok := c.admin("n1", "n1", 1, automaton.MemberRemove("n3"))
	mustOK(t, "remove dead n3", r, ok)
	c.Boot("n4")
	r, ok = c.admin("n2", "n1", 2, automaton.MemberAdd("n4", "p4", "c4"))
	mustOK(t, "add n4", r, ok)
	c.tickAll() // n4 learns that its add executed
	for i := 0; i < 6; i++ {
		c.mustDo("write", "n4", automaton.RequestID{Client: 7, Seq: uint64(i + 1)}, set("x", fmt.Sprint(i)))
	}
	want := ids("n1", "n2", "n4")
	if got := c.members("n2"); !reflect.DeepEqual(got, want) {
		t.Fatalf("members %v, want %v", got, want)
	}
	if r, ok := c.admin("n1", "n1", 3, automaton.MemberAdd("n4", "p4", "c4")); !ok || !r.IsErr() || !strings.Contains(r.Err, "already") {
		t.Fatalf("second add of n4: %v %v", ok, r)
	}
	for _, id := range ids("n1", "n2", "n4") {
		c.Crash(id)
		c.Restart(id)
		if _, ok := c.Disk(id)[recSnapshot]; !ok {
			t.Fatalf("%s has no snapshot with snapshot_every=2", id)
		}
		if got := c.members(id); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s after restart: members %v, want %v", id, got, want)
		}
	}
	c.elect("n4")
	c.mustDo("write under the new leader n4", "n2", automaton.RequestID{Client: 7, Seq: 50}, set("y", "1"))
}

// A candidate that finds an add in the promises needs a majority of the
// configuration it makes as well: n1 chose "add n4" with n2 and crashed;
// n2 (knowing only that it accepted it) needs n4's promise besides n3's.
func TestPhase1NeedsTheNewConfiguration(t *testing.T) {
	c := newMemberCluster(t, 3, 1, nil)
	c.elect("n1")
	c.Boot("n4")
	id := automaton.RequestID{Client: 1 << 40, Seq: 1}
	c.Step("n1", automaton.ClientRequest{Req: automaton.Request{ID: id, Op: automaton.MemberAdd("n4", "p4", "c4")}})
	c.DeliverAll()
	c.Crash("n3")
	for i := 0; i < 5; i++ {
		if _, done := c.Response(id); done {
			break
		}
		c.fire("n1", tmTick)
	}
	if r, ok := c.Response(id); !ok || r.IsErr() {
		t.Fatalf("add: %v %v", ok, r)
	}
	if c.node("n2").Status().ConfEpoch != 0 {
		t.Skip("n2 learnt the commit already; the scenario needs it not to")
	}
	c.Crash("n1")
	c.Restart("n3")
	c.Crash("n4")
	for _, o := range ids("n2", "n3") {
		c.fire(o, tmAlive)
	}
	c.fire("n2", tmElection)
	if st := c.node("n2").Status(); st.Role == "leader" {
		t.Fatalf("n2 led with n2+n3, 2 of the 4 members its promises showed: %+v", st)
	}
	c.Restart("n4")
	c.fire("n4", tmAlive)
	c.fire("n2", tmTick) // retransmits the Prepare
	if st := c.node("n2").Status(); st.Role != "leader" {
		t.Fatalf("n2 with n2+n3+n4: %+v", st)
	}
	if got := c.members("n2"); !reflect.DeepEqual(got, ids("n1", "n2", "n3", "n4")) {
		t.Fatalf("members %v", got)
	}
}

// Changes are validated in the log; bad syntax is refused at once.
func TestMemberChangeErrors(t *testing.T) {
	c := newMemberCluster(t, 1, 0, nil)
	c.elect("n1")
	r, ok := c.admin("n1", "n1", 1, automaton.MemberRemove("n1"))
	if !ok || !strings.Contains(r.Err, "last member") {
		t.Fatalf("removing the last member: %v %v", ok, r)
	}
	r, ok = c.admin("n1", "n1", 2, automaton.MemberRemove("n9"))
	if !ok || !strings.Contains(r.Err, "not a member") {
		t.Fatalf("removing a non-member: %v %v", ok, r)
	}
	r, ok = c.admin("n1", "n1", 3, service.Op{Kind: automaton.MemberOpKind, Key: "add", Args: [][]byte{[]byte("n2")}})
	if !ok || !strings.Contains(r.Err, "needs id, peer address and client address") {
		t.Fatalf("add without addresses: %v %v", ok, r)
	}
}

func TestChangeValueAndConfCodec(t *testing.T) {
	v := encodeChange(cmd{ID: automaton.RequestID{Client: 3, Seq: 4}, Op: automaton.MemberAdd("n7", "h:1", "h:2")})
	ch, ok := valueChange(v)
	if !ok || !ch.add || ch.id != "n7" || ch.peer != "h:1" || ch.client != "h:2" {
		t.Fatalf("change round trip: %v %+v", ok, ch)
	}
	if _, ok := valueChange(noop); ok {
		t.Fatal("no-op read as a change")
	}
	m := newMachine(service.KV{}, 10, bootstrapConf(ids("a", "b")))
	m.apply(cmd{ID: automaton.RequestID{Client: 1, Seq: 1}, Op: automaton.MemberAdd("c", "p", "q")}, 5)
	snap := m.snapshot(5)
	m2 := newMachine(service.KV{}, 10, bootstrapConf(ids("x")))
	if _, err := m2.restore(snap); err != nil {
		t.Fatal(err)
	}
	if m2.conf.String() != "a b c" || m2.conf.epoch != 5 || m2.conf.get("c").Num != 3 || m2.conf.nextNum != 4 {
		t.Fatalf("restored configuration %v epoch %d", m2.conf, m2.conf.epoch)
	}
}

// After an add, instance k+1 needs a majority of the new configuration:
// with n3 and n4 down, n1+n2 (2 of 4) do not decide a write. The broken
// variant paxos-broken-bootquorum counts majorities of the bootstrap
// configuration and does (the simulator catches it: sim/membership_test.go).
func TestBootQuorumVariantDecidesWithTheOldMajority(t *testing.T) {
	for _, p := range []protocol{{Capabilities: capabilities("paxos", "")}, {bootQuorum: true, Capabilities: capabilities("paxos-broken-bootquorum", "")}} {
		c := newMemberClusterOf(t, p.Protocol, 3, 1, nil)
		c.Boot("n4")
		c.elect("n1")
		r, ok := c.admin("n1", "n1", 1, automaton.MemberAdd("n4", "p4", "c4"))
		mustOK(t, p.Protocol+": add n4", r, ok)
		c.Crash("n3")
		c.Crash("n4")
		_, decided := c.do("n1", automaton.RequestID{Client: 7, Seq: 1}, set("k", "v"), 0)
		if decided != p.bootQuorum {
			t.Errorf("%s: a write with n1+n2 of {n1,n2,n3,n4} answered=%v", p.Protocol, decided)
		}
	}
}

func TestTakeOverCodec(t *testing.T) {
	for _, ok := range []bool{true, false} {
		m := &message{Kind: kindTakeOver, Ballot: Ballot{Round: 7, Node: 3}, Commit: 1 << 40, OK: ok}
		got, err := unmarshal(m.marshal())
		if err != nil || !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip: %+v %v, want %+v", got, err, m)
		}
		if _, err := unmarshal(m.marshal()[:4]); err == nil {
			t.Fatal("truncated TakeOver decoded")
		}
	}
}

// A removal is answered only once a majority of the configuration it makes
// knows it chosen (settle.go): the replacement of a dead n1 by n4 (add n4,
// remove n1) under leader n2, then n2 crashes the moment the removal is
// answered. n3 and n4, two of the new configuration {n2, n3, n4}, must
// elect a leader and take a write.
//
// On the old code (answered when the leader executed it): FAIL, the answer
// leaves before any commit notice, n3 and n4 are still in {n1, n2, n3, n4}
// and stay candidates needing three promises of it (the group has no
// leader until n2 returns).
func TestMemberRemoveAnsweredWhenTheNewMajorityKnows(t *testing.T) {
	c := newMemberCluster(t, 3, 1, nil)
	c.elect("n2")
	c.mustDo("write", "n3", automaton.RequestID{Client: 7, Seq: 1}, set("a", "1"))
	c.Crash("n1")
	c.Boot("n4")
	r, ok := c.admin("n3", "n2", 1, automaton.MemberAdd("n4", "p4", "c4"))
	mustOK(t, "add n4", r, ok)
	c.tickAll()
	id := automaton.RequestID{Client: 1 << 40, Seq: 2}
	c.Submit("n2", automaton.Request{ID: id, Op: automaton.MemberRemove("n1")})
	for i := 0; i < 10; i++ {
		c.DeliverAll()
		if _, done := c.Response(id); done {
			break
		}
		c.fire("n2", tmTick)
	}
	r, ok = c.Response(id)
	mustOK(t, "remove n1", r, ok)
	c.Crash("n2") // at once: no further heartbeat
	for i := 0; i < 20 && c.node("n3").Status().Role != "leader" && c.node("n4").Status().Role != "leader"; i++ {
		for _, o := range ids("n3", "n4") {
			c.FireAll(o)
			c.DeliverAll()
		}
	}
	var l automaton.NodeID
	for _, o := range ids("n3", "n4") {
		if st := c.node(o).Status(); st.Role == "leader" {
			l = o
		}
	}
	if l == "" {
		t.Fatalf("no leader among n3, n4 after the removal was answered and n2 crashed: n3 %+v, n4 %+v",
			c.node("n3").Status(), c.node("n4").Status())
	}
	if got := c.members(l); !reflect.DeepEqual(got, ids("n2", "n3", "n4")) {
		t.Fatalf("leader %s: members %v", l, got)
	}
	c.mustDo("write after the leader's crash", "n3", automaton.RequestID{Client: 7, Seq: 2}, set("a", "2"))
}
