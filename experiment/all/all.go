// Package all links every experiment into a binary: import it for its side effect.
package all

import (
	_ "github.com/synod-dev/synod/experiment/seed000"
	_ "github.com/synod-dev/synod/experiment/seed000frontends"
	_ "github.com/synod-dev/synod/experiment/seed000simple"
	_ "github.com/synod-dev/synod/experiment/seed001"
	_ "github.com/synod-dev/synod/experiment/seed002durability"
	_ "github.com/synod-dev/synod/experiment/seed002fast"
	_ "github.com/synod-dev/synod/experiment/seed002fastsim"
	_ "github.com/synod-dev/synod/experiment/seed002pb"
	_ "github.com/synod-dev/synod/experiment/seed002pbpaxos"
	_ "github.com/synod-dev/synod/experiment/seed003adam"
	_ "github.com/synod-dev/synod/experiment/seed003eve"
	_ "github.com/synod-dev/synod/experiment/seed004"
)
