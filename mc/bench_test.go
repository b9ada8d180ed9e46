package mc

import "testing"

func BenchmarkABD(b *testing.B) {
	for i := 0; i < b.N; i++ {
		cfg := NewConfig("abd")
		cfg.Depth = 7
		cfg.Workers = 1
		r, err := Check(cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(r.StatesPerSecond(), "states/s")
		b.ReportMetric(float64(r.States), "states")
	}
}
