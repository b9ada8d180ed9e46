package seed002pb

import (
	"time"

	"github.com/synod-dev/synod/client"
)

// onNotify asks the client stub to call f when a fail-over notification
// arrives.
func onNotify(opts *client.Options, f func(at time.Time)) {
	_ = opts
	_ = f
}
