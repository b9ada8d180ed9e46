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
