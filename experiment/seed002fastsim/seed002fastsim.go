// Package seed002fastsim is the experiment "seed002-fast-vs-classic-sim":
// the real protocols, protocol/fastpaxos (3t+1 nodes) and protocol/paxos
// (Multi-Paxos, 2t+1 nodes), run in the simulator under the latencies of
// the Grid Services thesis chapter V.B's model (client links Pareto(α_w, 100 ms), α_w 1.2 and
// 1.8; server links Pareto(2, 3 ms); t = 1 and 3; and all links Pareto(2,
// 3 ms)), one client at a time, their empirical CDFs plotted beside the
// model's (package model/fastpaxos; experiment seed002-fast-vs-classic-model)
// and the claims table printed with the simulator's figures beside the
// model's.
//
// # What is measured: client round trips, and both protocols' time to learn
//
// The model's L_c and L_f run from the client's send until a learner learns.
// The simulator shows the client's send and the reply's arrival (the
// history's Call and Return); automata are pure and have no clock. So we
// measure round trips for both protocols, and compare them with the model
// extended by the reply (roundTrips): Classic RTT_c = L_c + W, the leader
// replying; Fast RTT_f = the first reply over every learner of L_f at that
// learner + W, since every learner replies and the client takes the first
// (seed V.A, issue 12 item 1). That extension is sampled message by message
// from the model's own assumptions (independent draws per message), not
// convolved numerically, because the first of the 3t+1 replies shares the
// acceptors' votes with every other.
//
// The time to learn is measured too, for both protocols: each reports the
// instances its replicas learn through a Recorder named by its parameter
// observe (protocol/fastpaxos/observe.go, protocol/paxos/observe.go, on
// protocol/proto's Recorder), and the experiment stamps each report with
// the simulator's virtual time, read from the trace (measure). Fast: L_f at
// one learner; Classic: L_c at the leader, when a majority of acceptances
// reached it (paxos.ByQuorum; the model's Classic learner is the leader's,
// roundTrips). Each is compared with the model's under the two readings
// below (KS distance against its bound, as for the round trips), and the
// seed's time-to-learn claims (Figs V.3, V.4, V.6: the two regions and the
// division "around 300ms" with both CDFs "over 0.7", the steeper Fast curve
// at t = 3, Fast better on an all-LAN Pareto) are judged on the simulated
// L_c and L_f; the round trips' crossing is our own row.
//
// # Collisions (seed V.B: ≈0.38 at t = 1, ≈0.65 at t = 3, growing with
// the number of clients)
//
// collision.go: rounds of 2, 4, 6 and 8 clients sending at the same
// virtual instant (δ = 0) to 3t+1 acceptors; the seed's event (no request
// first at a fast quorum) from the trace, and the protocol's own rate (the
// round's first instance learned only in a recovery round) from the
// Recorder. The protocol's rate is higher: the leader starts coordinated
// recovery as soon as a classic quorum of fast votes disagree (Lamport's
// coordinated recovery), before the last acceptors' votes could have made a
// fast quorum; with t = 1 and two clients that is whenever the first three
// votes differ (1 − 2·(1/2)³ = 0.75), against the seed's 0.375.
//
// Against δ (Fig V.5: "the first client sends a request at time r and ...
// the second client sends a request at time r + δ"): two clients whose
// first requests leave δ apart (sim.RunWithStarts), δ in collisionDeltas
// (the figure's x-axis has no readable ticks in our copy of the seed: a
// spread over the range where the model's curves fall), t = 1 and 3, client
// links Pareto(1.2, 100 ms) as the figure's; each point beside the model's
// (model/fastpaxos.Collision) with its 99.9 % interval. The seed's "for
// longer delays, as we increase the value t, the probability of having a
// collision decreases faster" is judged as: t = 3 above t = 1 at δ = 0
// beyond both intervals, its fall from δ = 0 to the largest δ larger beyond
// the sum of the four intervals, and below t = 1 at the largest δ (point
// estimates; the model's curves cross near 120 ms, and at 400 ms they differ
// by less than the intervals of a few hundred rounds).
//
// # Two readings of self-messages
//
// The model (model/fastpaxos doc) lets every message cross a link, the
// leader's phase 2a to itself and an acceptor's vote to its own learner
// included. In the simulator a node's own message takes no time. The
// experiment computes the model under both readings: "model" (the seed's)
// and "model, sim topology" (self-messages free). The simulated CDF is
// compared with the second by its Kolmogorov distance, against the
// Dvoretzky–Kiefer–Wolfowitz bound for its sample size at 99.9 %: that is
// the test that the protocols, run by the simulator, take exactly the
// message chains the model describes, and nothing more.
//
// # The runs
//
// One closed-loop client writes (SET: both protocols put writes through
// the log; reads take other paths), thinking 3 s between operations so that
// requests do not overlap; no faults; fsync takes no time (the model has
// no disk); timeouts are far above the simulator's Pareto cap (sim.ParetoCap,
// 1000 times the scale: the model's Pareto is uncapped; the difference is
// P{W > 100 s} = 2.5·10⁻⁴ for α_w = 1.2), so nothing is retried and a run
// with a retry is an error. The first operations fall in the first election
// and are dropped. Paxos: the simulated client sends each request to a
// random node; a follower forwards it to the leader (two more LAN hops than
// the model's W(prop→leader)), so only requests that reached the leader
// are kept, a choice independent of the latencies (paxos runs 2t+1 times
// the operations, so that about as many are kept). The leader is read from
// the trace (the node that sends the most peer messages). Fast Paxos:
// clients fan out to every acceptor (automaton.FanoutProtocol).
//
// # Live loopback (--live, or --cases live-loopback)
//
// live.go: fastpaxos on 4 nodes (3t+1, t = 1) against paxos on 3 (2t+1),
// in-process nodes on 127.0.0.1 with fsync per write, closed-loop SET
// writers (1, 4, 16), the Go client (gRPC: fastpaxos fans each request
// out, clients as proposers) and RESP (one node; on fastpaxos its gateway
// proposes), 5 s per cell (1 s with --quick). In process so that the
// fastpaxos Recorder gives the conflict rate: the leader's Collisions over
// the instances it learned. By default only the four cells of V.C's two
// claims in the seed's setting run (paxos and fastpaxos, one gRPC client,
// durability memory, on loopback and behind the WAN link; --no-live drops
// them); --live adds every path, client count and fsync (about two
// minutes).
//
// # Live WAN clients (--live, or --cases live-wan)
//
// This machine has no sch_netem, and nemesis's relay (nemesis/relay.go)
// carries peer links only (it parses the peer transport's frames; RESP and
// gRPC's HTTP/2 are not framed so). seed002wan is a userspace relay for
// client connections instead: every chunk in either direction is delayed
// by a one-way Pareto(1.8, 20 ms) draw, in order (the seed's α_w = 1.8 with
// b_w cut from 100 ms to 20 ms to hold a few hundred operations in 15 s).
// One client; servers on loopback with fsync. In-order delivery makes the
// delays of one burst dependent, unlike the model's messages, so these rows
// judge the direction of the seed's claim, not the model's curves.
package seed002fastsim

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/experiment"
	"github.com/synod-dev/synod/model/fastpaxos"
	"github.com/synod-dev/synod/model/fastpaxos/plots"
)

func init() { experiment.Register(New()) }

// Sim is the experiment.
type Sim struct {
	// Ops measured per protocol and cell; Samples of the model's Monte
	// Carlo; RunSeed of the simulator and the Monte Carlo.
	// Rounds of simultaneous requests per collision cell.
	Ops, Samples, Rounds int
	RunSeed              int64
	// Live adds the live loopback cells (live.go); Cases, when set, keeps
	// only the cells of those cases.
	Live bool
	// NoLive drops the four live cells run by default (V.C's claims in
	// the seed's setting).
	NoLive bool
	Cases  []string
}

// New returns the experiment with its defaults.
func New() *Sim { return &Sim{} }

const (
	bW     = fastpaxos.SeedWANScale // ms
	alphaL = fastpaxos.SeedLANAlpha
	bL     = fastpaxos.SeedLANScale // ms
)

var (
	alphas  = []string{"1.2", "1.8"}
	tValues = []string{"1", "3"}
)

// Metric names: sim_* simulated, model_* the seed's reading, topo_* the
// model with self-messages free.
const (
	mN        = "samples"
	mSimMedC  = "sim_median_classic_ms"
	mSimMedF  = "sim_median_fast_ms"
	mSimP99C  = "sim_p99_classic_ms"
	mSimP99F  = "sim_p99_fast_ms"
	mModMedC  = "model_median_classic_ms"
	mModMedF  = "model_median_fast_ms"
	mTopoMedC = "topo_median_classic_ms"
	mTopoMedF = "topo_median_fast_ms"
	mSimX     = "sim_x_star_ms"
	mModX     = "model_x_star_ms"
	mSimPc    = "sim_classic_at_x_star"
	mSimPf    = "sim_fast_at_x_star"
	mModPc    = "model_classic_at_x_star"
	mSimLeadC = "sim_max_classic_lead"
	mSimLeadF = "sim_max_fast_lead"
	mKSC      = "ks_classic"
	mKSF      = "ks_fast"
	mDKWC     = "dkw_classic"
	mDKWF     = "dkw_fast"

	mSimLearnMedF  = "sim_learn_median_fast_ms"
	mSimLearnP99F  = "sim_learn_p99_fast_ms"
	mModLearnMedF  = "model_learn_median_fast_ms"
	mTopoLearnMedF = "topo_learn_median_fast_ms"
	mModLearnMedC  = "model_learn_median_classic_ms"
	mTopoLearnMedC = "topo_learn_median_classic_ms"
	mKSLearnF      = "ks_learn_fast"
	mDKWLearnF     = "dkw_learn_fast"
	mSimLearnMedC  = "sim_learn_median_classic_ms"
	mSimLearnP99C  = "sim_learn_p99_classic_ms"
	mKSLearnC      = "ks_learn_classic"
	mDKWLearnC     = "dkw_learn_classic"
	mSimLearnP10F  = "sim_learn_p10_fast_ms"
	mSimLearnP90F  = "sim_learn_p90_fast_ms"
	mSimLearnFAt   = "sim_learn_fast_at_150ms" // P{L_f ≤ 150 ms}: the low end of the steeper curve
	// The crossing of the simulated L_c and L_f (Fig V.3's division), and of
	// the model's (seed's reading) and the model's with self-messages free.
	mSimLX     = "sim_learn_x_star_ms"
	mSimLPc    = "sim_learn_classic_at_x_star"
	mSimLPf    = "sim_learn_fast_at_x_star"
	mSimLLeadC = "sim_learn_max_classic_lead"
	mSimLLeadF = "sim_learn_max_fast_lead"
	mModLX     = "model_learn_x_star_ms"
	mModLPc    = "model_learn_classic_at_x_star"
	mModLPf    = "model_learn_fast_at_x_star"
	mTopoLX    = "topo_learn_x_star_ms"

	mCollSim    = "sim_collision"
	mCollRecov  = "sim_recovered"
	mCollModel  = "model_collision"
	mCollJudged = "rounds_judged"
	mCollHW     = "collision_halfwidth"
)

func (e *Sim) Name() string { return "seed002-fast-vs-classic-sim" }

func (e *Sim) Description() string {
	return "Seed 002 chapter V.B's Classic vs Fast Paxos setting run with the real protocols in the simulator: " +
		"fastpaxos on 3t+1 nodes and paxos on 2t+1, client links Pareto(α_w 1.2 and 1.8, 100 ms), server links " +
		"Pareto(2, 3 ms), t = 1 and 3, and the all-LAN Pareto case; one client at a time. Client round trips beside " +
		"the model extended by the reply, both protocols' time to learn (paxos's L_c, fastpaxos's L_f) beside the model's, under the seed's reading " +
		"and with self-messages free as in the simulator; collision rates of 2-8 simultaneous clients, and of two clients δ apart, beside the " +
		"model's; CDF plots and the claims table; with --live, fastpaxos against paxos live on loopback (durability memory, the seed's, and fsync, Go client " +
		"and RESP, throughput and conflict rate)."
}

func (e *Sim) Flags(fs *pflag.FlagSet) {
	fs.IntVar(&e.Ops, "ops", 0, "operations measured per protocol and cell (default 400; 30 with --quick)")
	fs.IntVar(&e.Samples, "samples", 0, "Monte Carlo samples of the model (default 200000; 20000 with --quick)")
	fs.IntVar(&e.Rounds, "rounds", 0, "simulated rounds of simultaneous requests per collision cell (default 400; 30 with --quick)")
	fs.BoolVar(&e.NoLive, "no-live", false, "run no live cell (by default the four of V.C's claims in the seed's setting run: paxos and fastpaxos, loopback and WAN client, gRPC, one client, durability memory)")
	fs.BoolVar(&e.Live, "live", false, "also run the live loopback cells: fastpaxos (4 nodes) and paxos (3), durability memory (the seed wrote nothing to stable storage) and fsync, Go client and RESP, 1/4/16 writers")
	fs.StringSliceVar(&e.Cases, "cases", nil, "run only these cases (pareto-wan, pareto-lan, collision, collision-delta, live-loopback, live-wan)")
	fs.Int64Var(&e.RunSeed, "seed", 1, "simulator and Monte Carlo seed")
}

func (e *Sim) sizes(o experiment.Options) (ops, samples int) {
	ops, samples = 400, 200_000
	if o.Quick {
		ops, samples = 30, 20_000
	}
	if e.Ops > 0 {
		ops = e.Ops
	}
	if e.Samples > 0 {
		samples = e.Samples
	}
	return
}

func (e *Sim) Cells(o experiment.Options) ([]experiment.Cell, error) {
	if e.Ops < 0 || e.Samples < 0 || e.Rounds < 0 {
		return nil, fmt.Errorf("--ops %d / --samples %d / --rounds %d: want positive numbers", e.Ops, e.Samples, e.Rounds)
	}
	var cells []experiment.Cell
	for _, a := range alphas {
		for _, t := range tValues {
			cells = append(cells, experiment.NewCell("case", "pareto-wan", "alpha_w", a, "t", t))
		}
	}
	for _, t := range tValues {
		cells = append(cells, experiment.NewCell("case", "pareto-lan", "t", t))
	}
	for _, t := range tValues {
		for _, c := range collisionClients {
			cells = append(cells, collisionCell(t, c))
		}
	}
	for _, t := range tValues {
		for _, d := range collisionDeltas {
			cells = append(cells, collisionDeltaCell(t, d))
		}
	}
	if !e.Live && !e.NoLive && len(e.Cases) == 0 {
		// The seed's own setting of V.C's two claims (nothing on stable
		// storage, one client, clients as proposers), LAN and WAN clients:
		// the cells `run all` measures; --live adds the rest.
		for _, p := range []string{"paxos", "fastpaxos"} {
			cells = append(cells, liveCell(p, "grpc", "1", config.Memory), liveWANCell(p, "grpc", config.Memory))
		}
	}
	if e.Live || slices.Contains(e.Cases, "live-loopback") {
		for _, p := range []string{"paxos", "fastpaxos"} {
			for _, path := range livePaths {
				for _, c := range liveClients {
					for _, d := range liveDurabilities {
						cells = append(cells, liveCell(p, path, c, d))
					}
				}
			}
		}
	}
	if e.Live || slices.Contains(e.Cases, "live-wan") {
		for _, p := range []string{"paxos", "fastpaxos"} {
			for _, path := range livePaths {
				for _, d := range liveDurabilities {
					cells = append(cells, liveWANCell(p, path, d))
				}
			}
		}
	}
	if len(e.Cases) > 0 {
		cells = slices.DeleteFunc(cells, func(c experiment.Cell) bool { return !slices.Contains(e.Cases, c.Get("case")) })
		if len(cells) == 0 {
			return nil, fmt.Errorf("--cases %v: no such case", e.Cases)
		}
	}
	return cells, nil
}

func (e *Sim) RunCell(ctx context.Context, env *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	ops, samples := e.sizes(env.Options)
	t, _ := strconv.Atoi(c.Get("t"))
	lan := fastpaxos.Pareto{Alpha: alphaL, B: bL}
	switch c.Get("case") {
	case "collision", "collision-delta":
		return e.runCollision(env, t, c)
	case "live-loopback", "live-wan":
		return e.runLive(ctx, env, c)
	}
	var w fastpaxos.Pareto
	var title, file string
	var xmax float64
	switch c.Get("case") {
	case "pareto-wan":
		a, _ := strconv.ParseFloat(c.Get("alpha_w"), 64)
		w = fastpaxos.Pareto{Alpha: a, B: bW}
		title = fmt.Sprintf("Round trip, client links Pareto(%s, %g ms), server links Pareto(%g, %g ms), t = %d", c.Get("alpha_w"), bW, alphaL, bL, t)
		file, xmax = "rtt-pareto-wan-a"+c.Get("alpha_w")+"-t"+c.Get("t"), 25*bW
	case "pareto-lan":
		w = lan
		title = fmt.Sprintf("Round trip, all links Pareto(%g, %g ms), t = %d", alphaL, bL, t)
		file, xmax = "rtt-pareto-lan-t"+c.Get("t"), 25*bL
	default:
		return experiment.Outcome{}, fmt.Errorf("unknown case %q", c.Get("case"))
	}
	s := setting{wan: paretoSpec(w.B, w.Alpha), lan: paretoSpec(lan.B, lan.Alpha)}
	rc, err := measure("paxos", 2*t+1, s, ops, e.RunSeed, true)
	if err != nil {
		return experiment.Outcome{}, err
	}
	if ctx.Err() != nil {
		return experiment.Outcome{}, ctx.Err()
	}
	rf, err := measure("fastpaxos", 3*t+1, s, ops, e.RunSeed, false)
	if err != nil {
		return experiment.Outcome{}, err
	}
	ms := roundTrips(w, lan, t, samples, e.RunSeed, false)
	ts := roundTrips(w, lan, t, samples, e.RunSeed, true)
	mc, mf, tc, tf := ms.rttC, ms.rttF, ts.rttC, ts.rttF
	met := map[string]float64{
		mN:       float64(min(len(rc.rtts), len(rf.rtts))),
		mSimMedC: quantileOf(rc.rtts, 0.5), mSimMedF: quantileOf(rf.rtts, 0.5),
		mSimP99C: quantileOf(rc.rtts, 0.99), mSimP99F: quantileOf(rf.rtts, 0.99),
		mModMedC: quantileOf(mc, 0.5), mModMedF: quantileOf(mf, 0.5),
		mTopoMedC: quantileOf(tc, 0.5), mTopoMedF: quantileOf(tf, 0.5),
		mKSC: ks(rc.rtts, tc), mKSF: ks(rf.rtts, tf),
		mDKWC: dkw(len(rc.rtts)), mDKWF: dkw(len(rf.rtts)),
		mSimLearnMedF: quantileOf(rf.learns, 0.5), mSimLearnP99F: quantileOf(rf.learns, 0.99),
		mModLearnMedF: quantileOf(ms.learnF, 0.5), mTopoLearnMedF: quantileOf(ts.learnF, 0.5),
		mModLearnMedC: quantileOf(ms.learnC, 0.5), mTopoLearnMedC: quantileOf(ts.learnC, 0.5),
		mKSLearnF: ks(rf.learns, ts.learnF), mDKWLearnF: dkw(len(rf.learns)),
		mSimLearnMedC: quantileOf(rc.learns, 0.5), mSimLearnP99C: quantileOf(rc.learns, 0.99),
		mKSLearnC: ks(rc.learns, ts.learnC), mDKWLearnC: dkw(len(rc.learns)),
		mSimLearnP10F: quantileOf(rf.learns, 0.1), mSimLearnP90F: quantileOf(rf.learns, 0.9),
		mSimLearnFAt: ecdf(rf.learns, 150),
	}
	lx := crossing(rc.learns, rf.learns, math.Inf(1))
	met[mSimLLeadC], met[mSimLLeadF] = lx.leadC, lx.leadF
	if lx.twoRegions {
		met[mSimLX], met[mSimLPc], met[mSimLPf] = lx.x, lx.pc, lx.pf
	}
	if mx := crossing(ms.learnC, ms.learnF, math.Inf(1)); mx.twoRegions {
		met[mModLX], met[mModLPc], met[mModLPf] = mx.x, mx.pc, mx.pf
	}
	if tx := crossing(ts.learnC, ts.learnF, math.Inf(1)); tx.twoRegions {
		met[mTopoLX] = tx.x
	}
	sx := crossing(rc.rtts, rf.rtts, math.Inf(1))
	met[mSimLeadC], met[mSimLeadF] = sx.leadC, sx.leadF
	if sx.twoRegions {
		met[mSimX], met[mSimPc], met[mSimPf] = sx.x, sx.pc, sx.pf
	}
	if mx := crossing(mc, mf, math.Inf(1)); mx.twoRegions {
		met[mModX], met[mModPc] = mx.x, mx.pc
	}
	files, err := plots.Draw(env.Out, file, title, "client round trip (ms)", "P{RTT ≤ x}", []plots.Line{
		cdfLine("Classic, simulated (paxos)", rc.rtts, xmax, false),
		cdfLine("Fast, simulated (fastpaxos)", rf.rtts, xmax, false),
		cdfLine("Classic, model + reply", mc, xmax, true),
		cdfLine("Fast, model + reply", mf, xmax, true),
		cdfLine("Classic, model, self-messages free", tc, xmax, true),
		cdfLine("Fast, model, self-messages free", tf, xmax, true),
	})
	if err != nil {
		return experiment.Outcome{}, err
	}
	lfiles, err := plots.Draw(env.Out, strings.Replace(file, "rtt-", "learn-", 1), strings.Replace(title, "Round trip", "Time to learn", 1), "time to learn (ms)", "P{L ≤ x}", []plots.Line{
		cdfLine("Classic, simulated (paxos, the leader)", rc.learns, xmax, false),
		cdfLine("Fast, simulated (fastpaxos, one learner)", rf.learns, xmax, false),
		cdfLine("Classic, model", ms.learnC, xmax, true),
		cdfLine("Fast, model", ms.learnF, xmax, true),
		cdfLine("Classic, model, self-messages free", ts.learnC, xmax, true),
		cdfLine("Fast, model, self-messages free", ts.learnF, xmax, true),
	})
	if err != nil {
		return experiment.Outcome{}, err
	}
	return experiment.Outcome{Metrics: met, Labels: map[string]string{"paxos_leader": rc.leader},
		Detail: map[string]any{"plots": append(files, lfiles...), "paxos_ops": rc.ops, "fastpaxos_ops": rf.ops, "learn_fallbacks": rf.fallbacks}}, nil
}

// cdfLine is the empirical CDF of sorted samples up to xmax.
func cdfLine(name string, s []float64, xmax float64, dashed bool) plots.Line {
	l := plots.Line{Name: name, Dashed: dashed}
	for i, x := range s {
		if x > xmax {
			break
		}
		l.X = append(l.X, x)
		l.Y = append(l.Y, float64(i+1)/float64(len(s)))
	}
	return l
}

// ks is the Kolmogorov distance between the empirical CDF of sim and that
// of the (much larger) model sample.
func ks(sim, model []float64) float64 {
	d := 0.0
	for i, x := range sim {
		m := ecdf(model, x)
		d = max(d, math.Abs(float64(i+1)/float64(len(sim))-m), math.Abs(float64(i)/float64(len(sim))-m))
	}
	return d
}

// dkw is the Dvoretzky–Kiefer–Wolfowitz bound on the Kolmogorov distance of
// n samples from their distribution, exceeded with probability 10⁻³.
func dkw(n int) float64 {
	if n == 0 {
		return math.NaN()
	}
	return math.Sqrt(math.Log(2/1e-3) / (2 * float64(n)))
}
