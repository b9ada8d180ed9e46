package proto

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Kind is a parameter's type, which says how its value is spelled.
type Kind int

// Parameter kinds.
const (
	Duration Kind = iota + 1 // time.ParseDuration: "50ms", "5s"
	Int                      // a decimal integer, spelled canonically: "8", not "+8" or "08"
	Float                    // strconv.ParseFloat, NaN refused: "0.1"
	Bool                     // "true" or "false"
	Enum                     // one of Param.Choices
	String                   // anything
	List                     // comma-separated items, each trimmed; empty items dropped
)

func (k Kind) String() string {
	switch k {
	case Duration:
		return "duration"
	case Int:
		return "integer"
	case Float:
		return "number"
	case Bool:
		return "bool"
	case Enum:
		return "enum"
	case String:
		return "string"
	case List:
		return "list"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Param declares one namespace parameter of a protocol. A protocol lists its
// parameters once, in a Spec; that table is its parser, its DefaultParams
// and the parameter table of its package doc.
type Param struct {
	Name string
	Kind Kind
	// Default is the value when the parameter is absent, spelled as a
	// cluster file would spell it.
	Default string
	// NoDefault marks a parameter whose absence means something no value
	// spells (Doc says what); Default is then ignored and DefaultParams
	// leaves the parameter out.
	NoDefault bool
	// Min and Max bound Duration, Int and Float values, spelled in the
	// kind's syntax ("" for no bound); MinOpen and MaxOpen make a bound
	// exclusive. Duration Min "0" with MinOpen reads "a positive duration".
	Min, Max         string
	MinOpen, MaxOpen bool
	// Choices are an Enum's values.
	Choices []string
	// Words are literal values accepted besides the kind's own (esds's
	// gossip=off); Values.Word reports which one was given.
	Words []string
	// Doc is one line for the doc table.
	Doc string
}

// Spec is a protocol's parameter table.
type Spec struct {
	params   []Param
	byName   map[string]int
	defaults []any
	defWords []string
	min, max []float64 // bounds as numbers (NaN: none)
}

// NewSpec builds a parameter table. It panics on a table that is wrong in
// itself (a name twice, a default that does not parse or is out of its
// bounds, an enum without choices): protocols build their tables at package
// initialisation, so a bad one never gets past the first test.
func NewSpec(ps ...Param) *Spec {
	s := &Spec{params: ps, byName: map[string]int{}}
	for i, p := range ps {
		if p.Name == "" || strings.ContainsAny(p.Name, " =,") {
			panic(fmt.Sprintf("proto: parameter name %q", p.Name))
		}
		if _, dup := s.byName[p.Name]; dup {
			panic(fmt.Sprintf("proto: parameter %s declared twice", p.Name))
		}
		if p.Kind < Duration || p.Kind > List {
			panic(fmt.Sprintf("proto: parameter %s: kind %v", p.Name, p.Kind))
		}
		if p.Kind == Enum && len(p.Choices) == 0 {
			panic(fmt.Sprintf("proto: enum parameter %s has no choices", p.Name))
		}
		s.byName[p.Name] = i
		lo, hi := math.NaN(), math.NaN()
		if p.Min != "" {
			lo = s.bound(p, p.Min)
		}
		if p.Max != "" {
			hi = s.bound(p, p.Max)
		}
		s.min, s.max = append(s.min, lo), append(s.max, hi)
		var (
			def  any
			word string
		)
		if !p.NoDefault {
			var err error
			if def, word, err = s.parse(i, p.Default); err != nil {
				panic(fmt.Sprintf("proto: parameter %s: default %v", p.Name, err))
			}
		}
		s.defaults, s.defWords = append(s.defaults, def), append(s.defWords, word)
	}
	return s
}

// bound parses a bound in the parameter's kind.
func (s *Spec) bound(p Param, v string) float64 {
	var (
		f   float64
		err error
	)
	switch p.Kind {
	case Duration:
		var d time.Duration
		d, err = time.ParseDuration(v)
		f = float64(d)
	case Int:
		var n int
		n, err = strconv.Atoi(v)
		f = float64(n)
	case Float:
		f, err = strconv.ParseFloat(v, 64)
	default:
		err = fmt.Errorf("a %v has no bounds", p.Kind)
	}
	if err != nil || math.IsNaN(f) {
		panic(fmt.Sprintf("proto: parameter %s: bound %q: %v", p.Name, v, err))
	}
	return f
}

// Names lists the parameters in table order.
func (s *Spec) Names() []string {
	out := make([]string, len(s.params))
	for i, p := range s.params {
		out[i] = p.Name
	}
	return out
}

// Params returns the table.
func (s *Spec) Params() []Param { return append([]Param(nil), s.params...) }

// Defaults is automaton.ParamDefaulter's map: every parameter with a
// spellable default, spelled as a cluster file would.
func (s *Spec) Defaults() map[string]string {
	m := make(map[string]string, len(s.params))
	for _, p := range s.params {
		if !p.NoDefault {
			m[p.Name] = p.Default
		}
	}
	return m
}

// Want describes the values a parameter accepts, as the parse errors say it:
// "a positive duration", "an integer in [1, 64]", "one of quorum, log,
// lease", "a positive duration or off".
func (p Param) Want() string {
	w := p.want()
	switch p.Kind {
	case Duration, Int, Float, List, String:
		if strings.IndexByte("aeiou", w[0]) >= 0 {
			w = "an " + w
		} else {
			w = "a " + w
		}
	}
	if len(p.Words) > 0 {
		w += " or " + strings.Join(p.Words, " or ")
	}
	return w
}

// want is Want without the article.
func (p Param) want() string {
	switch p.Kind {
	case Bool:
		return "true or false"
	case Enum:
		return "one of " + strings.Join(p.Choices, ", ")
	case String:
		return "string"
	case List:
		return "comma-separated list"
	}
	noun := p.Kind.String()
	switch {
	case p.Min == "" && p.Max == "":
		return noun
	case p.Max == "" && p.Min == "0" && p.MinOpen, p.Max == "" && p.Kind == Int && p.Min == "1" && !p.MinOpen:
		return "positive " + noun
	case p.Max == "" && p.Min == "0":
		return "non-negative " + noun
	case p.Max == "" && p.MinOpen:
		return noun + " > " + p.Min
	case p.Max == "":
		return noun + " >= " + p.Min
	case p.Min == "" && p.MaxOpen:
		return noun + " < " + p.Max
	case p.Min == "":
		return noun + " <= " + p.Max
	}
	lo, hi := "[", "]"
	if p.MinOpen {
		lo = "("
	}
	if p.MaxOpen {
		hi = ")"
	}
	return fmt.Sprintf("%s in %s%s, %s%s", noun, lo, p.Min, p.Max, hi)
}

// parse parses one value of parameter i: the typed value, or the word
// matched; an error says what the parameter wants.
func (s *Spec) parse(i int, v string) (any, string, error) {
	p := s.params[i]
	for _, w := range p.Words {
		if v == w {
			return nil, w, nil
		}
	}
	var (
		val any
		num = math.NaN()
		ok  bool
	)
	switch p.Kind {
	case Duration:
		d, err := time.ParseDuration(v)
		val, num, ok = d, float64(d), err == nil
	case Int:
		n, err := strconv.Atoi(v)
		val, num, ok = n, float64(n), err == nil && strconv.Itoa(n) == v
	case Float:
		f, err := strconv.ParseFloat(v, 64)
		val, num, ok = f, f, err == nil && !math.IsNaN(f)
	case Bool:
		val, ok = v == "true", v == "true" || v == "false"
	case Enum:
		val = v
		for _, c := range p.Choices {
			ok = ok || v == c
		}
	case String:
		val, ok = v, true
	case List:
		var items []string
		for _, it := range strings.Split(v, ",") {
			if it = strings.TrimSpace(it); it != "" {
				items = append(items, it)
			}
		}
		val, ok = items, true
	}
	if ok && !math.IsNaN(num) {
		lo, hi := s.min[i], s.max[i]
		ok = (math.IsNaN(lo) || num > lo || !p.MinOpen && num == lo) &&
			(math.IsNaN(hi) || num < hi || !p.MaxOpen && num == hi)
	}
	if !ok {
		return nil, "", fmt.Errorf("%q is not %s", v, p.Want())
	}
	return val, "", nil
}

// Parse parses a namespace's parameters against the table. who prefixes the
// errors (the protocol's registered name). Names are taken in sorted order,
// so the error reported first does not depend on map order. An unknown name
// is refused with the list of known ones; a bad value names the parameter
// and what it wants.
func (s *Spec) Parse(who string, m map[string]string) (Values, error) {
	v := Values{spec: s, vals: append([]any(nil), s.defaults...), given: make([]bool, len(s.params)), words: append([]string(nil), s.defWords...)}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		i, ok := s.byName[k]
		if !ok {
			return v, fmt.Errorf("%s: unknown parameter %q (known: %s)", who, k, strings.Join(s.Names(), ", "))
		}
		val, word, err := s.parse(i, m[k])
		if err != nil {
			return v, fmt.Errorf("%s: parameter %s: %v", who, k, err)
		}
		v.vals[i], v.words[i], v.given[i] = val, word, true
	}
	return v, nil
}

// Doc renders the table for a package doc: one line per parameter with its
// name, what it accepts, its default ("-" when absence is described in the
// line's doc) and its doc line, in aligned columns.
func (s *Spec) Doc() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	for _, p := range s.params {
		def := p.Default
		switch {
		case p.NoDefault:
			def = "-"
		case def == "":
			def = `""`
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name, p.want()+wordsSuffix(p), def, p.Doc)
	}
	tw.Flush()
	// tabwriter pads the last column's predecessors; trim trailing blanks.
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n") + "\n"
}

func wordsSuffix(p Param) string {
	if len(p.Words) == 0 {
		return ""
	}
	return " or " + strings.Join(p.Words, " or ")
}

// CheckDoc reports whether the Go source src (a package's doc.go) holds the
// table Doc renders, as a block of tab-indented comment lines, so that a
// test can keep a package doc's parameter table in step with the parser.
func (s *Spec) CheckDoc(src string) error {
	var want strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s.Doc(), "\n"), "\n") {
		want.WriteString("//\t" + l + "\n")
	}
	if !strings.Contains(src, want.String()) {
		return fmt.Errorf("the package doc does not hold the parameter table; want:\n%s", want.String())
	}
	return nil
}

// Values are parsed parameters. The getters panic on a name the table does
// not declare or a kind it does not have: that is a bug in the protocol, not
// in the cluster file.
type Values struct {
	spec  *Spec
	vals  []any
	given []bool
	words []string
}

func (v Values) get(name string, k Kind) any {
	i, ok := v.spec.byName[name]
	if !ok {
		panic(fmt.Sprintf("proto: parameter %s is not declared", name))
	}
	if kk := v.spec.params[i].Kind; kk != k && !(k == String && kk == Enum) {
		panic(fmt.Sprintf("proto: parameter %s is a %v, not a %v", name, kk, k))
	}
	return v.vals[i]
}

// Duration returns a Duration parameter (0 when a word or nothing was given
// and there is no default).
func (v Values) Duration(name string) time.Duration {
	d, _ := v.get(name, Duration).(time.Duration)
	return d
}

// Int returns an Int parameter.
func (v Values) Int(name string) int {
	n, _ := v.get(name, Int).(int)
	return n
}

// Float returns a Float parameter.
func (v Values) Float(name string) float64 {
	f, _ := v.get(name, Float).(float64)
	return f
}

// Bool returns a Bool parameter.
func (v Values) Bool(name string) bool {
	b, _ := v.get(name, Bool).(bool)
	return b
}

// String returns an Enum or String parameter.
func (v Values) String(name string) string {
	s, _ := v.get(name, String).(string)
	return s
}

// List returns a List parameter's items.
func (v Values) List(name string) []string {
	l, _ := v.get(name, List).([]string)
	return l
}

// Given reports whether the parameter was set (rather than defaulted).
func (v Values) Given(name string) bool {
	v.get(name, v.kind(name))
	return v.given[v.spec.byName[name]]
}

// Word returns the literal word (Param.Words) the parameter holds, or "".
func (v Values) Word(name string) string {
	v.get(name, v.kind(name))
	return v.words[v.spec.byName[name]]
}

func (v Values) kind(name string) Kind {
	if i, ok := v.spec.byName[name]; ok {
		return v.spec.params[i].Kind
	}
	return 0
}
