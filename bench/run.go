package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/service"
)

// maxShards bounds the number of stats shards (clients share them round-robin).
const maxShards = 16

// runner is the state of one Run.
type runner struct {
	cfg     Config
	spec    DistSpec
	factory TargetFactory
	rec     *history.Recorder
	st      *stats
	namer   keyNamer

	measureStart time.Time
	nextProc     atomic.Int64 // next history process number after reconnects
	reconnects   atomic.Int64
	dropped      atomic.Int64
}

// client is one simulated client: one connection, its own randomness.
type client struct {
	id    int
	proc  int // current history process number
	addr  string
	t     Target
	r     *rand.Rand
	keys  *keyChooser
	vals  *valueMaker
	shard *shard
}

// clientSeed derives client i's seed from the run seed (splitmix64 step), so
// that clients draw independent streams.
func clientSeed(seed int64, i int) int64 {
	z := uint64(seed) + uint64(i+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return int64(z ^ (z >> 31))
}

// Run executes the benchmark described by cfg. Progress lines go to progress
// (nil: none), once a second. It returns an error when the configuration is
// invalid, when a client cannot connect, or when the preload fails; errors
// during the measured phase are counted in the report instead. If ctx ends
// during the measured phase, Run stops early and returns the partial report with
// Interrupted set. The history, when requested, is written before Run returns.
func Run(ctx context.Context, cfg Config, progress io.Writer) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	spec, _ := ParseDist(cfg.Dist, cfg.Keys)
	r := &runner{cfg: cfg, spec: spec, factory: cfg.NewTarget, namer: newKeyNamer(cfg.keyPrefix(), cfg.Keys)}
	if r.factory == nil {
		r.factory = RedisFactory(RedisOptions{Password: cfg.Password, Namespace: cfg.Namespace, ReadMode: cfg.ReadMode, Leader: cfg.Leader, Timeout: cfg.OpTimeout})
	}
	nShards := min(cfg.Clients, maxShards)
	r.st = newStats(nShards)
	runStart := time.Now()
	if cfg.HistoryPath != "" {
		r.rec = history.NewRecorder(func() int64 { return int64(time.Since(runStart)) })
		r.rec.SetMeta("source", "synod bench")
		r.rec.SetMeta("start", runStart.UTC().Format(time.RFC3339Nano))
		r.rec.SetMeta("addrs", strings.Join(cfg.Addrs, ","))
		r.rec.SetMeta("seed", fmt.Sprint(cfg.Seed))
		r.rec.SetMeta("service", "kv")
		r.rec.SetMeta("key_prefix", cfg.keyPrefix())
		r.rec.SetMeta(MetaInitial, cfg.initialValues())
		if cfg.Workload != "" {
			r.rec.SetMeta("workload", cfg.Workload)
		}
	}
	r.nextProc.Store(int64(cfg.Clients))

	clients, err := r.connectAll(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, c := range clients {
			if c.t != nil {
				c.t.Close()
			}
		}
	}()
	if cfg.Preload {
		if err := r.preload(ctx, clients); err != nil {
			return nil, err
		}
	}

	if cfg.OnMeasure != nil {
		cfg.OnMeasure()
	}
	r.measureStart = time.Now()
	stop := make(chan struct{})
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop) }) }
	if cfg.Duration > 0 {
		t := time.AfterFunc(cfg.Duration, halt)
		defer t.Stop()
	}
	// dialCtx governs reconnects: they give up when the measured phase ends.
	dialCtx, cancelDial := context.WithCancel(ctx)
	defer cancelDial()
	go func() {
		select {
		case <-stop:
		case <-ctx.Done():
		}
		cancelDial()
	}()

	progDone := make(chan struct{})
	progStop := make(chan struct{})
	go func() { defer close(progDone); r.progress(progress, progStop) }()

	var wg sync.WaitGroup
	if cfg.Rate > 0 {
		queue := make(chan time.Time, queueCap(cfg.Rate))
		wg.Add(1)
		go func() { defer wg.Done(); r.schedule(ctx, queue) }()
		for _, c := range clients {
			wg.Add(1)
			go func() { defer wg.Done(); r.openLoop(ctx, dialCtx, c, queue) }()
		}
		wg.Wait()
		// Arrivals still queued when every client stopped were never issued.
		for range queue {
			r.dropped.Add(1)
		}
	} else {
		var claimed atomic.Int64
		for _, c := range clients {
			wg.Add(1)
			go func() { defer wg.Done(); r.closedLoop(ctx, dialCtx, stop, c, &claimed) }()
		}
	}
	wg.Wait()
	elapsed := time.Since(r.measureStart)
	halt()
	close(progStop)
	<-progDone

	rep := r.report(elapsed)
	rep.Interrupted = ctx.Err() != nil
	if r.rec != nil {
		h := r.rec.History()
		rep.HistoryOps = len(h.Ops)
		if err := h.Save(cfg.HistoryPath); err != nil {
			return rep, fmt.Errorf("writing history: %w", err)
		}
	}
	return rep, nil
}

// queueCap sizes the open-loop queue to about one second of arrivals.
func queueCap(rate float64) int {
	return int(min(max(rate, 1024), 1<<20))
}

// connectAll dials every client concurrently.
func (r *runner) connectAll(ctx context.Context) ([]*client, error) {
	cfg := r.cfg
	clients := make([]*client, cfg.Clients)
	errs := make([]error, cfg.Clients)
	var wg sync.WaitGroup
	for i := range clients {
		rng := rand.New(rand.NewSource(clientSeed(cfg.Seed, i)))
		c := &client{id: i, proc: i, addr: cfg.Addrs[i%len(cfg.Addrs)], r: rng, shard: r.st.shard(i)}
		c.keys = newKeyChooser(r.spec, cfg.Keys, rng)
		c.vals = newValueMaker(i, cfg.ValueSize, rng)
		clients[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.t, errs[i] = r.factory(ctx, c.addr, i)
		}()
	}
	wg.Wait()
	err := firstError(errs)
	if err == nil {
		return clients, nil
	}
	for _, c := range clients {
		if c.t != nil {
			c.t.Close()
		}
	}
	return nil, fmt.Errorf("connecting: %w", err)
}

// preload SETs every key once, keys dealt round-robin to the clients. A failure
// aborts the run, so a failed client does not reconnect.
func (r *runner) preload(ctx context.Context, clients []*client) error {
	noRedial, cancel := context.WithCancel(ctx)
	cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(clients))
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := c.id; k < r.cfg.Keys; k += len(clients) {
				op := service.Op{Kind: "set", Key: r.namer.name(k), Args: [][]byte{c.vals.next()}}
				if _, errMsg := r.exec(ctx, noRedial, c, op, false); errMsg != "" {
					errs[c.id] = fmt.Errorf("preload: SET %s: %s", op.Key, errMsg)
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstError(errs)
}

// firstError returns the first non-nil error of a per-client slice, noting how
// many clients failed when several did (their messages are usually the same).
func firstError(errs []error) error {
	var first error
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	if failed > 1 {
		return fmt.Errorf("%w (%d of %d clients failed)", first, failed, len(errs))
	}
	return first
}

// nextOp draws the client's next operation.
func (r *runner) nextOp(c *client) (service.Op, bool) {
	key := r.namer.name(c.keys.next(c.r))
	if c.r.Float64() < r.cfg.ReadRatio {
		return service.Op{Kind: "get", Key: key}, true
	}
	return service.Op{Kind: "set", Key: key, Args: [][]byte{c.vals.next()}}, false
}

// exec performs op on c's target, records it in the history, and reconnects
// after a failure that leaves the connection or the process unusable. It
// returns the result and, for an error reply or transport failure, a message.
// On return c.t is nil only if reconnecting was abandoned because dialCtx ended.
func (r *runner) exec(ctx, dialCtx context.Context, c *client, op service.Op, read bool) (service.Result, string) {
	var p *history.Pending
	if r.rec != nil {
		mode := ""
		if read {
			mode = r.cfg.ReadMode
		}
		p = r.rec.Invoke(c.proc, r.cfg.Namespace, op, mode)
	}
	res, err := c.t.Do(ctx, op)
	switch {
	case err != nil:
		if p != nil {
			if read {
				p.Fail(service.Errorf("%v", err))
			} else {
				p.Unknown()
			}
		}
		r.reconnect(dialCtx, c)
		return service.Result{}, transportMessage(err)
	case res.IsErr():
		if p != nil {
			if read {
				p.Fail(res)
			} else {
				p.Unknown()
			}
		}
		if !read {
			r.reconnect(dialCtx, c)
		}
		return res, res.Err
	}
	if p != nil {
		p.Complete(res)
	}
	return res, ""
}

// reconnect replaces c's connection and history process number, retrying with
// backoff until it succeeds or ctx ends (then c.t is nil).
func (r *runner) reconnect(ctx context.Context, c *client) {
	c.t.Close()
	c.t = nil
	c.proc = int(r.nextProc.Add(1) - 1)
	if ctx.Err() == nil {
		r.reconnects.Add(1)
	}
	backoff := 10 * time.Millisecond
	for ctx.Err() == nil {
		t, err := r.factory(ctx, c.addr, c.id)
		if err == nil {
			c.t = t
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Second)
	}
}

// transportMessage describes a transport error without the local address, so
// that the same failure seen by many clients reads the same in the report.
func transportMessage(err error) string {
	var op *net.OpError
	if errors.As(err, &op) {
		o := *op
		o.Source = nil
		return o.Error()
	}
	return err.Error()
}

func stopped(ctx context.Context, stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// closedLoop issues operations back to back until the duration, the operation
// budget or ctx ends.
func (r *runner) closedLoop(ctx, dialCtx context.Context, stop <-chan struct{}, c *client, claimed *atomic.Int64) {
	for c.t != nil && !stopped(ctx, stop) {
		if r.cfg.Ops > 0 && claimed.Add(1) > r.cfg.Ops {
			return
		}
		op, read := r.nextOp(c)
		start := time.Now()
		_, errMsg := r.exec(ctx, dialCtx, c, op, read)
		if ctx.Err() != nil {
			return // interrupted: the operation's timing means nothing
		}
		end := time.Now()
		c.shard.record(read, end.Sub(start), end.Sub(r.measureStart), errMsg)
	}
}

// schedule feeds arrival times (Poisson or uniform gaps) into queue until the duration or the
// operation budget is spent, dropping arrivals that find the queue full.
func (r *runner) schedule(ctx context.Context, queue chan<- time.Time) {
	defer close(queue)
	p := newArrivals(r.cfg.Arrivals, r.cfg.Rate, rand.New(rand.NewSource(clientSeed(r.cfg.Seed, -1))))
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for n := int64(0); r.cfg.Ops == 0 || n < r.cfg.Ops; n++ {
		off := p.next()
		if r.cfg.Duration > 0 && off >= r.cfg.Duration {
			return
		}
		at := r.measureStart.Add(off)
		if d := time.Until(at); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
		}
		select {
		case queue <- at:
		default:
			r.dropped.Add(1)
		}
	}
}

// openLoop serves queued arrivals; latency runs from the scheduled arrival.
func (r *runner) openLoop(ctx, dialCtx context.Context, c *client, queue <-chan time.Time) {
	for at := range queue {
		if ctx.Err() != nil || c.t == nil {
			return
		}
		op, read := r.nextOp(c)
		start := time.Now()
		if start.Sub(at) > LateThreshold {
			c.shard.addLate()
		}
		_, errMsg := r.exec(ctx, dialCtx, c, op, read)
		if ctx.Err() != nil {
			return
		}
		end := time.Now()
		c.shard.record(read, end.Sub(at), end.Sub(r.measureStart), errMsg)
	}
}
