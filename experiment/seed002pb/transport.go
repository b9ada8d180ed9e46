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
	switch tr {
	case "-", "tcp", "":
		return nil
	}
	return errTransport(tr)
}

type errTransport string

func (e errTransport) Error() string {
	return "transport " + string(e) + " cannot be selected in this binary yet"
}
