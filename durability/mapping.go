package durability

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Mechanism is a state object's durability attribute (the Grid Services thesis IV.B.2).
type Mechanism string

// The three mechanisms of IV.B.2.
const (
	// Replicated: backed up in backup replicas of the object on other
	// machines (the replication proxy; primary-backup's state updates).
	Replicated Mechanism = "replicated"
	// Database: backed up in a SQL database (the database proxy).
	Database Mechanism = "database"
	// Reconstructible: volatile memory only, rebuilt after a failure (the
	// reconstruction proxy).
	Reconstructible Mechanism = "reconstructible"
)

// Update instructions of a method (IV.C.3 "for each update method of this
// object, the state update instructions").
const (
	// Repeat executes the same method with the same arguments on the backup
	// object (Fig. IV.4's keyword). Only for deterministic methods.
	Repeat = "repeat"
	// Snapshot ships the object's whole state after the request (for a
	// nondeterministic method: IV.B.3 "if the update operations are
	// nondeterministic, this simple solution cannot be used").
	Snapshot = "snapshot"
	// None records nothing (reconstructible objects).
	None = "none"
)

// Checkpoint and restore instructions (IV.C.3), used by startTA and abortTA.
const (
	CheckpointNone = "none" // no checkpoint
	CheckpointCopy = "copy" // a copy of the object's state (the generated snapshot)

	RestoreCheckpoint = "checkpoint" // load the startTA checkpoint
	RestoreRecover    = "recover"    // call recover (database: reload from the tables)
	RestoreInit       = "init"       // call init: abort to the empty object (IV.C.2, reconstruction proxy)
)

// Mapping is a service's durability mapping (the Grid Services thesis IV.C.3): for each
// named state object its mechanism and the object-specific instructions.
type Mapping struct {
	// Service names the service the mapping is for (informative).
	Service string `yaml:"service,omitempty"`
	// Objects maps a state object's name (its Go type name) to its entry.
	Objects map[string]*ObjectMapping `yaml:"objects"`
}

// ObjectMapping is one state object's entry.
type ObjectMapping struct {
	Mechanism Mechanism `yaml:"mechanism"`
	// Init: database: the statements that create the object's tables
	// (run at the primary's first start; IF NOT EXISTS makes them safe to
	// rerun). Others: none.
	Init []string `yaml:"init,omitempty"`
	// Recover: database: queries whose rows, column by column, become the
	// arguments of an update method replayed on the empty object (Fig.
	// IV.5: "SELECT * FROM bills; for (each line) insertBill(clientID,
	// balance)").
	Recover []RecoverStep `yaml:"recover,omitempty"`
	// Rebuild: reconstructible: an update method without arguments called
	// after the object is reset to empty (init = recover = empty, or
	// rebuild).
	Rebuild string `yaml:"rebuild,omitempty"`
	// Methods maps each update method to its instruction.
	Methods map[string]*Instruction `yaml:"methods,omitempty"`
	// Checkpoint and Restore: startTA and abortTA (IV.C.3). Defaults per
	// mechanism: replicated copy/checkpoint, database none/recover,
	// reconstructible none/init.
	Checkpoint string `yaml:"checkpoint,omitempty"`
	Restore    string `yaml:"restore,omitempty"`
}

// RecoverStep is one recovery query and the method each row is replayed as.
type RecoverStep struct {
	Query string `yaml:"query"`
	Call  string `yaml:"call"`
}

// Instruction is a method's state update instruction: a keyword (repeat,
// snapshot, none) or SQL statements whose :name placeholders are the
// method's named arguments.
type Instruction struct {
	Keyword string
	SQL     []string
}

// UnmarshalYAML reads `repeat`, `snapshot`, `none`, `{sql: "..."}` or
// `{sql: ["...", "..."]}`.
func (in *Instruction) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		in.Keyword = n.Value
		return nil
	}
	var raw struct {
		SQL yaml.Node `yaml:"sql"`
	}
	if err := n.Decode(&raw); err != nil {
		return err
	}
	switch raw.SQL.Kind {
	case yaml.ScalarNode:
		in.SQL = []string{raw.SQL.Value}
	case yaml.SequenceNode:
		if err := raw.SQL.Decode(&in.SQL); err != nil {
			return err
		}
	default:
		return fmt.Errorf("line %d: an instruction is repeat, snapshot, none or {sql: ...}", n.Line)
	}
	return nil
}

// MarshalYAML writes an instruction back in the form it was read.
func (in Instruction) MarshalYAML() (any, error) {
	if in.Keyword != "" {
		return in.Keyword, nil
	}
	return map[string]any{"sql": in.SQL}, nil
}

func (in *Instruction) String() string {
	if in.Keyword != "" {
		return in.Keyword
	}
	return "sql: " + strings.Join(in.SQL, "; ")
}

// ParseMapping reads a YAML mapping. Unknown fields are errors.
func ParseMapping(b []byte) (*Mapping, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var m Mapping
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("durability mapping: %w", err)
	}
	return &m, nil
}

// LoadMapping reads a mapping file.
func LoadMapping(path string) (*Mapping, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := ParseMapping(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// ObjectInfo describes a state object's Go type as the generator read it:
// its update methods (those that return nothing) with their parameters,
// and its read methods. Generated code carries it, so that a mapping
// chosen at deployment is checked against the code it drives.
type ObjectInfo struct {
	Name    string
	Updates []MethodInfo
	Reads   []string
}

// MethodInfo is one update method's signature.
type MethodInfo struct {
	Name   string
	Params []Param
}

// Param is one named parameter.
type Param struct {
	Name string
	Kind Kind
}

func (o ObjectInfo) update(name string) (MethodInfo, bool) {
	for _, m := range o.Updates {
		if m.Name == name {
			return m, true
		}
	}
	return MethodInfo{}, false
}

// Validate checks the mapping against the state objects of the service
// (nil infos: structure only). Every error names its field as
// objects.<object>[.methods.<method>|.recover[i]|...]; all are reported.
func (m *Mapping) Validate(infos []ObjectInfo) error {
	var errs []error
	bad := func(field, f string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(f, a...)))
	}
	byName := map[string]ObjectInfo{}
	for _, o := range infos {
		byName[o.Name] = o
	}
	if len(m.Objects) == 0 {
		bad("objects", "no state objects")
	}
	for _, name := range slices.Sorted(maps.Keys(m.Objects)) {
		om := m.Objects[name]
		f := "objects." + name
		if om == nil {
			bad(f, "empty entry (needs at least a mechanism)")
			continue
		}
		info, known := byName[name]
		if infos != nil && !known {
			bad(f, "unknown state object (the service has %s)", strings.Join(infoNames(infos), ", "))
			continue
		}
		switch om.Mechanism {
		case Replicated, Database, Reconstructible:
		case "":
			bad(f+".mechanism", "missing (replicated, database or reconstructible)")
			continue
		default:
			bad(f+".mechanism", "unknown mechanism %q (replicated, database or reconstructible)", om.Mechanism)
			continue
		}
		if om.Mechanism != Database && len(om.Init) > 0 {
			bad(f+".init", "only the database mechanism has init statements")
		}
		if om.Mechanism != Database && len(om.Recover) > 0 {
			bad(f+".recover", "only the database mechanism has recovery queries")
		}
		if om.Mechanism != Reconstructible && om.Rebuild != "" {
			bad(f+".rebuild", "only the reconstructible mechanism has a rebuild method")
		}
		if om.Mechanism == Database && len(om.Recover) == 0 {
			bad(f+".recover", "missing: the database mechanism restores the object from recovery queries")
		}
		for i, st := range om.Recover {
			rf := fmt.Sprintf("%s.recover[%d]", f, i)
			if strings.TrimSpace(st.Query) == "" {
				bad(rf+".query", "missing")
			}
			if st.Call == "" {
				bad(rf+".call", "missing: the update method each row is replayed as")
			} else if known {
				if _, ok := info.update(st.Call); !ok {
					bad(rf+".call", "%s is not an update method of %s (%s)", st.Call, name, strings.Join(updateNames(info), ", "))
				}
			}
		}
		if om.Rebuild != "" && known {
			if mi, ok := info.update(om.Rebuild); !ok || len(mi.Params) > 0 {
				bad(f+".rebuild", "%s is not an update method of %s without arguments", om.Rebuild, name)
			}
		}
		switch om.Checkpoint {
		case "", CheckpointNone, CheckpointCopy:
		default:
			bad(f+".checkpoint", "unknown checkpoint %q (none or copy)", om.Checkpoint)
		}
		switch om.Restore {
		case "", RestoreInit:
		case RestoreCheckpoint:
			if om.checkpoint() != CheckpointCopy {
				bad(f+".restore", "restore from checkpoint needs checkpoint: copy")
			}
		case RestoreRecover:
			if om.Mechanism != Database {
				bad(f+".restore", "restore by recover needs the database mechanism (the %s object has nothing to recover from)", om.Mechanism)
			}
		default:
			bad(f+".restore", "unknown restore %q (checkpoint, recover or init)", om.Restore)
		}
		for _, meth := range slices.Sorted(maps.Keys(om.Methods)) {
			in := om.Methods[meth]
			mf := f + ".methods." + meth
			var mi MethodInfo
			if known {
				var ok bool
				if mi, ok = info.update(meth); !ok {
					bad(mf, "not an update method of %s (update methods: %s)", name, strings.Join(updateNames(info), ", "))
					continue
				}
			}
			if in == nil {
				bad(mf, "empty instruction")
				continue
			}
			switch om.Mechanism {
			case Replicated:
				if in.Keyword != Repeat && in.Keyword != Snapshot {
					bad(mf, "the replicated mechanism takes repeat or snapshot, not %s", in)
				}
			case Reconstructible:
				if in.Keyword != None {
					bad(mf, "the reconstructible mechanism records nothing: none, not %s", in)
				}
			case Database:
				if in.Keyword != "" || len(in.SQL) == 0 {
					bad(mf, "the database mechanism needs sql, not %s", in)
					continue
				}
				for i, s := range in.SQL {
					if _, err := compileSQL(s, mi, known); err != nil {
						bad(fmt.Sprintf("%s.sql[%d]", mf, i), "%v", err)
					}
				}
			}
		}
		if known && om.Mechanism != Reconstructible {
			for _, u := range info.Updates {
				if _, ok := om.Methods[u.Name]; !ok {
					bad(f+".methods."+u.Name, "missing: the %s mechanism needs an instruction for every update method (%s)", om.Mechanism, mechHint(om.Mechanism))
				}
			}
		}
	}
	if infos != nil {
		for _, o := range infos {
			if _, ok := m.Objects[o.Name]; !ok {
				bad("objects."+o.Name, "missing: every state object of the service needs a mechanism")
			}
		}
	}
	return errors.Join(errs...)
}

func mechHint(m Mechanism) string {
	if m == Database {
		return "sql"
	}
	return "repeat or snapshot"
}

func (om *ObjectMapping) checkpoint() string {
	if om.Checkpoint != "" {
		return om.Checkpoint
	}
	if om.Mechanism == Replicated {
		return CheckpointCopy
	}
	return CheckpointNone
}

func (om *ObjectMapping) restore() string {
	if om.Restore != "" {
		return om.Restore
	}
	switch om.Mechanism {
	case Replicated:
		return RestoreCheckpoint
	case Database:
		return RestoreRecover
	}
	return RestoreInit
}

// Mechanisms lists each object's mechanism as "Object=mechanism", sorted
// (experiments print it beside their figures).
func (m *Mapping) Mechanisms() string {
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(m.Objects)) {
		parts = append(parts, n+"="+string(m.Objects[n].Mechanism))
	}
	return strings.Join(parts, ",")
}

func infoNames(infos []ObjectInfo) []string {
	var out []string
	for _, o := range infos {
		out = append(out, o.Name)
	}
	sort.Strings(out)
	return out
}

func updateNames(o ObjectInfo) []string {
	var out []string
	for _, m := range o.Updates {
		out = append(out, m.Name)
	}
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}
