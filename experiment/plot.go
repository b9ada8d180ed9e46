package experiment

import (
	"fmt"
	"image/color"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// PlotKind selects bars or lines.
type PlotKind int

const (
	// Bars draws grouped bars: one group per X value, one bar per series and
	// source (ours solid, the seed's in a lighter shade of the same colour).
	Bars PlotKind = iota
	// Lines draws one line per series and source (ours solid, the seed's
	// dashed), over numeric X values (or nominal ones when any is not a number).
	Lines
)

// PlotSpec describes one plot of a metric over the cells.
type PlotSpec struct {
	// File is the base name; File.png and File.svg are written.
	File   string
	Title  string
	Kind   PlotKind
	Metric string
	YLabel string
	// X is the parameter on the x axis.
	X      string
	XLabel string
	// Series are the parameters whose values make one series each.
	Series []string
	// Filter keeps only the cells with these parameter values.
	Filter map[string]string
}

type series struct {
	name  string
	seed  bool
	color color.Color
	vals  map[int]float64 // by x index
	// labels are the spec's Labels of the series' first measured cell
	// (ours only): a label every series shares goes into the "ours"
	// legend source once, one that differs goes after the series' name.
	labels []string
}

// DrawPlots draws every plot of spec into dir and returns the files written.
// A plot with no value to show is skipped.
func DrawPlots(dir string, r *Results, spec ReportSpec) ([]string, error) {
	var files []string
	for _, ps := range spec.Plots {
		p, ok, err := buildPlot(r, spec, ps)
		if err != nil {
			return files, fmt.Errorf("%s: %w", ps.File, err)
		}
		if !ok {
			continue
		}
		for _, ext := range []string{".png", ".svg"} {
			f := filepath.Join(dir, ps.File+ext)
			if err := p.Save(7*vg.Inch, 4.5*vg.Inch, f); err != nil {
				return files, fmt.Errorf("%s: %w", f, err)
			}
			files = append(files, f)
		}
	}
	return files, nil
}

func buildPlot(r *Results, spec ReportSpec, ps PlotSpec) (*plot.Plot, bool, error) {
	var cells []CellResult
	for _, c := range r.Cells {
		keep := true
		for k, v := range ps.Filter {
			if c.Get(k) != v {
				keep = false
			}
		}
		if keep {
			cells = append(cells, c)
		}
	}
	var xs []string
	xi := map[string]int{}
	var order []string
	byName := map[string][2]*series{}
	for _, c := range cells {
		x := c.Get(ps.X)
		if _, ok := xi[x]; !ok {
			xi[x] = len(xs)
			xs = append(xs, x)
		}
		var parts []string
		for _, s := range ps.Series {
			v := c.Get(s)
			if _, err := strconv.ParseFloat(v, 64); err == nil {
				v = s + "=" + v // a bare number needs its name
			}
			parts = append(parts, v)
		}
		name := strings.Join(parts, " ")
		pair, ok := byName[name]
		if !ok {
			col := plotutil.Color(len(order))
			pair = [2]*series{
				{name: name, color: col, vals: map[int]float64{}},
				{name: name, seed: true, color: lighten(col), vals: map[int]float64{}},
			}
			byName[name] = pair
			order = append(order, name)
		}
		if v, ok := c.Metrics[ps.Metric]; ok && c.Status == StatusOK {
			pair[0].vals[xi[x]] = v
			if pair[0].labels == nil {
				pair[0].labels = make([]string, len(spec.Labels))
				for i, l := range spec.Labels {
					pair[0].labels[i] = c.Labels[l]
				}
			}
		}
		if v, ok := c.Seed[ps.Metric]; ok {
			pair[1].vals[xi[x]] = v
		}
	}
	oursLabel, ownLabels := legendLabels(order, byName, len(spec.Labels))
	var all []*series
	for _, n := range order {
		for _, s := range byName[n] {
			if len(s.vals) > 0 {
				all = append(all, s)
			}
		}
	}
	if len(all) == 0 {
		return nil, false, nil
	}
	p := plot.New()
	p.Title.Text = ps.Title
	p.X.Label.Text = ps.XLabel
	p.Y.Label.Text = ps.YLabel
	p.Legend.Top = true
	legend := func(s *series) string {
		src := oursLabel
		if s.seed {
			src = SeedLabel
		}
		name := s.name
		if own := ownLabels[s.name]; !s.seed && own != "" {
			name = strings.TrimSpace(name + " " + own)
		}
		if name == "" {
			return src
		}
		return name + " (" + src + ")"
	}
	numeric := true
	xf := make([]float64, len(xs))
	for i, x := range xs {
		v, err := strconv.ParseFloat(x, 64)
		if err != nil {
			numeric = false
			break
		}
		xf[i] = v
	}
	switch ps.Kind {
	case Lines:
		if !numeric {
			for i := range xs {
				xf[i] = float64(i)
			}
			p.NominalX(xs...)
		}
		for _, s := range all {
			var pts plotter.XYs
			for i := range xs {
				if v, ok := s.vals[i]; ok {
					pts = append(pts, plotter.XY{X: xf[i], Y: v})
				}
			}
			l, sc, err := plotter.NewLinePoints(pts)
			if err != nil {
				return nil, false, err
			}
			col := s.color
			if s.seed {
				col = byName[s.name][0].color // same hue, dashed
				l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
				sc.Shape = draw.BoxGlyph{}
			} else {
				sc.Shape = draw.CircleGlyph{}
			}
			l.Color, sc.Color = col, col
			l.Width = vg.Points(1.5)
			sc.Radius = vg.Points(3)
			p.Add(l, sc)
			p.Legend.Add(legend(s), l, sc)
		}
		p.Y.Min = min(p.Y.Min, 0)
		p.Y.Max *= 1.3 // room for the legend
		if numeric {
			p.X.Tick.Marker = plot.ConstantTicks(ticks(xs, xf))
		}
	default:
		w := vg.Points(max(4, min(22, 360/float64(len(xs)*len(all)))))
		for j, s := range all {
			off := vg.Length(float64(j)-float64(len(all)-1)/2) * w
			first := true
			for i := range xs {
				v, ok := s.vals[i]
				if !ok {
					continue
				}
				b, err := plotter.NewBarChart(plotter.Values{v}, w)
				if err != nil {
					return nil, false, err
				}
				b.XMin = float64(i)
				b.Offset = off
				b.Color = s.color
				b.LineStyle.Width = vg.Points(0.5)
				p.Add(b)
				if first {
					p.Legend.Add(legend(s), b)
					first = false
				}
			}
		}
		labels := make([]string, len(xs))
		for i, x := range xs {
			labels[i] = ps.X + "=" + x
		}
		p.NominalX(labels...)
		p.Y.Min = 0
		p.Y.Max *= 1.35
	}
	return p, true, nil
}

func ticks(xs []string, xf []float64) []plot.Tick {
	out := make([]plot.Tick, len(xs))
	for i := range xs {
		out[i] = plot.Tick{Value: xf[i], Label: xs[i]}
	}
	return out
}

// lighten mixes c with white, for the seed's bars.
func lighten(c color.Color) color.Color {
	r, g, b, _ := c.RGBA()
	mix := func(v uint32) uint8 { return uint8((v>>8)/2 + 128) }
	return color.RGBA{mix(r), mix(g), mix(b), 255}
}

// legendLabels splits the measured series' labels: those every series
// shares (same value) name the "ours" source once; the others are returned
// per series name, to follow the name in its legend entry.
func legendLabels(order []string, byName map[string][2]*series, n int) (string, map[string]string) {
	var measured []*series
	for _, name := range order {
		if s := byName[name][0]; s.labels != nil {
			measured = append(measured, s)
		}
	}
	var common []string
	own := map[string]string{}
	for i := 0; i < n; i++ {
		shared := true
		for _, s := range measured {
			if s.labels[i] != measured[0].labels[i] {
				shared = false
			}
		}
		for _, s := range measured {
			switch v := s.labels[i]; {
			case v == "":
			case shared && s == measured[0]:
				common = append(common, v)
			case !shared:
				own[s.name] = strings.TrimSpace(own[s.name] + ", " + v)
			}
		}
	}
	for k, v := range own {
		own[k] = "[" + strings.TrimPrefix(v, ", ") + "]"
	}
	label := OursLabel
	if len(common) > 0 {
		label += ", " + strings.Join(common, ", ")
	}
	return label, own
}
