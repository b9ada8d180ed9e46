package config

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/synod-dev/synod/service"
)

// Overload limits of the cluster file (gateway/limits.go has the table of
// every queue on a request's path and what happens when it is full):
//
//	limits:
//	  max_clients: 10000                  # Redis maxclients: RESP and gRPC connections together
//	  client_output_buffer_limit: 256mb   # Redis client-output-buffer-limit normal <hard>: close the client
//	  proto_max_bulk_len: 8mb             # Redis proto-max-bulk-len: the longest bulk string read
//	  max_pipeline: 1024                  # replies a connection may owe before the node stops reading it
//
// Every field is optional (0: the default). Sizes take a number of bytes or
// Redis's units (1k = 1000, 1kb = 1024, m/mb, g/gb). Each node may change
// its own with CONFIG SET until it restarts; the file is not rewritten.

// Defaults of the overload limits.
const (
	DefaultMaxClients        = 10000
	DefaultOutputBufferLimit = 256 << 20
	DefaultMaxPipeline       = 1024
	// MaxProtoBulkLen is the largest proto_max_bulk_len: the largest value
	// Synod stores plus room for a key or option around it.
	MaxProtoBulkLen = service.MaxValueSize + 1<<10
	// MinProtoBulkLen is the smallest (Redis refuses less than 1 MB; Synod
	// accepts less so that tests can reach it, but not below a key's size).
	MinProtoBulkLen = 1 << 10
)

// Limits bound what one node accepts from its clients.
type Limits struct {
	// MaxClients bounds the connections open at once, RESP and gRPC
	// together; one more is refused ("-ERR max number of clients reached"
	// on RESP) and counted. Default DefaultMaxClients.
	MaxClients int `yaml:"max_clients,omitempty"`
	// ClientOutputBufferLimit is the hard limit of a connection's output
	// buffer: a client whose unread replies exceed it is closed and the
	// node logs why. Default DefaultOutputBufferLimit.
	ClientOutputBufferLimit ByteSize `yaml:"client_output_buffer_limit,omitempty"`
	// ProtoMaxBulkLen is the longest bulk string a RESP command may carry;
	// a longer one is a protocol error. Default and maximum MaxProtoBulkLen.
	ProtoMaxBulkLen ByteSize `yaml:"proto_max_bulk_len,omitempty"`
	// MaxPipeline is how many replies a connection may owe (computed, not
	// yet written to its socket) before the node stops reading its
	// commands until it reads them (backpressure, never a refusal).
	// Default DefaultMaxPipeline.
	MaxPipeline int `yaml:"max_pipeline,omitempty"`
}

// WithDefaults returns l (nil: none set) with every unset field defaulted.
func (l *Limits) WithDefaults() Limits {
	var o Limits
	if l != nil {
		o = *l
	}
	if o.MaxClients <= 0 {
		o.MaxClients = DefaultMaxClients
	}
	if o.ClientOutputBufferLimit <= 0 {
		o.ClientOutputBufferLimit = DefaultOutputBufferLimit
	}
	if o.ProtoMaxBulkLen <= 0 {
		o.ProtoMaxBulkLen = MaxProtoBulkLen
	}
	if o.MaxPipeline <= 0 {
		o.MaxPipeline = DefaultMaxPipeline
	}
	return o
}

// CheckLimit checks one limit's value, as the cluster file's field name
// (max_clients, ...) gives it; CONFIG SET uses it too.
func CheckLimit(field string, v int64) error {
	switch field {
	case "max_clients":
		if v < 1 || v > 1<<20 {
			return fmt.Errorf("%d must be 1-%d", v, 1<<20)
		}
	case "client_output_buffer_limit":
		if v < 16<<10 {
			return fmt.Errorf("%d must be at least 16kb (%d bytes)", v, 16<<10)
		}
	case "proto_max_bulk_len":
		if v < MinProtoBulkLen || v > MaxProtoBulkLen {
			return fmt.Errorf("%d must be %d-%d bytes (the largest value Synod stores, plus 1kb)", v, MinProtoBulkLen, MaxProtoBulkLen)
		}
	case "max_pipeline":
		if v < 1 || v > 1<<20 {
			return fmt.Errorf("%d must be 1-%d", v, 1<<20)
		}
	default:
		return fmt.Errorf("unknown limit %q", field)
	}
	return nil
}

func (c *Cluster) validateLimits(bad func(field, f string, a ...any)) {
	l := c.Limits
	if l == nil {
		return
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"max_clients", int64(l.MaxClients)},
		{"client_output_buffer_limit", int64(l.ClientOutputBufferLimit)},
		{"proto_max_bulk_len", int64(l.ProtoMaxBulkLen)},
		{"max_pipeline", int64(l.MaxPipeline)},
	} {
		if f.v == 0 {
			continue // the default
		}
		if err := CheckLimit(f.name, f.v); err != nil {
			bad("limits."+f.name, "%v", err)
		}
	}
}

// ByteSize is a number of bytes, written as an integer or with Redis's
// units: k (1000), kb (1024), m, mb, g, gb; case does not matter.
type ByteSize int64

// ParseByteSize reads a size as Redis's config file does.
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mul := int64(1)
	for _, u := range []struct {
		suffix string
		mul    int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1000}, {"m", 1000 * 1000}, {"g", 1000 * 1000 * 1000}, {"b", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mul = strings.TrimSuffix(t, u.suffix), u.mul
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mul {
		return 0, fmt.Errorf("%q is not a size (bytes, or a number with k, kb, m, mb, g, gb)", s)
	}
	return ByteSize(n * mul), nil
}

// UnmarshalYAML accepts an integer or a string with a unit.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: a size must be a number of bytes or a string such as 64mb", n.Line)
	}
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %v", n.Line, err)
	}
	*b = v
	return nil
}
