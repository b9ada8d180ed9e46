package bench

import (
	"context"

	"github.com/synod-dev/synod/service"
)

// Target is one client's connection to the system under test.
//
// Do performs op and returns the server's reply as a service.Result; an error
// reply from the server is a Result of type service.ResultErr with a nil error.
// A non-nil error means the transport failed (connection lost, timeout, reply
// not understood); the target is then unusable and the driver closes it and
// connects again. Do must not retain op.Args after it returns (the driver reuses
// value buffers). A Target is used by one goroutine at a time.
type Target interface {
	Do(ctx context.Context, op service.Op) (service.Result, error)
	Close() error
}

// TargetFactory connects client number client to addr.
type TargetFactory func(ctx context.Context, addr string, client int) (Target, error)
