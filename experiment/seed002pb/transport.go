package seed002pb

import (
	"context"
	"time"

	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/transport/grpcpeer"
)

func init() {
	StateRoundTrip = func(ctx context.Context, tr string, size, n int) ([]time.Duration, error) {
		return grpcpeer.RoundTrip(tr, size, n, 10*time.Second)
	}
}

// setTransport selects the namespace's peer transport in a cluster's
// options ("-" and "tcp": the default framed TCP stream).
func setTransport(opts *cluster.UpOptions, tr string) error {
	if tr != "-" {
		opts.Transport = tr
	}
	return nil
}
