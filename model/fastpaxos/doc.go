// Package fastpaxos is the probabilistic model of the Grid Services thesis, chapter V.B
// ("Practical Performance of Paxos", Classic vs Fast Paxos): the distribution
// of the time for a learner to learn a client's request, P{L_c ≤ x} (Classic)
// and P{L_f ≤ x} (Fast), and the probability that concurrent requests collide,
// for independent link latencies drawn from a Pareto distribution or from a
// recorded trace. It is pure computation; `synod-lab model fastpaxos` prints and
// plots it, and the experiment seed002-fast-vs-classic-model sets the seed's
// claims beside it. (The protocol is protocol/fastpaxos, a different package.)
//
// # The model (chapter V.A and V.B)
//
// Failure-free, one stable leader (no prepare phase), local computation takes
// no time, every message latency is an independent draw: W for a message
// between a client and a server (the seed's α_w, b_w: a wide-area link when the
// clients are remote), ℓ for a message between two servers (α_l, b_l: the
// servers' local-area network). With t the number of faulty acceptors tolerated
// (Table V.1): Classic Paxos has 2t+1 acceptors and a quorum of t+1; Fast Paxos
// has 3t+1 acceptors and a fast quorum of 2t+1.
//
// The seed defines R(Src, Dst, Mid, Q) as the time from Src sending to every
// server of Mid until Dst has received the triggered messages of Q of them,
// and gives L_c = latency(prop, leader) + R(leader, learner, A, t+1) and
// L_f = R(prop, learner, A, 2t+1), without saying how R is computed. We compute
// it as an order statistic: each member a of Mid relays after its own receipt,
// so the message from a reaches Dst at (Src→a) + (a→Dst), and Dst has Q of
// them at the Q-th smallest of those |Mid| sums:
//
//	R(leader, learner, A_c, t+1)  = (t+1)-th smallest over the 2t+1 acceptors a of ℓ(leader→a) + ℓ(a→learner)
//	R(prop, learner, A_f, 2t+1)   = (2t+1)-th smallest over the 3t+1 acceptors a of W(prop→a) + ℓ(a→learner)
//	L_c = W(prop→leader) + R(leader, learner, A_c, t+1)
//	L_f = R(prop, learner, A_f, 2t+1)
//
// Every one of those messages crosses a link, including the leader's phase 2a
// to itself and an acceptor's vote to a learner on the same server: the seed's
// R treats every member of Mid alike, and footnote 1's "the leader is an
// acceptor" is not carried into the formula. This is the reading under which
// the model reproduces the seed's numbers (medians, crossover, collision
// probabilities); the seed is silent on it.
//
// The all-LAN case (Fig V.6) is the same model with W distributed as ℓ
// (α = 2.0, b = 3 ms for both). The empirical cases use traces for W and ℓ (see
// "Traces" below).
//
// Collisions (Fig V.5, and the number of clients, end of V.B.1). Client i sends
// its request at time o_i to all 3t+1 acceptors; each acceptor votes for the
// request it receives first; "the two requests conflict if none of them can
// obtain a quorum of acceptors" (a fast quorum, 2t+1). The two clients of the
// seed send at r and r + δ; with c clients we take them δ apart (0, δ, …,
// (c−1)δ), so δ = 0 is c simultaneous requests. Votes at distinct acceptors
// are independent; see Collision for the exact formula. The link latencies of
// the collision figures are the clients' (WAN) links; LAN links play no part in
// who is first at an acceptor.
//
// # Numerical method and error bounds
//
//   - Order statistics are exact: P{X_(k) ≤ x} = Σ_{i≥k} C(n,i) G(x)^i (1−G(x))^{n−i}
//     for n i.i.d. variables with CDF G (KthSmallestCDF).
//   - Sums of independent latencies have no closed form for Pareto, so they are
//     convolved numerically on a uniform grid x_j = jH (Grid; FFT convolution).
//     Each link latency X is replaced by two lattice variables, X rounded down
//     and X rounded up to the grid, which bracket it pathwise (⌊X⌋ ≤ X ≤ ⌈X⌉).
//     Sums and order statistics are monotone in every argument, so the chains
//     computed from the rounded-down and rounded-up links bracket L_c and L_f
//     pathwise, and their CDFs, computed exactly on the lattice, bracket the
//     true CDF at every grid point (Bracket.Lo ≤ P{L ≤ x_j} ≤ Bracket.Hi). The
//     horizontal gap is at most 3H for Classic and 2H for Fast (one H per
//     link); the vertical gap is reported (Bracket.MaxErr; 0.5–2·10⁻³ with the
//     default 32768 points). Mass beyond the grid is overflow and does not
//     disturb the CDF on the grid (latencies are non-negative). FFT round-off
//     (≈10⁻¹⁵) is negligible against that and is tested against the direct sum.
//   - Collision probabilities are exact given p_i, the probability that
//     request i is first at an acceptor; p_i is a one-dimensional integral over
//     the quantile function whose integrand is monotone, so its left and right
//     Riemann sums bracket it with a gap of at most 1/panels (FirstProb;
//     ≈3·10⁻⁵ by default).
//   - Monte Carlo with a fixed seed (SampleLearn, SampleCollision) simulates the
//     same model message by message. The tests check that its empirical CDF
//     lies inside the numerical bracket widened by the Dvoretzky–Kiefer–Wolfowitz
//     bound, and its collision frequency within five standard errors.
//
// # Typos and gaps in the seed, and what we do
//
//   - Table V.1 gives message-chain lengths 4 (Classic) and 3 (Fast), but the
//     flow diagram of V.A has 3 and 2 hops (proposer → leader → acceptors →
//     learners; proposer → acceptors → learners), the text says Fast's chain is
//     "one shorter" and that the reply to the client is ignored ("we concentrate
//     on the time to learn"). The table evidently counts the reply. We model the
//     diagram's chains, without the reply: 3 links for Classic, 2 for Fast.
//   - V.B.1, the all-LAN case: the text says "for any time value x,
//     P{L_c ≤ x} ≥ P{L_f ≤ x}", the opposite of its own claim that this is "a case
//     in which Fast Paxos clearly performs better". The intended inequality is
//     P{L_f ≤ x} ≥ P{L_c ≤ x}; we check that one, and report that the literal
//     one does not hold.
//   - Fig V.5's caption says "b_l = 100"; the text says the collision analysis
//     uses α_w = 1.2 and b = 100, i.e. the wide-area (client) links, b_w = 100 ms.
//     We use the clients' links, Pareto(1.2, 100 ms).
//   - V.B.2 says "four sets of distributions … both sets containing one
//     wide-area and one local-area distribution", and calls Fig V.10 a "density
//     probability function" although it plots probabilities: loose wording, no
//     effect on the model.
//   - The seed says how many clients (2, 4, 6, 8) only for its cluster
//     measurement (Fig V.13(b)), where δ is uncontrolled; the model needs
//     offsets, and we take the clients δ apart (see above).
//
// # Traces
//
// The seed's empirical distributions come from NWS traces on the GrADS testbed
// (August–October 2002: TCP connect, send 4 bytes, receive 4 bytes, close).
// Those traces are not available to us. We use traces we record ourselves with
// `synod-lab model record-trace` (package trace): the same NWS-style probe against
// an echo server on 127.0.0.1, shipped in model/fastpaxos/traces/ with a README
// saying how they were recorded. A trace is one latency in ms per line (see
// ReadTrace); Empirical turns it into a continuous distribution.
package fastpaxos
