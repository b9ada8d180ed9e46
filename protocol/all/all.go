// Package all links every protocol into a binary: import it for its side effect.
package all

import (
	_ "github.com/synod-dev/synod/protocol/abd"
	_ "github.com/synod-dev/synod/protocol/adam"
	_ "github.com/synod-dev/synod/protocol/blocking"
	_ "github.com/synod-dev/synod/protocol/esds"
	_ "github.com/synod-dev/synod/protocol/eve"
	_ "github.com/synod-dev/synod/protocol/fastpaxos"
	_ "github.com/synod-dev/synod/protocol/orcabcast"
	_ "github.com/synod-dev/synod/protocol/orcaprimary"
	_ "github.com/synod-dev/synod/protocol/paxos"
	_ "github.com/synod-dev/synod/protocol/pb"
	_ "github.com/synod-dev/synod/protocol/pbdurable"
	_ "github.com/synod-dev/synod/protocol/pbpaxos"
	_ "github.com/synod-dev/synod/protocol/unreplicated"
)
