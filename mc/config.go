package mc

import (
	"fmt"
	"strings"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Network says what the network may do to a message in flight.
type Network struct {
	// Lossy: a message may be dropped (an enabled event per message).
	Lossy bool
	// Ordered: messages between a pair of nodes are delivered in the order
	// sent (only each link's oldest is deliverable). Unordered otherwise.
	Ordered bool
	// Duplicating: a message may be delivered and stay in flight (an
	// enabled event per message, beside the delivery that removes it).
	Duplicating bool
}

func (n Network) String() string {
	var p []string
	if n.Lossy {
		p = append(p, "lossy")
	} else {
		p = append(p, "lossless")
	}
	if n.Ordered {
		p = append(p, "ordered")
	} else {
		p = append(p, "unordered")
	}
	if n.Duplicating {
		p = append(p, "duplicating")
	}
	return strings.Join(p, ",")
}

// ParseNetwork reads "lossless,unordered", "lossy,ordered,duplicating", ...
func ParseNetwork(s string) (Network, error) {
	var n Network
	for _, w := range strings.Split(s, ",") {
		switch strings.TrimSpace(w) {
		case "", "lossless", "unordered", "nodup":
		case "lossy":
			n.Lossy = true
		case "ordered":
			n.Ordered = true
		case "duplicating", "dup":
			n.Duplicating = true
		default:
			return n, fmt.Errorf("unknown network property %q (want lossless|lossy, ordered|unordered, duplicating)", w)
		}
	}
	return n, nil
}

// Config is one model-checking problem: a protocol in a small
// configuration, a network model and the search's bounds.
type Config struct {
	Protocol string
	// Model is the cluster and workload (automaton.ModelOf by default).
	Model automaton.ModelConfig
	Net   Network
	// Timers says when a set timer may fire: "quiet" (default: only when
	// no message is in flight, i.e. timeouts are longer than message
	// delays), "all" (at any moment), "none" (never; also when the model
	// declares NoTimers).
	Timers string
	// Crashes bounds the crash events on a path (each crashed node may
	// then restart from its durable records: a restart is an event too).
	Crashes int
	// Depth bounds the events on a path.
	Depth int
	// DFS searches depth-first (less memory, counterexamples not
	// shortest); breadth-first otherwise.
	DFS bool
	// Workers is the number of goroutines expanding states (0: GOMAXPROCS).
	Workers int
	// MaxStates stops the search after this many distinct states (0: none).
	MaxStates int
	// Replay expands states by replaying their path from fresh automata
	// instead of copying them (slower; kept to measure and to verify).
	Replay bool
	// NoHistoryCheck skips the consistency check of histories.
	NoHistoryCheck bool
	// KeepGoing continues after the first violation (counting them).
	KeepGoing bool
}

// NewConfig returns the protocol's declared (or default) model, with the
// network, timer mode and crash bound it declares (by default: lossless,
// unordered, not duplicating; quiet timers; no crashes).
func NewConfig(protocol string) Config {
	m := automaton.ModelOf(protocol)
	c := Config{Protocol: protocol, Model: m, Depth: m.Depth, Timers: m.Timers, Crashes: m.Crashes}
	if n, err := ParseNetwork(m.Network); err == nil {
		c.Net = n
	}
	return c
}

func (c *Config) timerMode() string {
	if c.Model.NoTimers || c.Timers == "none" {
		return "none"
	}
	if c.Timers == "" {
		return "quiet"
	}
	return c.Timers
}

// script returns client c's (from 0) operations.
func (c *Config) script(i int) []service.Op {
	if i < len(c.Model.Scripts) {
		return c.Model.Scripts[i]
	}
	v := fmt.Sprintf("%d", i+1)
	return []service.Op{{Kind: "set", Key: "x", Args: [][]byte{[]byte(v)}}, {Kind: "get", Key: "x"}}
}

// Describe writes the configuration in one line.
func (c *Config) Describe() string {
	ops := 0
	for i := 0; i < c.Model.Clients; i++ {
		ops += len(c.script(i))
	}
	target := c.Model.Target
	if target == "" {
		target = "fixed"
	}
	s := fmt.Sprintf("%s: %d nodes, %d clients, %d ops, target %s, network %s, crashes %d, depth %d",
		c.Protocol, c.Model.Nodes, c.Model.Clients, ops, target, c.Net, c.Crashes, c.Depth)
	s += ", timers " + c.timerMode()
	return s
}
