package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/synod-dev/synod/internal/cli"
	"github.com/synod-dev/synod/model/fastpaxos"
	"github.com/synod-dev/synod/model/fastpaxos/plots"
	"github.com/synod-dev/synod/model/fastpaxos/trace"
)

func init() {
	modelCmd := &cobra.Command{
		Use:   "model",
		Short: "Analytical models from the seeds (seed 002 chapter V: Classic vs Fast Paxos time to learn and collisions)",
	}
	old := mcCmd("check")
	old.Hidden, old.Deprecated = true, "the model checker is synod-lab mc"
	modelCmd.AddCommand(modelFastPaxosCmd(), modelRecordTraceCmd(), old)
	cli.AddCommand(modelCmd)
}

// modelCase is one setting of the time-to-learn model, with its plot range.
type modelCase struct {
	name  string // file-name safe
	title string
	s     fastpaxos.Setting
	xmax  float64
}

func loadTrace(path string) (*fastpaxos.Empirical, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s, err := fastpaxos.ReadTrace(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return fastpaxos.NewEmpirical(filepath.Base(path), s)
}

// parseDeltas reads "0:500:25" (from:to:step) or a comma list.
func parseDeltas(s string) ([]float64, error) {
	if parts := strings.Split(s, ":"); len(parts) == 3 {
		var v [3]float64
		for i, p := range parts {
			f, err := strconv.ParseFloat(p, 64)
			if err != nil {
				return nil, fmt.Errorf("--deltas %q: %w", s, err)
			}
			v[i] = f
		}
		if v[2] <= 0 || v[1] < v[0] || (v[1]-v[0])/v[2] > 10000 {
			return nil, fmt.Errorf("--deltas %q: want FROM:TO:STEP with STEP > 0 and TO ≥ FROM", s)
		}
		var out []float64
		for i := 0; v[0]+float64(i)*v[2] <= v[1]+1e-9; i++ {
			out = append(out, v[0]+float64(i)*v[2])
		}
		return out, nil
	}
	var out []float64
	for _, p := range strings.Split(s, ",") {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || f < 0 {
			return nil, fmt.Errorf("--deltas %q: %q is not a non-negative number", s, p)
		}
		out = append(out, f)
	}
	return out, nil
}

func fmtMs(v float64) string {
	if math.IsInf(v, 1) {
		return "beyond"
	}
	return fmt.Sprintf("%.4g", v)
}

func modelFastPaxosCmd() *cobra.Command {
	var (
		alphaW                 []float64
		bW, alphaL, bL         float64
		ts, clients            []int
		wanTrace, lanTrace     string
		noLAN                  bool
		points, panels, mc, at int
		xmax                   float64
		deltas, plotDir, csvs  string
	)
	cmd := &cobra.Command{
		Use:   "fastpaxos",
		Short: "Time to learn P{L_c ≤ x}, P{L_f ≤ x} and collision probabilities (seed 002, chapter V.B)",
		Long: `Compute seed 002's chapter V.B model (see the doc of package model/fastpaxos):

  L_c = W(client→leader) + (t+1)-th smallest over 2t+1 acceptors of ℓ(leader→a) + ℓ(a→learner)
  L_f = (2t+1)-th smallest over 3t+1 acceptors of W(client→a) + ℓ(a→learner)

for i.i.d. link latencies: W on client links, ℓ between servers. Cases: Pareto
client links (each --alpha-w, --b-w) with Pareto server links (--alpha-l,
--b-l); the all-LAN case (both Pareto(--alpha-l, --b-l); off with --no-lan);
and, with --lan-trace (and optionally --wan-trace), empirical traces (files of
one latency in ms per line; client links use --wan-trace, or --lan-trace when
absent). Each for every --t.

CDFs are computed numerically on a grid of --points (exact order statistics,
FFT convolution of the link latencies rounded down and up to the grid, which
bracket the true CDF; the bracket's half-width is printed as ±). Collision
probabilities (two clients δ apart, and 2–8 clients δ apart) are exact up to a
quantile integral bracketed within 1/--panels. --monte-carlo N also simulates
N learnings message by message (fixed seed) and prints its medians.

Prints tables; --plots DIR writes a PNG and SVG per CDF and per collision
figure; --csv DIR the full curves.`,
		Example: `  synod-lab model fastpaxos
  synod-lab model fastpaxos --alpha-w 1.2 --t 1 --plots /tmp/fp --csv /tmp/fp
  synod-lab model fastpaxos --no-lan --lan-trace model/fastpaxos/traces/loopback-nws.txt --alpha-w 1.8`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			ds, err := parseDeltas(deltas)
			if err != nil {
				return err
			}
			lan, err := fastpaxos.NewPareto(alphaL, bL)
			if err != nil {
				return fmt.Errorf("--alpha-l/--b-l: %w", err)
			}
			type wanDist struct {
				name string
				d    fastpaxos.Dist
				xmax float64
			}
			var wans []wanDist
			var cases []modelCase
			for _, t := range ts {
				if t < 1 || t > 20 {
					return fmt.Errorf("--t %d: want 1..20", t)
				}
			}
			for _, a := range alphaW {
				w, err := fastpaxos.NewPareto(a, bW)
				if err != nil {
					return fmt.Errorf("--alpha-w/--b-w: %w", err)
				}
				wans = append(wans, wanDist{fmt.Sprintf("pareto-wan-a%g", a), w, 25 * bW})
			}
			for _, w := range wans {
				for _, t := range ts {
					cases = append(cases, modelCase{fmt.Sprintf("%s-t%d", w.name, t),
						fmt.Sprintf("client links %v, server links %v, t = %d", w.d, lan, t),
						fastpaxos.Setting{WAN: w.d, LAN: lan, T: t}, w.xmax})
				}
			}
			if !noLAN {
				for _, t := range ts {
					cases = append(cases, modelCase{fmt.Sprintf("pareto-lan-t%d", t),
						fmt.Sprintf("all links %v, t = %d", lan, t),
						fastpaxos.Setting{WAN: lan, LAN: lan, T: t}, 25 * bL})
				}
			}
			if wanTrace != "" && lanTrace == "" {
				return errors.New("--wan-trace needs --lan-trace (the servers' links)")
			}
			if lanTrace != "" {
				l, err := loadTrace(lanTrace)
				if err != nil {
					return err
				}
				var w fastpaxos.Dist = l
				name := "trace-lan"
				if wanTrace != "" {
					if w, err = loadTrace(wanTrace); err != nil {
						return err
					}
					name = "trace-wan"
				}
				xm := 2 * (w.Quantile(0.999) + 2*l.Quantile(0.999))
				wans = append(wans, wanDist{name, w, xm})
				for _, t := range ts {
					cases = append(cases, modelCase{fmt.Sprintf("%s-t%d", name, t),
						fmt.Sprintf("client links %v, server links %v, t = %d", w, l, t),
						fastpaxos.Setting{WAN: w, LAN: l, T: t}, xm})
				}
			}
			for _, dir := range []string{plotDir, csvs} {
				if dir != "" {
					if err := os.MkdirAll(dir, 0o755); err != nil {
						return err
					}
				}
			}
			for _, c := range cases {
				if xmax > 0 {
					c.xmax = xmax
				}
				if err := printCase(out, c, points, at, mc, plotDir, csvs); err != nil {
					return err
				}
			}
			for _, w := range wans {
				wds := ds
				if _, ok := w.d.(*fastpaxos.Empirical); ok && !cmd.Flags().Changed("deltas") {
					// A trace's own scale: 0 to three medians in 10 steps.
					step := 3 * w.d.Quantile(0.5) / 10
					wds = nil
					for i := 0; i <= 10; i++ {
						wds = append(wds, float64(i)*step)
					}
				}
				if err := printCollisions(out, w.name, w.d, ts, clients, wds, panels, plotDir, csvs); err != nil {
					return err
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Float64SliceVar(&alphaW, "alpha-w", []float64{1.2, 1.8}, "Pareto shapes of the client (WAN) links (the seed's α_w)")
	f.Float64Var(&bW, "b-w", 100, "Pareto minimum of the client links, ms (b_w)")
	f.Float64Var(&alphaL, "alpha-l", 2.0, "Pareto shape of the server (LAN) links (α_l)")
	f.Float64Var(&bL, "b-l", 3, "Pareto minimum of the server links, ms (b_l)")
	f.IntSliceVar(&ts, "t", []int{1, 3}, "acceptor failures tolerated (Classic 2t+1 acceptors, Fast 3t+1)")
	f.BoolVar(&noLAN, "no-lan", false, "leave out the all-LAN Pareto case")
	f.StringVar(&wanTrace, "wan-trace", "", "trace file for the client links (one latency in ms per line)")
	f.StringVar(&lanTrace, "lan-trace", "", "trace file for the server links (and the client links without --wan-trace)")
	f.IntVar(&points, "points", 1<<15, "grid points of each CDF")
	f.Float64Var(&xmax, "xmax", 0, "grid end, ms (default: 25·b of the client links; traces: from their 99.9th percentiles)")
	f.IntVar(&at, "rows", 16, "rows of each printed CDF table")
	f.IntVar(&mc, "monte-carlo", 0, "also simulate N learnings message by message and print their medians")
	f.IntSliceVar(&clients, "clients", []int{2, 4, 6, 8}, "client counts for the collision table")
	f.StringVar(&deltas, "deltas", "0:500:50", "offsets δ between clients, ms: FROM:TO:STEP or a list (traces: default 0 to 3 medians)")
	f.IntVar(&panels, "panels", fastpaxos.DefaultPanels, "panels of the collision quantile integral (error ≤ 1/panels)")
	f.StringVar(&plotDir, "plots", "", "write PNG and SVG plots into this directory")
	f.StringVar(&csvs, "csv", "", "write CSV files into this directory")
	return cmd
}

func printCase(out io.Writer, c modelCase, points, rows, mc int, plotDir, csvDir string) error {
	g, err := fastpaxos.NewGrid(c.xmax, points)
	if err != nil {
		return err
	}
	cur, err := fastpaxos.TimeToLearn(c.s, g)
	if err != nil {
		return err
	}
	q := fastpaxos.TableV1(c.s.T)
	fmt.Fprintf(out, "\n== %s: %s\n", c.name, c.title)
	fmt.Fprintf(out, "   Classic %d acceptors, quorum %d; Fast %d acceptors, fast quorum %d; grid step %.3g ms; bracket ± ≤ %.1e (Classic), %.1e (Fast)\n",
		q.ClassicN, q.ClassicQ, q.FastN, q.FastQ, g.H, cur.Classic.MaxErr(), cur.Fast.MaxErr())
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "x ms\tP{L_c ≤ x}\tP{L_f ≤ x}\tP{W ≤ x}\tL_c − L_f\t")
	// Rows up to where both curves pass 0.99 (the grid's end if later).
	span := c.xmax
	if x1, _, _ := cur.Classic.Quantile(g, 0.99); !math.IsInf(x1, 1) {
		if x2, _, _ := cur.Fast.Quantile(g, 0.99); !math.IsInf(x2, 1) {
			span = max(x1, x2)
		}
	}
	rows = max(rows, 2)
	for i := 1; i <= rows; i++ {
		x := span * float64(i) / float64(rows)
		pc, pf := cur.Classic.At(g, x), cur.Fast.At(g, x)
		j := min(int(math.Round(x/g.H)), g.N-1)
		fmt.Fprintf(tw, "%.4g\t%.4f\t%.4f\t%.4f\t%+.4f\t\n", x, pc, pf, cur.WAN[j], pc-pf)
	}
	tw.Flush()
	for _, v := range []struct {
		name string
		b    fastpaxos.Bracket
	}{{"Classic", cur.Classic}, {"Fast", cur.Fast}} {
		var parts []string
		for _, u := range []float64{0.5, 0.9, 0.99} {
			x, _, _ := v.b.Quantile(g, u)
			parts = append(parts, fmt.Sprintf("p%g %s", u*100, fmtMs(x)))
		}
		fmt.Fprintf(out, "   %-8s %s ms\n", v.name, strings.Join(parts, ", "))
	}
	cmp := fastpaxos.Compare(cur)
	switch {
	case cmp.TwoRegions:
		fmt.Fprintf(out, "   two regions: Classic ahead below, Fast ahead above x* = %.1f ms, where P{L_c ≤ x*} = %.3f, P{L_f ≤ x*} = %.3f\n", cmp.Crossover, cmp.ClassicAt, cmp.FastAt)
	case cmp.FastAhead && !cmp.ClassicAhead:
		fmt.Fprintln(out, "   Fast at or above Classic everywhere")
	case cmp.ClassicAhead && !cmp.FastAhead:
		fmt.Fprintln(out, "   Classic at or above Fast everywhere")
	default:
		fmt.Fprintln(out, "   the curves cross more than once (or not visibly)")
	}
	fmt.Fprintf(out, "   largest lead: Classic %+.3f at %.1f ms, Fast %+.3f at %.1f ms (± %.1e)\n",
		cmp.MaxClassicLead, cmp.MaxClassicLeadAt, cmp.MaxFastLead, cmp.MaxFastLeadAt, cmp.LeadErr)
	if mc > 0 {
		lc, lf, err := fastpaxos.SampleLearn(c.s, mc, 1)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "   Monte Carlo (%d runs, seed 1): median Classic %.1f ms, Fast %.1f ms; DKW ±%.3f at 99.9%%\n",
			mc, lc[len(lc)/2], lf[len(lf)/2], fastpaxos.DKW(mc, 1e-3))
	}
	if plotDir != "" {
		files, err := plots.CDF(plotDir, "cdf-"+c.name, "Time to learn: "+c.title, cur)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "   plot: %s\n", strings.Join(files, " "))
	}
	if csvDir != "" {
		p := filepath.Join(csvDir, "cdf-"+c.name+".csv")
		if err := writeFile(p, cur.WriteCSV); err != nil {
			return err
		}
		fmt.Fprintf(out, "   csv:  %s\n", p)
	}
	return nil
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func printCollisions(out io.Writer, name string, w fastpaxos.Dist, ts, clients []int, ds []float64, panels int, plotDir, csvDir string) error {
	fmt.Fprintf(out, "\n== collisions, client links %v: P{no request first at 2t+1 of the 3t+1 acceptors}, clients δ ms apart\n", w)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := []string{"δ ms"}
	type col struct{ t, c int }
	var cols []col
	for _, t := range ts {
		for _, c := range clients {
			if c < 2 {
				return fmt.Errorf("--clients %d: want at least 2", c)
			}
			cols = append(cols, col{t, c})
			header = append(header, fmt.Sprintf("t=%d c=%d", t, c))
		}
	}
	fmt.Fprintln(tw, strings.Join(header, "\t")+"\t")
	var all []fastpaxos.CollisionPoint
	series := map[col][]fastpaxos.CollisionPoint{}
	for _, cl := range cols {
		pts, err := fastpaxos.CollisionCurve(w, cl.t, cl.c, ds, panels)
		if err != nil {
			return err
		}
		series[cl] = pts
		all = append(all, pts...)
	}
	maxErr := 0.0
	for i, d := range ds {
		row := []string{fmt.Sprintf("%.4g", d)}
		for _, cl := range cols {
			p := series[cl][i].P
			maxErr = max(maxErr, p.Err())
			row = append(row, fmt.Sprintf("%.4f", p.Mid()))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()
	fmt.Fprintf(out, "   ± ≤ %.1e; δ = 0 exactly: 1 − c·P{Bin(3t+1, 1/c) ≥ 2t+1}:", maxErr)
	for _, cl := range cols {
		fmt.Fprintf(out, " t=%d c=%d %.4f", cl.t, cl.c, fastpaxos.SimultaneousCollision(cl.t, cl.c))
	}
	fmt.Fprintln(out)
	if plotDir != "" {
		var lines []plots.Line
		for _, cl := range cols {
			var xs, ys []float64
			for _, p := range series[cl] {
				xs, ys = append(xs, p.Delta), append(ys, p.P.Mid())
			}
			lines = append(lines, plots.Line{Name: fmt.Sprintf("t=%d, %d clients", cl.t, cl.c), X: xs, Y: ys, Dashed: cl.t != ts[0]})
		}
		files, err := plots.Draw(plotDir, "collision-"+name, "Collision probability, client links "+w.String(), "offset δ between consecutive clients (ms)", "P{collision}", lines)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "   plot: %s\n", strings.Join(files, " "))
	}
	if csvDir != "" {
		p := filepath.Join(csvDir, "collision-"+name+".csv")
		if err := writeFile(p, func(w io.Writer) error { return fastpaxos.WriteCollisionCSV(w, all) }); err != nil {
			return err
		}
		fmt.Fprintf(out, "   csv:  %s\n", p)
	}
	return nil
}

func modelRecordTraceCmd() *cobra.Command {
	var (
		o                 trace.Options
		outPath           string
		wanDelay, wanJitt string
	)
	cmd := &cobra.Command{
		Use:   "record-trace",
		Short: "Record a TCP latency trace (NWS-style probes) for the Fast Paxos model",
		Long: `Record --samples TCP probes against an echo server and write one latency
per line (ms, µs resolution) with a '#' header saying how it was recorded.

--mode nws (default) is the probe of the seed's NWS traces: connect, send 4
bytes, receive 4 bytes, close. --mode rtt is a 4-byte round trip on one
established connection. By default the echo server runs on 127.0.0.1
(loopback). --connect ADDR probes an existing echo server instead.

--wan-delay D builds a WAN-like link with a network namespace, a veth pair and
netem (delay D, optional --wan-jitter J with a Pareto distribution, on each
end), runs the echo server on this side and the probes from the namespace, and
removes both afterwards. It needs root and the kernel's sch_netem; where it
cannot be built the command says why and writes nothing.`,
		Example: `  synod-lab model record-trace --samples 20000 --out model/fastpaxos/traces/loopback-nws.txt
  synod-lab model record-trace --mode rtt --samples 20000 --out loopback-rtt.txt
  synod-lab model record-trace --wan-delay 40ms --wan-jitter 20ms --out wan-netem.txt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if o.Mode == "" {
				o.Mode = trace.ModeNWS
			}
			header := []string{
				"recorded by: synod-lab model record-trace " + strings.Join(os.Args[3:], " "),
				fmt.Sprintf("date: %s", time.Now().UTC().Format(time.RFC3339)),
				fmt.Sprintf("machine: %s", machine()),
				fmt.Sprintf("probe: %s (%s), %d samples, interval %v", o.Mode, probeText(o.Mode), o.Samples, o.Interval),
				"unit: ms, one probe per line",
			}
			var samples []float64
			var err error
			if wanDelay != "" {
				samples, err = recordWAN(ctx, o, wanDelay, wanJitt)
				if errors.Is(err, trace.ErrNetemUnavailable) {
					fmt.Fprintf(cmd.ErrOrStderr(), "skipped: %v\n", err)
					return nil
				}
				header = append(header, fmt.Sprintf("link: veth pair into a network namespace, netem delay %s jitter %q (pareto) on each end", wanDelay, wanJitt))
			} else {
				where := "loopback 127.0.0.1, echo server in the same process"
				if o.Connect != "" {
					where = "echo server at " + o.Connect
				}
				header = append(header, "link: "+where)
				samples, err = trace.Record(ctx, o)
			}
			if err != nil {
				return err
			}
			if outPath == "" || outPath == "-" {
				return trace.Write(cmd.OutOrStdout(), header, samples)
			}
			if err := writeFile(outPath, func(w io.Writer) error { return trace.Write(w, header, samples) }); err != nil {
				return err
			}
			e, err := fastpaxos.NewEmpirical(outPath, samples)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: %d samples, min %.3f, median %.3f, p99 %.3f, max %.3f ms\n",
				outPath, len(samples), e.Min(), e.Quantile(0.5), e.Quantile(0.99), e.Max())
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Samples, "samples", 10000, "number of probes")
	f.StringVar(&o.Mode, "mode", trace.ModeNWS, "probe: nws (connect, 4 bytes each way, close) or rtt (4-byte round trip on one connection)")
	f.StringVar(&o.Connect, "connect", "", "probe this echo server (host:port) instead of starting one on 127.0.0.1")
	f.DurationVar(&o.Interval, "interval", 0, "pause between probes")
	f.StringVar(&outPath, "out", "-", "trace file (- for stdout)")
	f.StringVar(&wanDelay, "wan-delay", "", "build a netem WAN-like link with this one-way delay per end (e.g. 40ms)")
	f.StringVar(&wanJitt, "wan-jitter", "", "netem jitter on the WAN-like link (Pareto distribution), e.g. 20ms")
	return cmd
}

func probeText(mode string) string {
	if mode == trace.ModeRTT {
		return "4-byte round trip on an established TCP connection, Nagle off"
	}
	return "TCP connect, send 4 bytes, receive 4 bytes, close (the NWS probe)"
}

func machine() string {
	host, _ := os.Hostname()
	var u syscall.Utsname
	kernel := ""
	if syscall.Uname(&u) == nil {
		var b []byte
		for _, c := range u.Release {
			if c == 0 {
				break
			}
			b = append(b, byte(c))
		}
		kernel = " " + string(b)
	}
	return fmt.Sprintf("%s, %s/%s%s, %d CPUs, %s", host, runtime.GOOS, runtime.GOARCH, kernel, runtime.NumCPU(), runtime.Version())
}

// recordWAN runs the echo server on the host end of a netem link and the
// probes inside the namespace (this binary, --connect), then removes the link.
func recordWAN(ctx context.Context, o trace.Options, delay, jitter string) ([]float64, error) {
	w, err := trace.NewWAN(ctx, delay, jitter)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	l, err := w.Listen()
	if err != nil {
		return nil, err
	}
	defer l.Close()
	go trace.Echo(l)
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	c := w.Exec(ctx, self, "model", "record-trace", "--connect", l.Addr().(*net.TCPAddr).String(),
		"--samples", strconv.Itoa(o.Samples), "--mode", o.Mode, "--interval", o.Interval.String(), "--out", "-")
	c.Stderr = os.Stderr
	b, err := c.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("probes in namespace %s: %v", w.NS, err)
		}
		return nil, err
	}
	return fastpaxos.ReadTrace(strings.NewReader(string(b)))
}
