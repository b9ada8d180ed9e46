// Package seed000 holds the ESDS thesis's experiments (Cheiner, "Implementation and
// Evaluation of an Eventually-Serializable Data Service", MIT 1997, chapter 5):
//
//   - seed000-throughput-vs-n (Throughput): Test Series 1, §5.4, Fig. 5.1:
//     throughput at 330 ops/s for N = 1..20, replicas sharing 10 processors
//     beyond N = 10.
//   - seed000-response-vs-n (Response): Test Series 2, §5.5, Figs. 5.2-5.11:
//     throughput, AT_r and AT_fe for N = 1..10 at 33, 33·N and 330 ops/s,
//     gossip on and off.
//   - seed000-strict-share (Strict): Test Series 3, §5.6, Figs. 5.12-5.14:
//     latency and degree of inconsistency vs the share of strict operations,
//     0-100 % in steps of 10, N = 2, 4, 6, Counter and String.
//
// Each runs in simulation (--mode sim) and on live loopback clusters (--mode
// live); both by default.
//
// # Which variant is judged (decision)
//
// The reproduction report (docs/REPRODUCTION.md) judges Test Series 2 and 3
// (seed 000 §5.5, §5.6) on the simulator at full size (--mode sim: N = 1..10,
// gossip 20 ms / 100 ms / 1 s, 10 seeds per cell), not on live clusters.
// Every claim of chapter 5 is about a replica's capacity: the seed's
// replicas "keep up with the user requests if they come approximately once
// in 30 milliseconds" (§5.3) on ten workstations, so AT_r levels off, AT_fe
// grows and throughput stops rising as each replica's queue fills. Only the
// simulator's CPU model reproduces that cost (28 ms per request, its own
// processor per replica, §5.4's ten processors). A live Synod replica takes
// microseconds per operation and all of them share this machine's two
// cores: at the seed's rates (33, 33·N, 330 ops/s) no live replica ever
// queues, so a live "levels off at N = 4" or "drops as replicas join" would
// measure the machine's scheduler, not ESDS; and live AT_r is not
// observable, Counter inconsistency not at all (see below). No claim of
// §5.4-5.6 needs a live cell that the simulator cannot give, so none is
// added to the report's pass. The live cells stay as the check that the
// real protocol runs the seed's workload (--mode live or both: their own
// claims, e.g. Fig. 5.1 (live), are printed and judged when they run, and
// seed000-throughput-vs-n's quick pass in the report runs both).
//
// # Choices where the seed is silent or differs from Synod
//
//   - The plots did not survive in the seed's text: there are no numbers to
//     print beside ours. Each experiment's summary quotes the prose's trend
//     for every figure and states whether our shape agrees, with the test
//     used (e.g. "rises linearly": least-squares slope > 0 and R² > 0.8).
//   - Workload: each run submits --ops (300, the seed's) operations in an open
//     loop at the cell's rate; series 1 and 2 submit non-strict Counter adds
//     (the seed says "a fixed number of non-strict operations", service not
//     named; §5.6 used Counter adds). Series 3's rate is not stated: --rate,
//     33 ops/s by default (a rate one replica keeps up with). Throughput is
//     completed/τ, τ from the first submission to the last response (the
//     seed's AP = 300/τ). The seed averaged 10 runs; simulation averages
//     --runs seeds (10), live cells run once.
//   - Front end: the seed ran one front-end process spreading operations over
//     the replicas "in a balanced fashion". Synod's front end is the contacted
//     node; in simulation arrival k goes to replica k mod N (sticky open-loop
//     clients), live the bench driver's gRPC clients are spread over the nodes.
//   - Replica capacity (simulation): the seed's replica "can keep up with the
//     user requests if they come approximately once in 30 milliseconds". The
//     simulator's CPU model (sim/cpu.go) charges --op-cost (28 ms) per client
//     request, --apply-cost (0.2 ms) per service Apply and --msg-cost (0.3 ms)
//     per gossip message received, and inputs queue while a replica is busy
//     (the seed's MPI queue). Values are computed as the thesis's ESDSOptImpl
//     does (esds values=recompute: re-apply every non-stable operation per
//     response), so AT_r carries the re-application cost the seed names. Links
//     0.5-1.5 ms, no fsync (the seed persisted nothing). Series 1 places
//     replica i on processor i mod 10.
//   - Live runs use the real machine: replicas have no artificial cost, take
//     microseconds per operation, and all share this machine's cores; the
//     driver is bench's open loop (Poisson arrivals at the rate, latency from
//     the call), through the gRPC API (per-request strict flag). AT_r is not
//     observable live. Durability --durability (memory by default).
//   - --send 1|2|all: the ESDS front end's policy (protocol/esds, frontend.go):
//     replicas each operation is sent to; the seed used one and left it open.
//   - Gossip off: esds gossip=off (protocol/esds/experiments.go): replicas
//     learn only what their front end sends them, as in Figs. 5.7 and 5.10.
//     Such runs are not checked for convergence (they cannot converge).
//   - Inconsistency (Defs. 3, 4): in simulation check.ESDS compares every
//     response with the operation's value in the converged final order. Live,
//     String appends carry unique tokens, so the converged string spells the
//     eventual order and each append's value in it; the Counter's final order
//     is not observable through the client API, so live Counter cells report
//     latency only. "Def. 4 incons %" is among all responses (Def. 4); "of
//     non-strict %" among non-strict ones.
package seed000
