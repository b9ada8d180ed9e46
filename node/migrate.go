package node

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/shard"
)

// Online slot migration's runtime (issue 33 item 3): the driver machine
// (shard.Machine, pure) run by the placement namespace's leader, each of
// its actions done as one atomic group in one group's log (or the
// placement namespace's); and the operator's commands (CLUSTER MIGRATE,
// CLUSTER MIGRATION: gateway/cluster.go; `synod cluster migrate`).
//
// Decisions:
//   - The driver runs on the placement leader, so that a migration has one
//     driver while the placement namespace has one leader; a deposed leader
//     whose driver still runs is fenced by the token (package shard).
//     When this node stops leading, its driver stops at its next action.
//   - One migration at a time per sharded namespace.
//   - An action that fails (timeout, a leader change in a group, a
//     fenced token) stops the machine; a new one starts from the saved
//     record after driveRetry, with the next token. So a kill -9 of either
//     group's leader costs one restart of the phase it was in, once the
//     group has a leader again.
//   - Values travel as KV's DUMP payload with the key's PTTL, imported with
//     RESTORE ... REPLACE: every type, and expiry, as relative time (a
//     copied key lives up to one copy's latency longer).

// driveRetry is how long a stopped driver waits before it starts again.
const driveRetry = 500 * time.Millisecond

type driveState struct {
	mu      sync.Mutex
	running map[string]bool
	// held counts the times this node's driver decided to hold still for
	// an operator's pause (a "paused" wait). The machine saves its
	// progress before it holds, so once held has grown the saved record
	// is the one a pause keeps (TestMigrateControl waits on it rather
	// than on the clock).
	held atomic.Int64
}

// leadsPlacement reports whether this node leads the placement namespace.
func (n *Node) leadsPlacement() bool {
	l := n.loop(config.PlacementName)
	if l == nil {
		return false
	}
	p := l.leader.Load()
	return p != nil && *p == n.id
}

// maybeDrive starts s's driver when this node leads the placement
// namespace and a migration is under way.
func (n *Node) maybeDrive(s *shardedNS) {
	if !s.view().active() || !n.leadsPlacement() {
		return
	}
	n.drive.mu.Lock()
	defer n.drive.mu.Unlock()
	if n.drive.running == nil {
		n.drive.running = map[string]bool{}
	}
	if n.drive.running[s.ns.Name] {
		return
	}
	n.drive.running[s.ns.Name] = true
	n.bg.Add(1)
	go n.driveLoop(s)
}

// driveLoop runs machines for s's migration until it ends or this node
// stops leading the placement namespace.
func (n *Node) driveLoop(s *shardedNS) {
	defer n.bg.Done()
	defer func() {
		n.drive.mu.Lock()
		n.drive.running[s.ns.Name] = false
		n.drive.mu.Unlock()
	}()
	ctx, cancel := n.untilStop(context.Background())
	defer cancel()
	for n.leadsPlacement() && ctx.Err() == nil {
		rec, ver, err := n.readMigration(ctx, s)
		if err == nil && (rec == nil || rec.Phase.Finished()) {
			n.nudgePlacement()
			return
		}
		if err == nil {
			err = n.runMachine(ctx, s, *rec, ver)
		}
		if err != nil {
			n.log.Info("migration driver stopped; restarting", "namespace", s.ns.Name, "reason", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(driveRetry):
		}
	}
}

func (n *Node) readMigration(ctx context.Context, s *shardedNS) (*shard.Migration, uint64, error) {
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rs, err := n.placementDo(c, kvOp("get", "mig/"+s.ns.Name), kvOp("version", "mig/"+s.ns.Name))
	if err != nil {
		return nil, 0, err
	}
	if rs[0].Type != service.ResultBytes {
		return nil, uint64(rs[1].Int), nil
	}
	m, err := shard.ParseMigration(string(rs[0].Bytes))
	return &m, uint64(rs[1].Int), err
}

// runMachine drives one machine until it stops.
func (n *Node) runMachine(ctx context.Context, s *shardedNS, rec shard.Migration, ver uint64) error {
	m := shard.NewMachine(rec)
	for {
		if !n.leadsPlacement() {
			return errors.New("no longer the placement leader")
		}
		a := m.Next(s.view().ctl)
		if a.Kind == shard.ActWait && a.Reason == "paused" {
			n.drive.held.Add(1)
		}
		if a.Kind == shard.ActStop {
			if m.Rec.Phase.Finished() {
				n.log.Info("migration ended", "namespace", s.ns.Name, "id", m.Rec.ID, "phase", m.Rec.Phase, "keys", m.Rec.Keys, "bytes", m.Rec.Bytes, "backoffs", m.Backoffs, "backoff_s", m.BackoffWait)
				n.nudgePlacement()
				return nil
			}
			return errors.New(a.Reason)
		}
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		t0 := time.Now()
		o := n.act(c, s, a, &ver)
		cancel()
		if a.Kind == shard.ActImport {
			o.Took = time.Since(t0).Seconds() // the copy's back-off (shard.Machine.Backoff)
		}
		m.Apply(o)
		if a.Kind == shard.ActSave || a.Kind == shard.ActFlip {
			n.nudgePlacement()
		}
	}
}

// groupDo runs ops as one atomic group, a request of this node's own, on
// group gi of s (here or forwarded).
func (n *Node) groupDo(ctx context.Context, s *shardedNS, gi int, ops []service.Op) ([]service.Result, error) {
	rs, err := n.groupRun(ctx, s, gi, ops) // txn.go
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		if service.IsGuardFailure(r) {
			return nil, errors.New(r.Err)
		}
	}
	return rs, nil
}

// act does one driver action and returns its outcome.
func (n *Node) act(ctx context.Context, s *shardedNS, a shard.Action, ver *uint64) (o shard.Outcome) {
	fail := func(err error) shard.Outcome { return shard.Outcome{Err: err.Error()} }
	key := func(k string) string { return k + "/" + s.ns.Name }
	switch a.Kind {
	case shard.ActSave:
		rs, err := n.placementDo(ctx, kvOp(service.GuardKind, key("mig"), "version", strconv.FormatUint(*ver, 10)),
			kvOp("set", key("mig"), a.Rec.Encode()), kvOp("version", key("mig")))
		if err != nil {
			return fail(err)
		}
		if service.IsGuardFailure(rs[0]) {
			return shard.Outcome{Err: "the migration record changed (another driver)"}
		}
		*ver = uint64(rs[2].Int)
	case shard.ActSetState, shard.ActScan, shard.ActDump, shard.ActImport, shard.ActTake, shard.ActClearTaken, shard.ActDelete:
		// The action's atomic group in its group's log (service/kv_migrate.go).
		rs, err := n.groupDo(ctx, s, a.Group, service.MigrationOps(a))
		if err != nil {
			return fail(err)
		}
		o, next := service.MigrationOutcome(a, rs)
		if next != nil && o.Err == "" {
			if _, err := n.groupDo(ctx, s, a.Group, next); err != nil {
				return fail(err)
			}
		}
		return o
	case shard.ActFlip:
		if err := n.flip(ctx, s, a.Slots, a.Group); err != nil {
			return fail(err)
		}
	case shard.ActWait:
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(min(a.Wait, 5) * float64(time.Second))):
		}
	}
	return o
}

// flip records in the placement namespace that slots belong to group to,
// at the next epoch (nothing when they already do).
func (n *Node) flip(ctx context.Context, s *shardedNS, slots []shard.Range, to int) error {
	key := "map/" + s.ns.Name
	rs, err := n.placementDo(ctx, kvOp("get", key), kvOp("version", key))
	if err != nil {
		return err
	}
	p := shard.Placement{Epoch: 1, Groups: initialView(s.groups).groups}
	if rs[0].Type == service.ResultBytes {
		if p, err = shard.ParsePlacement(string(rs[0].Bytes), len(s.groups)); err != nil {
			return err
		}
	}
	if p.Owns(to, slots) {
		return nil
	}
	q := p.Move(slots, to)
	rs, err = n.placementDo(ctx, kvOp(service.GuardKind, key, "version", strconv.FormatInt(rs[1].Int, 10)), kvOp("set", key, q.Encode()))
	if err != nil {
		return err
	}
	if service.IsGuardFailure(rs[0]) {
		return errors.New("the slot map changed meanwhile")
	}
	n.log.Info("slot map flipped", "namespace", s.ns.Name, "epoch", q.Epoch, "slots", shard.FormatSlots(slots), "to", s.groups[to].Namespace.Name)
	return nil
}

// ---- the operator's commands ----

var _ gateway.MigrationBackend = (*Node)(nil)

// Migrate implements gateway.MigrationBackend: start a migration of
// sharded namespace ns, or show or control its current one.
//
//	start <from-shard> <to-shard> <slots> [rate <keys/s>]
//	status | pause | resume | cancel | rate <keys/s>
func (n *Node) Migrate(ctx context.Context, ns string, args []string) (string, error) {
	s := n.shards[ns]
	if s == nil || ns == config.PlacementName {
		return "", fmt.Errorf("namespace %q is not sharded", ns)
	}
	if len(args) == 0 {
		args = []string{"status"}
	}
	rec, ver, err := n.readMigration(ctx, s)
	if err != nil {
		return "", err
	}
	switch sub := strings.ToLower(args[0]); sub {
	case "start":
		return n.startMigration(ctx, s, rec, ver, args[1:])
	case "status":
		if err := n.pollPlacement(ctx, s); err != nil {
			return "", err
		}
		return migrationStatus(s.view()) + n.placementLog(ctx, s, 5), nil
	case "pause", "resume", "cancel", "rate":
		if rec == nil || rec.Phase.Finished() {
			return "", errors.New("no migration under way")
		}
		ctl := s.view().ctl
		switch sub {
		case "pause":
			ctl.Paused = true
		case "resume":
			ctl.Paused = false
		case "cancel":
			if rec.Phase >= shard.PhHand {
				return "", fmt.Errorf("migration %d is past its hand-off (%v): it can no longer be cancelled", rec.ID, rec.Phase)
			}
			ctl.Cancel = true
		case "rate":
			if len(args) != 2 {
				return "", errors.New("rate <keys per second> (0: no limit)")
			}
			r, err := strconv.ParseFloat(args[1], 64)
			if err != nil || r < 0 {
				return "", fmt.Errorf("bad rate %q", args[1])
			}
			ctl.Rate = r
		}
		if _, err := n.placementDo(ctx, kvOp("set", "ctl/"+ns, shard.EncodeControl(ctl))); err != nil {
			return "", err
		}
		n.nudgePlacement()
		return "OK", nil
	}
	return "", fmt.Errorf("unknown migration subcommand %q (start, status, pause, resume, cancel, rate)", args[0])
}

func (n *Node) startMigration(ctx context.Context, s *shardedNS, prev *shard.Migration, ver uint64, args []string) (string, error) {
	if len(args) != 3 && len(args) != 5 {
		return "", errors.New("start <from-shard> <to-shard> <slots> [rate <keys/s>]")
	}
	if !automaton.TransactionsOf(s.ns.Protocol).Atomic {
		return "", fmt.Errorf("protocol %s has no atomic groups: its shards cannot migrate slots", s.ns.Protocol)
	}
	if prev != nil && !prev.Phase.Finished() {
		return "", fmt.Errorf("migration %d is under way (%v)", prev.ID, prev.Phase)
	}
	from, okf := s.index[config.GroupName(s.ns.Name, args[0])]
	to, okt := s.index[config.GroupName(s.ns.Name, args[1])]
	if !okf || !okt || from == to {
		return "", fmt.Errorf("from and to must be two different shards of %s", s.ns.Name)
	}
	if len(s.members(to)) == 0 {
		return "", fmt.Errorf("shard %s has no nodes yet (an unplaced shard: the placement service creates it when it splits one into it)", args[1])
	}
	slots, err := shard.ParseSlots(args[2])
	if err != nil {
		return "", err
	}
	var ctl shard.Control
	if len(args) == 5 {
		if !strings.EqualFold(args[3], "rate") {
			return "", fmt.Errorf("unknown option %q", args[3])
		}
		if ctl.Rate, err = strconv.ParseFloat(args[4], 64); err != nil || ctl.Rate < 0 {
			return "", fmt.Errorf("bad rate %q", args[4])
		}
	}
	if err := n.pollPlacement(ctx, s); err != nil {
		return "", err
	}
	v := s.view()
	if !(shard.Placement{Epoch: v.epoch, Groups: v.groups}).Owns(from, slots) {
		return "", fmt.Errorf("shard %s does not own every slot of %s (epoch %d)", args[0], args[2], v.epoch)
	}
	rec := shard.Migration{From: from, To: to, FromName: args[0], ToName: args[1], Slots: slots, Phase: shard.PhImport}
	if prev != nil {
		rec.ID = prev.ID + 1
		rec.Token = prev.Token
	} else {
		rec.ID = 1
	}
	key := "mig/" + s.ns.Name
	ops := []service.Op{kvOp(service.GuardKind, key, "version", strconv.FormatUint(ver, 10)), kvOp("set", key, rec.Encode()), kvOp("set", "ctl/"+s.ns.Name, shard.EncodeControl(ctl))}
	if v.memRead {
		// Also on the members record read (session 49): a created group
		// retired since (placer_retire.go, which guards on mig/<ns> in
		// turn) is not migrated into.
		ops = append([]service.Op{kvOp(service.GuardKind, "mem/"+s.ns.Name, "version", strconv.FormatUint(v.memVer, 10))}, ops...)
	}
	rs, err := n.placementDo(ctx, ops...)
	if err != nil {
		return "", err
	}
	if v.memRead && service.IsGuardFailure(rs[0]) {
		return "", errors.New("the members record changed since it was read")
	}
	if service.IsGuardFailure(rs[len(ops)-3]) {
		return "", errors.New("another migration was started meanwhile")
	}
	n.nudgePlacement()
	return fmt.Sprintf("migration %d: slots %s from %s to %s", rec.ID, shard.FormatSlots(slots), args[0], args[1]), nil
}

// migrationStatus is CLUSTER MIGRATION STATUS's text: one "name: value"
// per line.
func migrationStatus(v *slotView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "epoch: %d\n", v.epoch)
	if v.mig == nil {
		b.WriteString("migration: none\n")
		return b.String()
	}
	m := v.mig
	fmt.Fprintf(&b, "migration: %d\nfrom: %s\nto: %s\nslots: %s\nphase: %v\n", m.ID, m.FromName, m.ToName, shard.FormatSlots(m.Slots), m.Phase)
	fmt.Fprintf(&b, "keys_copied: %d\nbytes_copied: %d\n", m.Keys, m.Bytes)
	fmt.Fprintf(&b, "keys_left: %d\nbytes_left: %d\n", m.KeysLeft(), m.BytesLeft())
	fmt.Fprintf(&b, "dirty_passes: %d\nlast_pass_keys: %d\n", m.Passes, m.Dirty)
	fmt.Fprintf(&b, "paused: %t\nrate: %g\ncancel: %t\ndriver_token: %d\n", v.ctl.Paused, v.ctl.Rate, v.ctl.Cancel, m.Token)
	if m.Err != "" {
		fmt.Fprintf(&b, "last_error: %s\n", m.Err)
	}
	return b.String()
}

// untilStop is a context derived from parent that is also cancelled when
// the node stops; cancel ends its watcher.
func (n *Node) untilStop(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		select {
		case <-n.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
