// Package traces holds the latency traces recorded for the Fast Paxos model
// (see README.md for how), embedded so that experiments find them wherever
// they run.
package traces

import (
	"embed"

	"github.com/synod-dev/synod/model/fastpaxos"
)

//go:embed *.txt
var FS embed.FS

// Load reads one embedded trace by file name.
func Load(name string) (*fastpaxos.Empirical, error) {
	f, err := FS.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s, err := fastpaxos.ReadTrace(f)
	if err != nil {
		return nil, err
	}
	return fastpaxos.NewEmpirical(name, s)
}
