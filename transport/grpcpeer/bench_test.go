package grpcpeer

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/synod-dev/synod/config"
)

// BenchmarkRoundTrip measures a state update's round trip (the Grid Services thesis,
// Table III.1) for each transport and state size: each iteration is 20
// round trips, reported as their median, mean and standard deviation in
// microseconds.
//
//	go test -run '^$' -bench RoundTrip -benchtime 1x ./transport/grpcpeer
func BenchmarkRoundTrip(b *testing.B) {
	for _, kind := range config.Transports {
		for _, size := range []int{10, 100, 1000, 10_000, 100_000} {
			b.Run(fmt.Sprintf("%s/%dB", kind, size), func(b *testing.B) {
				var all []time.Duration
				for b.Loop() {
					ds, err := RoundTrip(kind, size, 20, 10*time.Second)
					if err != nil {
						b.Fatal(err)
					}
					all = append(all, ds...)
				}
				var sum, sq float64
				for _, d := range all {
					sum += float64(d.Nanoseconds()) / 1e3
				}
				mean := sum / float64(len(all))
				for _, d := range all {
					x := float64(d.Nanoseconds())/1e3 - mean
					sq += x * x
				}
				b.ReportMetric(float64(Median(all).Nanoseconds())/1e3, "median-µs")
				b.ReportMetric(mean, "mean-µs")
				b.ReportMetric(math.Sqrt(sq/float64(max(len(all)-1, 1))), "sd-µs")
			})
		}
	}
}
