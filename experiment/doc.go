// Package experiment runs Synod's reproducible experiments: `synod-lab experiment
// list` and `synod-lab experiment run NAME`. Each experiment reproduces what a seed
// measured (and, where the seed only described a scenario, measures it), prints
// the seed's reported figures beside ours, and writes results.json and plots.
//
// # Adding an experiment
//
// Implement Experiment (Name, Description, Flags, Cells, RunCell, Seed,
// Report) in a sub-package, call Register from its init, and import the
// sub-package from experiment/all. A cell is one parameter combination
// (NewCell("protocol", "abd", "N", "3")); RunCell measures it and returns
// metrics by name. Seed returns the seed's figures under the same cell keys and
// metric names, so the table and the plots put them side by side. Optional:
// Deriver computes metrics across cells (applied to ours and the seed's alike,
// e.g. throughput relative to N=1), Summarizer prints prose beside the
// table, Claimer judges the seed's claims (claim.go, stats.go): every claim
// carries the paper's figure, ours, a verdict (holds, does not hold,
// inconclusive, consistent by construction, not measured) decided by a
// stated test on repeated runs (RatioAbove/Below: bootstrap interval of a
// ratio of means; DiffAbove/Below: Welch; MeanAbove/Below: t; SlopeAbove/
// Below: least squares; Exact: a rule on deterministic figures; Sweep: a
// parameter the seed does not state; Constructed: a model calibrated from
// the seed's own numbers), and, where it does not hold, the measured cause.
//
// # Repeated runs
//
// Every cell runs --repeat times (DefaultReps, or the experiment's Repeater
// or CellRepeater); the table shows means, the claims use every run's value.
// A cell that repeats its measurement itself (20 round trips, 10 simulated
// seeds) reports each value in Outcome.Samples and runs once. Env.Rep is
// the current run: a simulated cell adds it to its seed so runs differ.
//
// # One report
//
// RunAll (synod-lab experiment run all [--quick]) runs every experiment and
// writes docs/REPRODUCTION.md with every claim, its statistics and cause,
// each table and the PNG plots copied to docs/reproduction/. It rewrites
// the report after every experiment, keeping the earlier report's sections
// of the experiments not run yet, so an interrupted pass leaves a whole
// report (--only re-runs some experiments and keeps the others'; --with
// "NAME --quick=false" runs one at full size in a quick pass). CheckReport
// checks such a report: every claim line has a verdict of Verdicts with its
// statistics (and a cause when it does not hold), the header counts them,
// and no plot link dangles. CI checks the committed report with it
// (TestCommittedReport) and runs a quick pass of at least one experiment of
// every seed, in cells of seconds, through RunAll (experiment/all
// TestQuickReport; --with "NAME --duration 300ms" and per-experiment flags
// shrink a live cell).
//
// # What the framework does
//
//   - Runs the cells in order with a progress display: each line names the
//     cell (i/n and its parameters) and the time since it began; drivers such
//     as bench.Run print their live ops/s through Env.Progress.
//   - Owns everything a cell starts: clusters (Env.Up, or Env.Cluster to share
//     one cluster between consecutive cells with the same key), paused nodes
//     (Env.Pause), helper processes such as redis-server (Env.Start). All of
//     it is stopped by PID when the run ends, when a cell fails and on Ctrl-C
//     (the command cancels the context; the cell returns; cleanup runs).
//     Clusters live in a scratch directory that is removed at the end; the
//     node logs of a failed cell are kept in OUT/logs/.
//   - A cell that cannot run here returns Unavailable(reason) (say, a protocol
//     that is not registered in this binary): its row says so and the run goes
//     on. Any other error marks the cell failed; the run goes on and the
//     command exits non-zero at the end.
//   - Prints the table (our row, then the seed's, per cell; labels such as
//     the durability mode beside our numbers; reasons as numbered notes),
//     the summary and the notes; writes OUT/results.json (every cell with its
//     parameters, status, metrics, labels, detail and the seed's figures) and
//     OUT/<plot>.png and .svg for each PlotSpec, drawn with gonum/plot: ours in
//     solid colours, the seed's in a lighter shade (bars) or dashed (lines).
//
// Metrics must be finite numbers (JSON has no NaN): a value that is not is
// dropped and shows as "-".
package experiment
