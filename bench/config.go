package bench

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/synod-dev/synod/automaton"
)

// Config describes one benchmark run.
type Config struct {
	// Addrs are the servers' addresses; client i uses Addrs[i % len(Addrs)].
	Addrs []string
	// Duration bounds the measured phase. Ops bounds it by operation count
	// (arrivals in open loop). When both are set the run stops at whichever comes
	// first; at least one must be set.
	Duration time.Duration
	Ops      int64
	// Clients is the number of simulated clients, each with its own connection.
	Clients int
	// Keys is the number of distinct keys; ValueSize the length of written values
	// in bytes (at least MinValueSize, so every value carries a unique tag).
	Keys      int
	ValueSize int
	// ReadRatio is the fraction of operations that are GETs; the rest are SETs.
	ReadRatio float64
	// Dist chooses keys: "uniform", "zipf:S" (S > 1) or "hotspot:H:P".
	Dist string
	// Rate, when positive, selects the open loop: arrivals at Rate
	// operations per second in total. Zero selects the closed loop.
	Rate float64
	// Arrivals is the open loop's arrival process: ArrivalsPoisson (the
	// default, "" too) or ArrivalsUniform (gaps drawn uniformly from
	// [0, 2/Rate], mean 1/Rate: the ABD report's "uniform distribution with the
	// average 50 requests per second").
	Arrivals string
	// Preload SETs every key once before measuring.
	Preload bool
	// OnMeasure, when set, is called once as the measured phase starts
	// (after the preload), e.g. to read counters that must exclude it.
	OnMeasure func()
	// KeyPrefix precedes the zero-padded key index.
	KeyPrefix string
	// RunID, when set, is inserted after KeyPrefix ("key:<run id>:000042"),
	// so that a recorded history starts from keys no earlier run wrote: its
	// checker may then assume every key absent at the start, even on a store
	// that already holds data. NewRunID makes one; synod bench sets it
	// whenever it records a history unless --key-prefix is given.
	RunID string
	// Password, when set, is sent with AUTH on every connection.
	Password string
	// Namespace and ReadMode, when set, are selected on every connection with
	// SYNOD NS / SYNOD READ (Synod only).
	Namespace string
	ReadMode  string
	// Leader sends each client to the namespace's leader, as the server it
	// first connects to names it (SYNOD LEADER; Synod only). Without it,
	// clients are spread over Addrs and followers forward to the leader.
	Leader bool
	// Seed seeds key, operation, value and arrival choices.
	Seed int64
	// OpTimeout bounds dialing and one operation of the default Redis target (a
	// timed-out write has an unknown outcome). Custom factories apply their own.
	OpTimeout time.Duration
	// HistoryPath, when set, receives the recorded history (JSON).
	HistoryPath string
	// DurabilityLabel is the caller's statement of the target's durability mode
	// ("fsync per write", "in-memory", ...), printed beside the numbers.
	DurabilityLabel string
	// Workload names the preset this config came from, if any (for the report).
	Workload string
	// NewTarget connects one client. Nil means NewRedisTarget with this config's
	// Password, Namespace, ReadMode and OpTimeout.
	NewTarget TargetFactory
	// TargetName names the target kind in the report ("" means "resp").
	TargetName string
}

// MinValueSize is the smallest accepted value size: room for the unique
// per-write tag (client and sequence number in base 36).
const MinValueSize = 16

// LateThreshold: an open-loop operation that starts more than this after its
// scheduled arrival is counted as late.
const LateThreshold = time.Millisecond

// DefaultConfig returns the defaults the command line starts from.
func DefaultConfig() Config {
	return Config{
		Addrs:     []string{"127.0.0.1:6379"},
		Clients:   16,
		Keys:      1000,
		ValueSize: 100,
		ReadRatio: 0.5,
		Dist:      "uniform",
		KeyPrefix: "key:",
		Seed:      1,
		OpTimeout: 5 * time.Second,
	}
}

// Workloads lists the preset names accepted by Preset.
func Workloads() []string { return []string{"seed001"} }

// Preset returns DefaultConfig modified by a named workload:
//
//	seed001: the key-value experiment of the ABD report (ABD vs blocking replication):
//	         1000 keys, 1 KB values, Zipf s = 1.345675 (about 90% of operations on
//	         the hottest 10% of keys), 90% GETs (the seed also runs 10%), keys
//	         preloaded, 25 clients.
func Preset(name string) (Config, error) {
	c := DefaultConfig()
	c.Workload = name
	switch name {
	case "seed001":
		c.Keys = 1000
		c.ValueSize = 1024
		c.Dist = "zipf:1.345675"
		c.ReadRatio = 0.9
		c.Preload = true
		c.Clients = 25
		return c, nil
	}
	return Config{}, fmt.Errorf("unknown workload %q (known: %s)", name, strings.Join(Workloads(), ", "))
}

// arrivals names the open loop's arrival process ("" in the closed loop).
func (c *Config) arrivals() string {
	switch {
	case c.Rate <= 0:
		return ""
	case c.Arrivals == "":
		return ArrivalsPoisson
	}
	return c.Arrivals
}

// Validate checks the configuration and explains the first problem found.
func (c *Config) Validate() error {
	if len(c.Addrs) == 0 {
		return errors.New("no address given")
	}
	for _, a := range c.Addrs {
		if a == "" {
			return errors.New("empty address in address list")
		}
	}
	if c.Duration < 0 {
		return fmt.Errorf("duration %v is negative", c.Duration)
	}
	if c.Ops < 0 {
		return fmt.Errorf("ops %d is negative", c.Ops)
	}
	if c.Duration == 0 && c.Ops == 0 {
		return errors.New("give a duration or an operation count")
	}
	if c.Clients < 1 {
		return fmt.Errorf("clients must be at least 1 (got %d)", c.Clients)
	}
	if c.Keys < 1 {
		return fmt.Errorf("keys must be at least 1 (got %d)", c.Keys)
	}
	if c.ValueSize < MinValueSize {
		return fmt.Errorf("value size must be at least %d bytes, to hold each write's unique tag (got %d)", MinValueSize, c.ValueSize)
	}
	if !(c.ReadRatio >= 0 && c.ReadRatio <= 1) {
		return fmt.Errorf("read ratio must be between 0 and 1 (got %v)", c.ReadRatio)
	}
	if _, err := ParseDist(c.Dist, c.Keys); err != nil {
		return err
	}
	if c.Rate < 0 || c.Rate != c.Rate {
		return fmt.Errorf("rate must be positive, or 0 for the closed loop (got %v)", c.Rate)
	}
	if c.Arrivals != "" && c.Arrivals != ArrivalsPoisson && c.Arrivals != ArrivalsUniform {
		return fmt.Errorf("arrivals %q: want %s or %s", c.Arrivals, ArrivalsPoisson, ArrivalsUniform)
	}
	if c.OpTimeout <= 0 {
		return fmt.Errorf("operation timeout must be positive (got %v)", c.OpTimeout)
	}
	if c.ReadMode != "" {
		if _, err := automaton.ParseReadMode(c.ReadMode); err != nil {
			return err
		}
	}
	return nil
}

// DistSpec is a parsed key distribution.
type DistSpec struct {
	Kind string  // "uniform", "zipf" or "hotspot"
	S    float64 // zipf exponent
	H, P float64 // hotspot: fraction H of keys gets fraction P of operations
}

func (d DistSpec) String() string {
	switch d.Kind {
	case "zipf":
		return "zipf:" + strconv.FormatFloat(d.S, 'g', -1, 64)
	case "hotspot":
		return "hotspot:" + strconv.FormatFloat(d.H, 'g', -1, 64) + ":" + strconv.FormatFloat(d.P, 'g', -1, 64)
	}
	return d.Kind
}

// ParseDist parses a key distribution for a key space of keys keys.
func ParseDist(s string, keys int) (DistSpec, error) {
	parts := strings.Split(s, ":")
	bad := func(f string, a ...any) (DistSpec, error) {
		return DistSpec{}, fmt.Errorf("key distribution %q: %s (want uniform, zipf:S with S > 1, or hotspot:H:P)", s, fmt.Sprintf(f, a...))
	}
	num := func(p string) (float64, bool) {
		v, err := strconv.ParseFloat(p, 64)
		return v, err == nil && v == v
	}
	switch parts[0] {
	case "uniform":
		if len(parts) != 1 {
			return bad("uniform takes no parameters")
		}
		return DistSpec{Kind: "uniform"}, nil
	case "zipf":
		if len(parts) != 2 {
			return bad("zipf takes one parameter")
		}
		v, ok := num(parts[1])
		if !ok || v <= 1 {
			return bad("zipf exponent must be a number greater than 1")
		}
		return DistSpec{Kind: "zipf", S: v}, nil
	case "hotspot":
		if len(parts) != 3 {
			return bad("hotspot takes two parameters")
		}
		h, ok1 := num(parts[1])
		p, ok2 := num(parts[2])
		if !ok1 || !ok2 || h <= 0 || h >= 1 || p < 0 || p > 1 {
			return bad("need 0 < H < 1 and 0 <= P <= 1")
		}
		if hot := hotKeys(h, keys); hot < 1 || hot >= keys {
			return bad("hot fraction %v of %d keys leaves an empty hot or cold set", h, keys)
		}
		return DistSpec{Kind: "hotspot", H: h, P: p}, nil
	}
	return bad("unknown kind %q", parts[0])
}
