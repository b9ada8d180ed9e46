package seed002pb

import (
	"time"

	"github.com/synod-dev/synod/client"
)

// onNotify asks the client stub to call f with the arrival time of each
// fail-over notification that names a new leader (client.LeaderChange).
func onNotify(opts *client.Options, f func(at time.Time)) {
	opts.OnLeaderChange = func(ch client.LeaderChange) {
		if ch.Previous != "" {
			f(ch.At)
		}
	}
}
