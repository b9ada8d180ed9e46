package mc

import (
	"fmt"
	"strconv"
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
	// ByNode: the nodes drain their inboxes in turn. While messages are in
	// flight only those to the highest-numbered node with one are
	// deliverable (in any order among them; world.enabled). A restriction
	// of the unordered network (a directed search, doc.go "Leader
	// changes"): deliveries to different nodes commute, so most of what it
	// leaves out are reorderings of independent steps; what it loses for
	// certain is a node hearing a message before an older one addressed to
	// a higher-numbered node, which its declarers do not need.
	ByNode bool
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
	if n.ByNode {
		p = append(p, "bynode")
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
		case "bynode":
			n.ByNode = true
		default:
			return n, fmt.Errorf("unknown network property %q (want lossless|lossy, ordered|unordered, duplicating, bynode)", w)
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
	// declares NoTimers). Any mode may end in ":N", a timer budget: at
	// most N timer firings on a path ("quiet:4"). A leader change is a few
	// timeouts among many heartbeats; the budget keeps the heartbeats from
	// filling the search (doc.go, "Leader changes").
	Timers string
	// Crashes bounds the crash events on a path (each crashed node may
	// then restart from its durable records: a restart is an event too).
	Crashes int
	// CrashBeforeFsync lets a crash fall between a step's Early Send and
	// the fsync of the records it persisted (unsynced.go; counted by
	// Crashes).
	CrashBeforeFsync bool
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
	// Reflective fingerprints and copies every automaton and checker by
	// reflection, even those that encode and copy themselves
	// (automaton.ModelStater; slower; kept to compare the two paths).
	Reflective bool
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
	c := Config{Protocol: protocol, Model: m, Depth: m.Depth, Timers: m.Timers, Crashes: m.Crashes, CrashBeforeFsync: m.CrashBeforeFsync}
	if n, err := ParseNetwork(m.Network); err == nil {
		c.Net = n
	}
	return c
}

func (c *Config) timerMode() string {
	mode, _, _ := strings.Cut(c.Timers, ":")
	if c.Model.NoTimers || mode == "none" {
		return "none"
	}
	if mode == "" {
		return "quiet"
	}
	return mode
}

// timerBudget is the most timer firings on a path (0: no bound).
func (c *Config) timerBudget() int {
	_, n, ok := strings.Cut(c.Timers, ":")
	if !ok {
		return 0
	}
	b, err := strconv.Atoi(n)
	if err != nil || b < 0 {
		return 0
	}
	return b
}

// timerSpec is the timer mode with its budget, as Config.Timers spells it.
func (c *Config) timerSpec() string {
	if b := c.timerBudget(); b > 0 && c.timerMode() != "none" {
		return fmt.Sprintf("%s:%d", c.timerMode(), b)
	}
	return c.timerMode()
}

// full reports whether states reach the MaxStates bound (never when it
// is 0: no limit).
func (c *Config) full(states int64) bool {
	return c.MaxStates > 0 && states >= int64(c.MaxStates)
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
	s += ", timers " + c.timerSpec()
	if c.CrashBeforeFsync {
		s += ", crashes before fsync"
	}
	if c.Model.ClientDriven {
		s += ", client-driven"
	}
	return s
}
