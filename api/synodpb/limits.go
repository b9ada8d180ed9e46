// Package synodpb is the generated Go code of Synod's gRPC API
// (api/synod.proto), plus the API's limits. Regenerate with scripts/gen-proto.
package synodpb

import "github.com/synod-dev/synod/service"

// MaxMessageSize bounds every request and response message, in both
// directions: one value of service.MaxValueSize plus 1 MiB of slack for the
// key (at most service.MaxKeySize), other arguments, the op id and prev ids.
// Operations whose arguments add up to more (a cas with two 8 MiB values)
// are refused with RESOURCE_EXHAUSTED.
const MaxMessageSize = service.MaxValueSize + 1<<20

// PasswordKey is the metadata key that carries the cluster password.
const PasswordKey = "synod-password"

// StreamWindow and ConnWindow are the HTTP/2 flow-control windows the
// server and the Go client announce (per stream, per connection), fixed:
// grpc-go's default, a window that grows by bandwidth-delay estimation,
// sends a BDP ping and a WINDOW_UPDATE frame on data arriving whenever no
// ping is outstanding, so one caller's request and reply cost each side a
// frame written and a writer goroutine woken more per call (docs/COSTS.md,
// "Client-driven ABD's phases in a compact form"). Fixed windows of the
// size the estimation grows to at most (16 MiB) are updated only after a
// quarter of them was read.
const (
	StreamWindow = 4 << 20
	ConnWindow   = 16 << 20
)
