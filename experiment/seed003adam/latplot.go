package seed003adam

import (
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// ltPoint is one cell of the Fig 6.1 sweep: its steady throughput and mean
// latency.
type ltPoint struct{ tput, latMS float64 }

// drawLatencyThroughput draws the seed's kind of Fig 6.1: one curve per
// strategy, mean latency against throughput, a point per client count;
// the seed's peak throughputs are marked on the x axis. The experiment
// framework's plots take a cell parameter as x, so this one is drawn here.
func drawLatencyThroughput(dir string, order []string, pts map[string][]ltPoint, seed map[string]float64) ([]string, error) {
	p := plot.New()
	p.Title.Text = "Fig 6.1 (simulator): latency against throughput, 20 ms requests, 8-core replicas"
	p.X.Label.Text = "steady throughput (req/s)"
	p.Y.Label.Text = "mean latency (ms)"
	p.Legend.Top = true
	for i, s := range order {
		var xy plotter.XYs
		for _, pt := range pts[s] {
			xy = append(xy, plotter.XY{X: pt.tput, Y: pt.latMS})
		}
		if len(xy) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(xy)
		if err != nil {
			return nil, err
		}
		col := plotutil.Color(i)
		l.Color, sc.Color, l.Width, sc.Shape = col, col, vg.Points(1.5), draw.CircleGlyph{}
		p.Add(l, sc)
		p.Legend.Add(s+" (synod, sim)", l, sc)
		if v, ok := seed[s]; ok {
			m, err := plotter.NewScatter(plotter.XYs{{X: v, Y: 0}})
			if err != nil {
				return nil, err
			}
			m.Color, m.Shape, m.Radius = col, draw.TriangleGlyph{}, vg.Points(5)
			p.Add(m)
			p.Legend.Add(s+" peak (seed)", m)
		}
	}
	p.Y.Min = 0
	p.Y.Max *= 1.3
	var files []string
	for _, ext := range []string{".png", ".svg"} {
		f := filepath.Join(dir, "fig61-latency-throughput"+ext)
		if err := p.Save(7*vg.Inch, 4.5*vg.Inch, f); err != nil {
			return files, err
		}
		files = append(files, f)
	}
	return files, nil
}
