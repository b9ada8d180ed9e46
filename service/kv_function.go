package service

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/synod-dev/synod/wire"
)

// Function libraries (FUNCTION LOAD, FCALL; issue 34), replicated and
// persisted as Redis 7 does: the library table is part of the KV state,
// beside the keyspace. FUNCTION LOAD, DELETE, FLUSH and RESTORE are
// operations of the log, applied by every replica; FCALL names a function
// and Apply finds its library in the table (kv_script.go). The table
// travels in snapshots (format 4) and in deltas (codec 3, when it changed
// after the delta's start), is hashed into StateHash, and is shared by
// Clone (a change replaces the map). FLUSHALL and FLUSHDB leave it, as in
// Redis.
//
//	fnload replace code         W  bytes (the library's name)
//	fndelete name               W  OK
//	fnflush                     W  OK
//	fnlist withcode [pattern]   R  array of [name, code | nil, fname, desc | nil, [flag ...], ...]
//	                               (flat per library: results nest at most MaxArrayDepth deep)
//	fndump                      R  bytes (Synod's payload: not Redis's RDB format)
//	fnrestore payload [policy]  W  OK (policy append, replace or flush)
//
// Decisions. The table is one unit of state: a change to any library
// ships the whole table in the next delta (libraries are few and small).
// A library's functions are found again by running its code (deterministic,
// no command may run while it loads) after a Restore. The keyspace-wide
// operations are refused where keyspace operations are (eve, adam,
// orca-primary and sharded namespaces): there, each key is its own object
// and no single state holds a table every key's operations could read. A
// DUMP payload is Synod's own (the libraries' code, 0xff 'F', 8 bytes of
// SHA-256); Redis's payloads are refused with its checksum error.

func init() {
	addKVOps(map[string]kvOp{
		"fnload":    {keyspace: true, min: 2, max: 2, run: (*KVState).opFnLoad},
		"fndelete":  {keyspace: true, min: 1, max: 1, run: (*KVState).opFnDelete},
		"fnflush":   {keyspace: true, run: (*KVState).opFnFlush},
		"fnlist":    {keyspace: true, read: true, min: 1, max: 2, run: (*KVState).opFnList},
		"fndump":    {keyspace: true, read: true, run: (*KVState).opFnDump},
		"fnrestore": {keyspace: true, min: 1, max: 2, run: (*KVState).opFnRestore},
	})
}

// fnLib is a loaded library: its code and its functions' names in order.
type fnLib struct {
	name  string
	code  []byte
	funcs []string
}

// libraryOf returns the library holding function name (compared without
// case, as Redis does) and the name as registered.
func (s *KVState) libraryOf(name string) (*fnLib, string, bool) {
	for _, n := range slices.Sorted(maps.Keys(s.libs)) {
		l := s.libs[n]
		for _, f := range l.funcs {
			if strings.EqualFold(f, name) {
				return l, f, true
			}
		}
	}
	return nil, "", false
}

// LibraryName reads a library's "#!lua name=<name>" first line as Redis
// 7.0 (functionExtractLibMetaData): the name, or the error.
func LibraryName(code []byte) (string, string) {
	line, _, _ := strings.Cut(string(code), "\n")
	if !strings.HasPrefix(line, "#!") {
		return "", "ERR Missing library metadata"
	}
	engine, _, _ := strings.Cut(line[2:], " ") // "#! name=x" names the engine ""
	f := strings.Fields(line[2:])
	if !strings.EqualFold(engine, "lua") {
		return "", "ERR Engine '" + engine + "' not found"
	}
	name, named := "", false
	for _, kv := range f[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k != "name" {
			return "", "ERR Invalid metadata value given: " + kv
		}
		if named {
			return "", "ERR Invalid metadata value, name argument was given multiple times"
		}
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' { // Redis splits the line as sdssplitargs: quotes go
			v = v[1 : len(v)-1]
		}
		name, named = v, true
	}
	if name == "" {
		return "", "ERR Library name was not given"
	}
	if strings.IndexFunc(name, func(r rune) bool {
		return !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) >= 0 {
		return "", "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"
	}
	return name, ""
}

// compileLibrary checks a library as FUNCTION LOAD does and returns it.
func compileLibrary(code []byte) (*fnLib, string) {
	name, msg := LibraryName(code)
	if msg != "" {
		return nil, msg
	}
	funcs, msg := CheckLibrary(code)
	if msg != "" {
		return nil, msg
	}
	return &fnLib{name: name, code: bytes.Clone(code), funcs: funcs}, ""
}

// setLibs installs a new library table (never changed in place: Clone
// shares it) as a write.
func (s *KVState) setLibs(libs map[string]*fnLib) {
	if len(libs) == 0 {
		libs = nil
	}
	s.version++
	s.libs, s.libsAt = libs, s.version
}

// joinLibs adds libs to the table as libraryJoin does: a library of the
// same name is an error unless replace, a function name already taken by
// another library always is.
func (s *KVState) joinLibs(add []*fnLib, replace bool) (map[string]*fnLib, string) {
	out := maps.Clone(s.libs)
	if out == nil {
		out = map[string]*fnLib{}
	}
	for _, l := range add {
		if _, ok := out[l.name]; ok {
			if !replace {
				return nil, fmt.Sprintf("ERR Library %s already exists", l.name)
			}
			delete(out, l.name)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(out)) {
		for _, l := range add {
			for _, f := range l.funcs {
				for _, g := range out[n].funcs {
					if strings.EqualFold(f, g) {
						return nil, fmt.Sprintf("ERR Function %s already exists", f)
					}
				}
			}
		}
	}
	for _, l := range add {
		out[l.name] = l
	}
	return out, ""
}

func (s *KVState) opFnLoad(op Op) Result {
	lib, msg := compileLibrary(op.Args[1])
	if msg != "" {
		return Errorf("%s", msg)
	}
	replace := string(op.Args[0]) == "replace"
	if _, ok := s.libs[lib.name]; ok && !replace {
		return Errorf("ERR Library '%s' already exists", lib.name)
	}
	libs, msg := s.joinLibs([]*fnLib{lib}, true)
	if msg != "" {
		return Errorf("%s", msg)
	}
	s.setLibs(libs)
	return Bytes([]byte(lib.name))
}

func (s *KVState) opFnDelete(op Op) Result {
	name := string(op.Args[0])
	if _, ok := s.libs[name]; !ok {
		return Errorf("ERR Library not found")
	}
	libs := maps.Clone(s.libs)
	delete(libs, name)
	s.setLibs(libs)
	return OK()
}

func (s *KVState) opFnFlush(Op) Result {
	s.setLibs(nil)
	return OK()
}

// flagOrder is the order in which Redis lists a function's flags.
var flagOrder = []string{"no-writes", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys"}

func (s *KVState) opFnList(op Op) Result {
	withCode := string(op.Args[0]) == "withcode"
	var out []Result
	for _, n := range slices.Sorted(maps.Keys(s.libs)) {
		l := s.libs[n]
		if len(op.Args) == 2 && !GlobMatch(bytes.ToLower(op.Args[1]), bytes.ToLower([]byte(n))) { // stringmatchlen nocase
			continue
		}
		code := Nil()
		if withCode {
			code = Bytes(l.code)
		}
		var fns []Result
		run := &scriptRun{}
		L := newScriptState(run)
		L.SetContext(&budget{left: ScriptBudget, done: make(chan struct{})})
		_, metas, _ := loadLibrary(run, L, l.code)
		L.Close()
		for _, f := range l.funcs {
			m := metas[f]
			desc := Nil()
			if m.desc != nil {
				desc = Bytes([]byte(*m.desc))
			}
			var flags []Result
			for _, fl := range flagOrder {
				if slices.Contains(m.flags, fl) {
					flags = append(flags, Bytes([]byte(fl)))
				}
			}
			fns = append(fns, Bytes([]byte(f)), desc, Array(flags...))
		}
		out = append(out, Array(append([]Result{Bytes([]byte(n)), code}, fns...)...))
	}
	return Array(out...)
}

var fnDumpVersion = []byte{0xff, 'F'}

func (s *KVState) opFnDump(Op) Result {
	w := &wire.Encoder{}
	s.encodeLibs(w)
	b := append(w.B, fnDumpVersion...)
	sum := sha256.Sum256(b)
	return Bytes(append(b, sum[:8]...))
}

func (s *KVState) opFnRestore(op Op) Result {
	policy := "append"
	if len(op.Args) == 2 {
		policy = strings.ToLower(string(op.Args[1]))
		if policy != "append" && policy != "replace" && policy != "flush" {
			return Errorf("ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.")
		}
	}
	p := op.Args[0]
	n := len(p) - 8 - len(fnDumpVersion)
	if n < 0 || !bytes.Equal(p[n:n+len(fnDumpVersion)], fnDumpVersion) {
		return Errorf("ERR DUMP payload version or checksum are wrong")
	}
	if sum := sha256.Sum256(p[:n+len(fnDumpVersion)]); !bytes.Equal(sum[:8], p[n+len(fnDumpVersion):]) {
		return Errorf("ERR DUMP payload version or checksum are wrong")
	}
	d := wire.NewDecoder(p[:n])
	codes := decodeLibCodes(d)
	if err := d.Done(); err != nil {
		return Errorf("ERR failed loading the given functions payload")
	}
	var add []*fnLib
	for _, c := range codes {
		l, msg := compileLibrary(c)
		if msg != "" {
			return Errorf("%s", msg)
		}
		add = append(add, l)
	}
	if policy == "flush" {
		libs := map[string]*fnLib{}
		for _, l := range add {
			libs[l.name] = l
		}
		s.setLibs(libs)
		return OK()
	}
	libs, msg := s.joinLibs(add, policy == "replace")
	if msg != "" {
		return Errorf("%s", msg)
	}
	s.setLibs(libs)
	return OK()
}

// encodeLibs appends the library table: the count, then each library's
// code in name order (the names and functions follow from the code).
func (s *KVState) encodeLibs(e *wire.Encoder) {
	names := slices.Sorted(maps.Keys(s.libs))
	e.Uvarint(uint64(len(names)))
	for _, n := range names {
		e.Bytes(s.libs[n].code)
	}
}

func decodeLibCodes(d *wire.Decoder) [][]byte {
	n := d.Count(1<<20, 1)
	var out [][]byte
	for i := 0; i < n && d.Err() == nil; i++ {
		out = append(out, d.BytesCopy())
	}
	return out
}

// decodeLibs reads encodeLibs' output and loads each library again.
func decodeLibs(d *wire.Decoder) map[string]*fnLib {
	codes := decodeLibCodes(d)
	if d.Err() != nil || len(codes) == 0 {
		return nil
	}
	libs := map[string]*fnLib{}
	for _, c := range codes {
		l, msg := compileLibrary(c)
		if msg != "" {
			d.Fail(fmt.Errorf("library does not load: %s", msg))
			return nil
		}
		libs[l.name] = l
	}
	return libs
}

// libsHash is the library table's part of StateHash (zero when empty).
func (s *KVState) libsHash() [32]byte {
	if len(s.libs) == 0 {
		return [32]byte{}
	}
	w := &wire.Encoder{}
	s.encodeLibs(w)
	return sha256.Sum256(w.B)
}
