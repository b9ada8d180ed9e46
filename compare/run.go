package compare

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/synod-dev/synod/bench"
	"github.com/synod-dev/synod/service"
)

// Options describe a comparison.
type Options struct {
	// Protocol replicates Synod's namespace (required).
	Protocol string
	// SynodBinary is the synod executable for the Synod nodes ("" = this one).
	SynodBinary string
	// Clients lists the client counts, one cell per count, op and system.
	Clients []int
	// Duration is the measured time of each cell.
	Duration time.Duration
	// Warmup runs each cell's workload this long, unmeasured, before the
	// measured run (same clients, ops and keys; 0: none): JIT compilation
	// (ZooKeeper), caches and connection set-up stay out of the figures.
	Warmup time.Duration
	// Keys, KeySize and ValueSize shape the data: Keys keys of exactly
	// KeySize bytes, values of ValueSize bytes.
	Keys, KeySize, ValueSize int
	// Ops are the operations measured, in order: OpPut, OpGet.
	Ops []string
	// Dir holds every system's data and logs; "" makes a temporary directory.
	// A given directory must be empty or absent.
	Dir string
	// Keep keeps Dir after a successful or interrupted run (it is always kept
	// after a failure, for the logs, and when it was given).
	Keep bool
	// Seed seeds the driver's key and value choices.
	Seed int64
	// OpTimeout bounds one operation; ReadyTimeout a cluster's start.
	OpTimeout, ReadyTimeout time.Duration
	// StopGrace is how long peers get after SIGTERM before SIGKILL.
	StopGrace time.Duration
	// Conns are the shared connection counts swept for clients that can
	// share a connection (etcd, ZooKeeper, Synod's gRPC client), beside one
	// connection per client.
	Conns []int
	// PipelineDepths are the pipelining depths swept beside one connection
	// per client, over RESP and Synod's gRPC Pipeline streams (none: no
	// pipelined configuration).
	PipelineDepths []int
	// Isolate runs each system's cells with every other system paused
	// (SIGSTOP), resuming it (SIGCONT) for its own turn (package doc,
	// "Isolation"). Without it every system runs throughout, as before
	// session 42: a peer's cells then share the machine with the other
	// systems' background work.
	Isolate bool
	// IdleWindow is how long each system's CPU is measured while it serves
	// no client: once after the preload (alone, after a settle of the same
	// length) and after each of its turns (0: not measured).
	IdleWindow time.Duration
}

// DefaultOptions returns the defaults of `synod-lab compare`.
func DefaultOptions() Options {
	return Options{
		Clients:        []int{1, 16, 64, 256},
		Duration:       10 * time.Second,
		Warmup:         time.Second,
		Keys:           10000,
		KeySize:        16,
		ValueSize:      100,
		Ops:            []string{OpPut, OpGet},
		Seed:           1,
		OpTimeout:      5 * time.Second,
		ReadyTimeout:   60 * time.Second,
		StopGrace:      10 * time.Second,
		Conns:          []int{1, 16},
		PipelineDepths: []int{16, 64},
		Isolate:        true,
		IdleWindow:     time.Second,
	}
}

// Validate checks the options and explains the first problem.
func (o *Options) Validate() error {
	if o.Protocol == "" {
		return errors.New("no Synod protocol given (--protocol)")
	}
	if len(o.Clients) == 0 {
		return errors.New("no client counts given")
	}
	for _, c := range o.Clients {
		if c < 1 {
			return fmt.Errorf("client count %d: must be at least 1", c)
		}
	}
	if o.Duration <= 0 {
		return fmt.Errorf("duration per cell must be positive (got %v)", o.Duration)
	}
	if o.Warmup < 0 {
		return fmt.Errorf("warm-up per cell must be 0 or positive (got %v)", o.Warmup)
	}
	if o.Keys < 1 {
		return fmt.Errorf("keys must be at least 1 (got %d)", o.Keys)
	}
	if o.ValueSize < bench.MinValueSize {
		return fmt.Errorf("value size must be at least %d bytes (got %d)", bench.MinValueSize, o.ValueSize)
	}
	if _, err := KeyPrefix(o.KeySize, o.Keys); err != nil {
		return err
	}
	if len(o.Ops) == 0 {
		return errors.New("no operations given")
	}
	for _, op := range o.Ops {
		if op != OpPut && op != OpGet {
			return fmt.Errorf("unknown operation %q (want %s or %s)", op, OpPut, OpGet)
		}
	}
	for _, c := range o.Conns {
		if c < 1 {
			return fmt.Errorf("shared connection count %d: must be at least 1", c)
		}
	}
	for _, d := range o.PipelineDepths {
		if d < 1 {
			return fmt.Errorf("pipelining depth %d: must be at least 1", d)
		}
	}
	if o.IdleWindow < 0 {
		return fmt.Errorf("idle CPU window must be 0 or positive (got %v)", o.IdleWindow)
	}
	if o.OpTimeout <= 0 || o.ReadyTimeout <= 0 || o.StopGrace <= 0 {
		return errors.New("timeouts must be positive")
	}
	return nil
}

// KeyPrefix returns the prefix that makes every driver key name exactly
// keySize bytes long for a run over keys keys.
func KeyPrefix(keySize, keys int) (string, error) {
	digits := len(bench.KeyName("", keys, 0))
	n := keySize - digits
	if n < 2 {
		return "", fmt.Errorf("key size %d is too small for %d keys: the zero-padded index alone takes %d bytes; use at least %d", keySize, keys, digits, digits+2)
	}
	const filler = "synod-compare-key"
	p := filler
	for len(p) < n-1 {
		p += "x"
	}
	return p[:n-1] + ":", nil
}

// readyOp is the read with which Start probes a cluster.
var readyOp = service.Op{Kind: "get", Key: "synod-compare-ready"}

// Run starts every system of systems that is installed (printing the install
// command of the others on out), preloads the keys, measures every cell, and
// stops everything it started: on success, on error and when ctx ends
// (Ctrl-C). progress (nil: none) gets a line per step. The result is returned
// also when ctx ended early (Interrupted set); err is then non-nil.
func Run(ctx context.Context, o Options, systems []System, out, progress io.Writer) (res *Result, err error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if progress == nil {
		progress = io.Discard
	}
	prefix, _ := KeyPrefix(o.KeySize, o.Keys)

	dir, made, err := prepareDir(o.Dir)
	if err != nil {
		return nil, err
	}
	res = &Result{
		Start: time.Now(),
		Config: ReportConfig{Members: Members, Protocol: o.Protocol, Keys: o.Keys, KeySize: o.KeySize,
			ValueSize: o.ValueSize, Clients: o.Clients, Ops: o.Ops, DurationSec: o.Duration.Seconds(), WarmupSec: o.Warmup.Seconds(),
			Seed: o.Seed, Dir: dir, PipelineDepths: o.PipelineDepths, IdleWindowSec: o.IdleWindow.Seconds()},
	}

	procs := newProcGroup()
	var running []*Instance
	defer func() {
		if serr := stopAll(running, procs, o.StopGrace, progress); serr != nil {
			err = errors.Join(err, serr)
		}
		switch {
		case err != nil && ctx.Err() == nil:
			// A failure: keep the logs for diagnosis.
			fmt.Fprintf(progress, "data and logs kept in %s\n", dir)
		case made && !o.Keep:
			if rerr := os.RemoveAll(dir); rerr != nil {
				err = fmt.Errorf("removing %s: %w", dir, rerr)
			}
		default:
			fmt.Fprintf(progress, "data and logs kept in %s\n", dir)
		}
	}()

	type live struct {
		sys  System
		inst *Instance
	}
	var lives []live
	for _, s := range systems {
		if install := s.Missing(); install != "" {
			fmt.Fprintf(out, "%s is not installed; install it with:\n    %s\n  running the others without it.\n", s.Name, install)
			res.Skipped = append(res.Skipped, Skipped{Name: s.Name, Install: install})
			continue
		}
		sdir := filepath.Join(dir, s.Name)
		if err := os.MkdirAll(sdir, 0o755); err != nil {
			return res, err
		}
		fmt.Fprintf(progress, "starting %s (%d members) in %s\n", s.Name, Members, sdir)
		t0 := time.Now()
		inst, err := s.Start(ctx, &Env{Dir: sdir, Procs: procs, ReadyTimeout: o.ReadyTimeout, OpTimeout: o.OpTimeout})
		if err != nil {
			return res, fmt.Errorf("starting %s: %w", s.Name, err)
		}
		running = append(running, inst)
		fmt.Fprintf(progress, "  %s ready in %.1fs at %s\n", s.Name, time.Since(t0).Seconds(), strings.Join(inst.Addrs, ","))
		lives = append(lives, live{s, inst})
		res.Systems = append(res.Systems, SystemReport{Name: s.Name, Version: inst.Version, Durability: inst.Durability, Addrs: inst.Addrs})
	}
	if len(lives) == 0 {
		return res, errors.New("no system to run")
	}

	for _, l := range lives {
		fmt.Fprintf(progress, "preloading %d keys into %s\n", o.Keys, l.sys.Name)
		if err := preload(ctx, l.inst, o, prefix); err != nil {
			return res, fmt.Errorf("preloading %s: %w", l.sys.Name, err)
		}
	}

	for _, l := range lives {
		if l.inst.Follower != nil && !hasFollower(ctx, l.inst) {
			l.inst.Follower = nil
		}
	}

	var insts []*Instance
	for _, l := range lives {
		insts = append(insts, l.inst)
	}
	isolate := o.Isolate && len(lives) > 1
	if isolate {
		res.Config.Isolation = "each system's cells ran with the other systems paused (SIGSTOP), resumed (SIGCONT) for their own turn"
		if err := pauseOthers(insts, nil); err != nil {
			return res, fmt.Errorf("pausing: %w", err)
		}
	} else {
		res.Config.Isolation = "none: every system ran throughout, beside the others' cells"
	}
	// Each system's CPU while it serves no client, after its preload: alone
	// when isolated, after a settle of the same length.
	if o.IdleWindow > 0 {
		for i, l := range lives {
			if isolate {
				if err := resumeTurn(ctx, l.inst, o); err != nil {
					return res, fmt.Errorf("resuming %s: %w", l.sys.Name, err)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(o.IdleWindow):
			}
			res.Systems[i].IdleCPU = cpuOver(ctx, l.inst, o.IdleWindow)
			if c := res.Systems[i].IdleCPU; c != nil {
				fmt.Fprintf(progress, "%s idle: %.3f cores over %v\n", l.sys.Name, *c, o.IdleWindow)
			}
			if isolate {
				if err := pauseOthers(insts, nil); err != nil {
					return res, fmt.Errorf("pausing %s: %w", l.sys.Name, err)
				}
			}
		}
	}

	total := 0
	for _, clients := range o.Clients {
		for _, l := range lives {
			total += len(o.Ops) * len(Configs(l.inst, o, clients))
		}
	}
	n := 0
	// Systems take turns, all configurations of one op and client count at
	// a time, so that drift over the run (page cache, other load) falls on
	// all of them alike.
	for _, clients := range o.Clients {
		for _, op := range o.Ops {
			for i, l := range lives {
				if ctx.Err() != nil {
					break
				}
				if isolate {
					if err := resumeTurn(ctx, l.inst, o); err != nil {
						if ctx.Err() != nil {
							break
						}
						return res, fmt.Errorf("resuming %s: %w", l.sys.Name, err)
					}
				}
				for _, cc := range Configs(l.inst, o, clients) {
					if ctx.Err() != nil {
						break
					}
					n++
					cell := runCell(ctx, l.sys.Name, l.inst, cc, o, prefix, op, clients)
					if ctx.Err() != nil {
						break // an interrupted cell's figures mean nothing
					}
					res.Cells = append(res.Cells, cell)
					if cell.Failed != "" {
						fmt.Fprintf(progress, "[%2d/%d] %-3s clients %3d  %-9s %-22s FAILED: %s\n", n, total, op, clients, l.sys.Name, cc.Name, cell.Failed)
					} else {
						fmt.Fprintf(progress, "[%2d/%d] %-3s clients %3d  %-9s %-22s %10.1f ops/s  p50 %7.3f ms  p99 %7.3f ms  errors %d  (%s)\n",
							n, total, op, clients, l.sys.Name, cc.Name, cell.Throughput, cell.P50Ms, cell.P99Ms, cell.Errors, cell.Fsync)
					}
				}
				// What the system still does once its clients are gone (a
				// backlog of background work), measured before it is paused.
				if c := cpuOver(ctx, l.inst, o.IdleWindow); c != nil {
					res.Systems[i].AfterTurnCPU = append(res.Systems[i].AfterTurnCPU, *c)
					fmt.Fprintf(progress, "%s after its %s turn at %d clients: %.3f cores over %v\n", l.sys.Name, op, clients, *c, o.IdleWindow)
				}
				if isolate && ctx.Err() == nil {
					if err := pauseOthers(insts, nil); err != nil {
						return res, fmt.Errorf("pausing %s: %w", l.sys.Name, err)
					}
				}
			}
		}
	}
	var peers []string
	for _, l := range lives {
		if l.sys.Name != Synod {
			peers = append(peers, l.sys.Name)
		}
	}
	res.Best = BestCells(res.Cells)
	res.Ratios = ComputeRatios(res.Cells, peers)
	if ctx.Err() != nil {
		res.Interrupted = true
		return res, fmt.Errorf("interrupted: %w", ctx.Err())
	}
	return res, nil
}

// prepareDir makes a temporary directory when dir is "", and otherwise
// checks that dir is empty (creating it if absent): a leftover Synod cluster
// there would be resumed instead of started fresh.
func prepareDir(dir string) (string, bool, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "synod-compare-")
		return d, true, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", false, err
	}
	ents, err := os.ReadDir(abs)
	if errors.Is(err, os.ErrNotExist) {
		return abs, false, os.MkdirAll(abs, 0o755)
	}
	if err != nil {
		return "", false, err
	}
	if len(ents) > 0 {
		return "", false, fmt.Errorf("--dir %s is not empty; give an empty or new directory", abs)
	}
	return abs, false, nil
}

// stopAll stops every running instance and every process of the group,
// resuming the paused ones first.
func stopAll(running []*Instance, procs *procGroup, grace time.Duration, progress io.Writer) error {
	resumeAll(running)
	var errs []error
	for _, inst := range running {
		if inst.Stop != nil {
			if err := inst.Stop(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	killed, err := procs.stopAll(grace)
	if len(killed) > 0 {
		fmt.Fprintf(progress, "SIGKILLed after %v: %s\n", grace, strings.Join(killed, ", "))
	}
	if err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// preload writes every key once, from up to 64 clients.
func preload(ctx context.Context, inst *Instance, o Options, prefix string) error {
	workers := min(64, o.Keys)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr := inst.Addrs[w%len(inst.Addrs)]
			t, err := inst.NewTarget(ctx, addr, w)
			if err != nil {
				errs[w] = err
				return
			}
			defer t.Close()
			val := make([]byte, o.ValueSize)
			for k := w; k < o.Keys; k += workers {
				key := bench.KeyName(prefix, o.Keys, k)
				copy(val, key)
				for i := len(key); i < len(val); i++ {
					val[i] = 'p'
				}
				r, err := t.Do(ctx, service.Op{Kind: "set", Key: key, Args: [][]byte{val}})
				if err == nil && r.IsErr() {
					err = errors.New(r.Err)
				}
				if err != nil {
					errs[w] = fmt.Errorf("set %s: %w", key, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", ctx.Err()) // not one error per worker
	}
	return errors.Join(errs...)
}

// hasFollower reports whether inst.Follower connects: once the keys are
// preloaded a protocol with a leader has one, which a leaderless one never
// names.
func hasFollower(ctx context.Context, inst *Instance) bool {
	t, err := inst.Follower(ctx, inst.Addrs[0], 0)
	if err != nil {
		return false
	}
	t.Close()
	return true
}

// ClientConfig is one way of connecting a cell's clients to a system.
type ClientConfig struct {
	// Name is how tables name it: the client's protocol and the
	// connections ("v3 conns=16", "resp conns=pipeline:16", "grpc conns=1").
	Name string
	// Spec arranges the connections; GRPC selects the instance's gRPC
	// client instead of NewTarget.
	Spec bench.ConnSpec
	GRPC bool
	// Follower: each client connects to a member that is not the leader
	// (Instance.Follower), which forwards its requests.
	Follower bool
}

// Configs lists the client configurations swept for inst at clients
// clients (issue 18: each system measured in its best configuration):
//
//   - one connection per client, always; with one client, also one
//     connection to a follower (Instance.Follower: a system with a leader),
//     whose requests the follower forwards;
//   - when the targets can be shared (etcd, ZooKeeper): each of o.Conns
//     shared connections, as etcd's benchmark separates --conns from
//     --clients;
//   - when the system speaks RESP (Synod, Redis): pipelining at each depth
//     of o.PipelineDepths, the way a client library pipelines concurrent
//     callers' commands on one connection;
//   - when it has a gRPC client (Synod): each of o.Conns gRPC clients
//     shared by all clients, requests multiplexed, and (GRPCPipelined)
//     gRPC clients pipelining each depth of o.PipelineDepths clients each
//     on their Pipeline streams.
//
// A configuration that would open as many connections as one per client
// (a shared count at least the client count, pipelining one client deep)
// is the per-client run again and is left out, and so is a depth that
// opens as many connections as a smaller one (at 16 clients depths 16 and
// 64 both put every client on one connection).
func Configs(inst *Instance, o Options, clients int) []ClientConfig {
	via := inst.Via
	if via == "" {
		via = "client"
	}
	out := []ClientConfig{{Name: via + " conns=per-client"}}
	if inst.Follower != nil && clients == 1 {
		out = append(out, ClientConfig{Name: via + " via follower", Follower: true})
	}
	if inst.Shareable {
		for _, c := range o.Conns {
			if s := (bench.ConnSpec{Shared: c}); s.Conns(clients) < clients {
				out = append(out, ClientConfig{Name: via + " conns=" + s.String(), Spec: s})
			}
		}
	}
	if inst.Pipelined != nil {
		for _, s := range pipelineSpecs(o.PipelineDepths, clients) {
			out = append(out, ClientConfig{Name: via + " conns=" + s.String(), Spec: s})
		}
	}
	if inst.GRPC != nil {
		for i, c := range o.Conns {
			// The first count always runs: even alone, a gRPC client is
			// another configuration than RESP.
			s := bench.ConnSpec{Shared: c}
			if c < clients || i == 0 {
				out = append(out, ClientConfig{Name: "grpc conns=" + s.String(), Spec: s, GRPC: true})
			}
		}
	}
	if inst.GRPCPipelined != nil {
		for _, s := range pipelineSpecs(o.PipelineDepths, clients) {
			out = append(out, ClientConfig{Name: "grpc conns=" + s.String(), Spec: s, GRPC: true})
		}
	}
	return out
}

// pipelineSpecs returns the pipelined arrangements of depths at clients
// clients, smallest depth first, leaving out those that open one
// connection per client or as many connections as a smaller depth.
func pipelineSpecs(depths []int, clients int) []bench.ConnSpec {
	ds := slices.Clone(depths)
	slices.Sort(ds)
	var out []bench.ConnSpec
	last := clients
	for _, d := range ds {
		s := bench.ConnSpec{Depth: d}
		if n := s.Conns(clients); n < last {
			out = append(out, s)
			last = n
		}
	}
	return out
}

// factory returns the target factory of configuration cc.
func (cc ClientConfig) factory(inst *Instance, clients int) (bench.TargetFactory, error) {
	if cc.Follower {
		return inst.Follower, nil
	}
	if cc.GRPC && cc.Spec.Depth > 0 {
		return bench.ShareConns(cc.Spec.Conns(clients), inst.GRPCPipelined), nil
	}
	if cc.GRPC {
		return bench.ShareConns(cc.Spec.Conns(clients), inst.GRPC), nil
	}
	return bench.WithConns(cc.Spec, clients, inst.NewTarget, inst.Pipelined)
}

// runCell measures one system in one client configuration, one op, one
// client count.
func runCell(ctx context.Context, name string, inst *Instance, cc ClientConfig, o Options, prefix, op string, clients int) Cell {
	cell := Cell{System: name, Config: cc.Name, Conns: cc.Spec.Conns(clients), Fsync: inst.Fsync, Op: op, Clients: clients}
	factory, err := cc.factory(inst, clients)
	if err != nil {
		cell.Failed = err.Error()
		return cell
	}
	cfg := bench.DefaultConfig()
	cfg.Addrs = inst.Addrs
	cfg.Duration = o.Duration
	cfg.Clients = clients
	cfg.Keys = o.Keys
	cfg.ValueSize = o.ValueSize
	cfg.KeyPrefix = prefix
	cfg.Dist = "uniform"
	cfg.Seed = o.Seed
	cfg.OpTimeout = o.OpTimeout
	cfg.NewTarget = factory
	cfg.TargetName = name
	cfg.DurabilityLabel = inst.Durability
	cfg.ReadRatio = 0
	if op == OpGet {
		cfg.ReadRatio = 1
	}
	if o.Warmup > 0 {
		// Unmeasured; a failure here shows again in the measured run.
		w := cfg
		w.Duration = o.Warmup
		// A fresh pool: the measured run opens its own connections.
		if w.NewTarget, err = cc.factory(inst, clients); err == nil {
			bench.Run(ctx, w, nil)
		}
	}
	rep, err := bench.Run(ctx, cfg, nil)
	if err != nil && rep == nil {
		cell.Failed = err.Error()
		return cell
	}
	st := rep.Writes
	if op == OpGet {
		st = rep.Reads
	}
	cell.Throughput, cell.P50Ms, cell.P99Ms = st.Throughput, st.P50Ms, st.P99Ms
	cell.Count, cell.Errors = st.Count, st.Errors
	cell.ErrorSamples = rep.ErrorSamples
	if err != nil {
		cell.Failed = err.Error()
	}
	return cell
}
