package automaton

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Per-request options.
//
// Every request carries a read mode, which every protocol understands.
// Anything else a protocol wants from a client per request (ESDS's operation
// id, prev set and strict flag, the ESDS thesis chapter 3) it declares as
// OptionSpecs; the RESP gateway (SYNOD OPT), the gRPC API (the options map),
// the Go clients, the history format and the simulator carry them by name
// without knowing what they mean. Values are strings; a list option holds
// several, a bool option holds "1" when set.

// OptionType is the type of a protocol-declared request option.
type OptionType uint8

const (
	// OptBool: on or off. Set values are normalised to "1"; off is absent.
	OptBool OptionType = iota
	// OptString: one string.
	OptString
	// OptList: zero or more strings.
	OptList
)

func (t OptionType) String() string {
	switch t {
	case OptBool:
		return "bool"
	case OptString:
		return "string"
	case OptList:
		return "list"
	}
	return fmt.Sprintf("OptionType(%d)", uint8(t))
}

// OptionSpec declares one request option of a protocol.
type OptionSpec struct {
	// Name is how clients spell it (lower case, no spaces): SYNOD OPT name.
	Name string
	Type OptionType
	// Doc is a one-line description for help texts.
	Doc string
	// Sticky options stay set on a RESP connection for every later command
	// until changed; the others apply to the next command that runs
	// operations only, which consumes them whatever its outcome.
	Sticky bool
	// PerOperation options name one operation, so a command that runs
	// several operations (MGET, multi-key DEL) refuses them.
	PerOperation bool
	// MaxItems bounds a list (0: no bound beyond MaxOptionBytes).
	MaxItems int
	// Validate checks the normalised values (nil accepts any).
	Validate func(vals []string) error
	// Assign, when set, gives the value of a request that carries none; the
	// edge (gateway, simulator) fills it in before the request reaches the
	// protocol, so that histories and replies can name it.
	Assign func(id RequestID) []string
}

// MaxOptionBytes bounds the total size of one request's option values.
const MaxOptionBytes = 1 << 20

// Options are per-request options.
type Options struct {
	Read ReadMode
	// Ext holds the protocol-declared options by name (nil: none).
	Ext map[string][]string
}

// Get returns the values of option name (nil when absent).
func (o Options) Get(name string) []string { return o.Ext[name] }

// String returns the first value of option name ("" when absent).
func (o Options) String(name string) string {
	if v := o.Ext[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Bool reports whether bool option name is set.
func (o Options) Bool(name string) bool { return o.String(name) == boolOn }

// Set sets option name to vals (removing it when vals is nil). It copies the
// map, so that other Options values sharing it keep their entries; the
// value slices are shared, and nobody may modify them in place.
func (o *Options) Set(name string, vals []string) {
	m := make(map[string][]string, len(o.Ext)+1)
	for k, v := range o.Ext {
		m[k] = v
	}
	if vals == nil {
		delete(m, name)
	} else {
		m[name] = vals
	}
	if len(m) == 0 {
		m = nil
	}
	o.Ext = m
}

// Names returns the option names set, sorted.
func (o Options) Names() []string {
	out := make([]string, 0, len(o.Ext))
	for k := range o.Ext {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// OptionDeclarer is implemented by protocols with request options.
type OptionDeclarer interface {
	RequestOptions() []OptionSpec
}

// RequestOptions returns the named protocol's option specs (nil: none).
func RequestOptions(protocol string) []OptionSpec {
	c, _ := capsOf(protocol)
	return slices.Clone(c.Options)
}

// FindOption returns protocol's spec named name.
func FindOption(protocol, name string) (OptionSpec, error) {
	specs := RequestOptions(protocol)
	for _, s := range specs {
		if s.Name == name {
			return s, nil
		}
	}
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	if len(names) == 0 {
		return OptionSpec{}, fmt.Errorf("protocol %s has no request options", protocol)
	}
	return OptionSpec{}, fmt.Errorf("protocol %s has no request option %q (it has: %s)", protocol, name, strings.Join(names, ", "))
}

// Parse normalises and validates the values a client gave for the option.
func (s OptionSpec) Parse(vals []string) ([]string, error) {
	switch s.Type {
	case OptBool:
		if len(vals) != 1 {
			return nil, fmt.Errorf("option %s takes one value (on or off)", s.Name)
		}
		switch strings.ToLower(vals[0]) {
		case "1", "on", "true", "yes":
			vals = []string{boolOn}
		case "0", "off", "false", "no":
			return nil, nil
		default:
			return nil, fmt.Errorf("option %s: %q is not on or off", s.Name, vals[0])
		}
	case OptString:
		if len(vals) != 1 {
			return nil, fmt.Errorf("option %s takes one value", s.Name)
		}
	case OptList:
		if s.MaxItems > 0 && len(vals) > s.MaxItems {
			return nil, fmt.Errorf("option %s: %d values, limit %d", s.Name, len(vals), s.MaxItems)
		}
	}
	n := 0
	for _, v := range vals {
		n += len(v)
	}
	if n > MaxOptionBytes {
		return nil, fmt.Errorf("option %s: %d bytes, limit %d", s.Name, n, MaxOptionBytes)
	}
	if s.Validate != nil && vals != nil {
		if err := s.Validate(vals); err != nil {
			return nil, fmt.Errorf("option %s: %w", s.Name, err)
		}
	}
	out := append([]string(nil), vals...)
	if s.Type == OptList && out == nil {
		out = []string{}
	}
	return out, nil
}

// ValidateOptions checks a request's options against the protocol's specs
// (an edge that received options from a client calls it: gRPC, the Go
// client's history) and fills in assigned values. It returns the options to
// hand to the protocol.
func ValidateOptions(protocol string, id RequestID, o Options) (Options, error) {
	specs := RequestOptions(protocol)
	for _, name := range o.Names() {
		spec, err := FindOption(protocol, name)
		if err != nil {
			return o, err
		}
		vals, err := spec.Parse(o.Ext[name])
		if err != nil {
			return o, err
		}
		o.Set(name, vals)
	}
	return AssignOptions(specs, id, o), nil
}

// AssignOptions fills in the Assign values of specs the options lack.
func AssignOptions(specs []OptionSpec, id RequestID, o Options) Options {
	for _, s := range specs {
		if s.Assign != nil && o.Ext[s.Name] == nil {
			o.Set(s.Name, s.Assign(id))
		}
	}
	return o
}

// FormatOptions renders options as "name=v1,v2 name2=v" for logs and traces.
func FormatOptions(o Options) string {
	var parts []string
	for _, n := range o.Names() {
		parts = append(parts, n+"="+strings.Join(o.Ext[n], ","))
	}
	return strings.Join(parts, " ")
}

// ParseOptionFlag parses "name=v1,v2" (a command-line option).
func ParseOptionFlag(s string) (string, []string, error) {
	name, val, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return "", nil, fmt.Errorf("option %q is not name=value", s)
	}
	if val == "" {
		return name, []string{}, nil
	}
	return name, strings.Split(val, ","), nil
}

// boolOn is the normalised value of a set bool option.
const boolOn = "1"

// BoolOption returns the value list of a bool option that is on or off.
func BoolOption(on bool) []string {
	if on {
		return []string{boolOn}
	}
	return nil
}
