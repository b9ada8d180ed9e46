package proto

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/wire"
)

var testSpec = NewSpec(
	Param{Name: "heartbeat", Kind: Duration, Default: "50ms", Min: "0", MinOpen: true, Doc: "heartbeat interval"},
	Param{Name: "margin", Kind: Duration, Default: "0s", Min: "0", Doc: "subtracted"},
	Param{Name: "gossip", Kind: Duration, Default: "20ms", Min: "0", MinOpen: true, Words: []string{"off"}, Doc: "gossip interval"},
	Param{Name: "window", Kind: Int, Default: "8", Min: "1", Doc: "instances at once"},
	Param{Name: "drift", Kind: Float, Default: "0.1", Min: "0", Max: "1", MaxOpen: true, Doc: "clock drift"},
	Param{Name: "fast", Kind: Bool, Default: "false", Doc: "go fast"},
	Param{Name: "read", Kind: Enum, Default: "quorum", Choices: []string{"quorum", "log", "lease"}, Doc: "default read"},
	Param{Name: "label", Kind: String, Default: "", Doc: "a label"},
	Param{Name: "members", Kind: List, NoDefault: true, Doc: "bootstrap members (absent: Config.Nodes)"},
)

func TestParseDefaults(t *testing.T) {
	v, err := testSpec.Parse("t", nil)
	if err != nil {
		t.Fatal(err)
	}
	if v.Duration("heartbeat") != 50*time.Millisecond || v.Int("window") != 8 || v.Float("drift") != 0.1 ||
		v.Bool("fast") || v.String("read") != "quorum" || v.List("members") != nil || v.Given("window") || v.Word("gossip") != "" {
		t.Fatalf("defaults: %+v", v)
	}
	want := map[string]string{"heartbeat": "50ms", "margin": "0s", "gossip": "20ms", "window": "8", "drift": "0.1", "fast": "false", "read": "quorum", "label": ""}
	if got := testSpec.Defaults(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Defaults %v, want %v", got, want)
	}
	// The defaults, spelled out, parse to the defaults.
	w, err := testSpec.Parse("t", testSpec.Defaults())
	if err != nil || !reflect.DeepEqual(w.vals, v.vals) {
		t.Fatalf("Defaults parse to %v (%v), want %v", w.vals, err, v.vals)
	}
}

func TestParseValues(t *testing.T) {
	v, err := testSpec.Parse("t", map[string]string{"heartbeat": "1s", "margin": "0s", "gossip": "off", "window": "3",
		"drift": "0", "fast": "true", "read": "lease", "label": "x y", "members": " n1, n2 ,,n3"})
	if err != nil {
		t.Fatal(err)
	}
	if v.Duration("heartbeat") != time.Second || v.Word("gossip") != "off" || v.Duration("gossip") != 0 || v.Int("window") != 3 ||
		v.Float("drift") != 0 || !v.Bool("fast") || v.String("read") != "lease" || v.String("label") != "x y" ||
		!reflect.DeepEqual(v.List("members"), []string{"n1", "n2", "n3"}) || !v.Given("members") || !v.Given("margin") {
		t.Fatalf("values: %+v", v)
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ k, v, want string }{
		{"colour", "blue", `t: unknown parameter "colour" (known: heartbeat, margin, gossip, window, drift, fast, read, label, members)`},
		{"heartbeat", "0s", `t: parameter heartbeat: "0s" is not a positive duration`},
		{"heartbeat", "-1s", `t: parameter heartbeat: "-1s" is not a positive duration`},
		{"margin", "-1ms", `t: parameter margin: "-1ms" is not a non-negative duration`},
		{"gossip", "on", `t: parameter gossip: "on" is not a positive duration or off`},
		{"window", "0", `t: parameter window: "0" is not a positive integer`},
		{"window", "x", `t: parameter window: "x" is not a positive integer`},
		{"window", "08", `t: parameter window: "08" is not a positive integer`},
		{"window", "+8", `t: parameter window: "+8" is not a positive integer`},
		{"drift", "1", `t: parameter drift: "1" is not a number in [0, 1)`},
		{"drift", "-0.5", `t: parameter drift: "-0.5" is not a number in [0, 1)`},
		{"drift", "NaN", `t: parameter drift: "NaN" is not a number in [0, 1)`},
		{"fast", "yes", `t: parameter fast: "yes" is not true or false`},
		{"read", "local", `t: parameter read: "local" is not one of quorum, log, lease`},
	} {
		_, err := testSpec.Parse("t", map[string]string{c.k: c.v})
		if err == nil || err.Error() != c.want {
			t.Errorf("%s=%s: %v, want %s", c.k, c.v, err, c.want)
		}
	}
	// The first error in name order is reported, whatever the map order.
	for i := 0; i < 20; i++ {
		_, err := testSpec.Parse("t", map[string]string{"window": "0", "drift": "2", "zz": "1"})
		if err == nil || !strings.Contains(err.Error(), "parameter drift") {
			t.Fatalf("first error: %v", err)
		}
	}
}

func TestWantBounds(t *testing.T) {
	for _, c := range []struct {
		p    Param
		want string
	}{
		{Param{Kind: Int, Min: "3"}, "an integer >= 3"},
		{Param{Kind: Int, Min: "1", Max: "64"}, "an integer in [1, 64]"},
		{Param{Kind: Duration, Max: "1s", MaxOpen: true}, "a duration < 1s"},
		{Param{Kind: Float, Min: "0", MinOpen: true, Max: "1"}, "a number in (0, 1]"},
		{Param{Kind: Float}, "a number"},
	} {
		if got := c.p.Want(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.p, got, c.want)
		}
	}
	s := NewSpec(Param{Name: "n", Kind: Int, Default: "5", Min: "1", Max: "64"})
	for v, ok := range map[string]bool{"1": true, "64": true, "0": false, "65": false} {
		if _, err := s.Parse("t", map[string]string{"n": v}); (err == nil) != ok {
			t.Errorf("n=%s: %v", v, err)
		}
	}
}

func TestBadTablesPanic(t *testing.T) {
	for name, ps := range map[string][]Param{
		"twice":         {{Name: "a", Kind: Int, Default: "1"}, {Name: "a", Kind: Int, Default: "1"}},
		"bad default":   {{Name: "a", Kind: Int, Default: "x"}},
		"out of bounds": {{Name: "a", Kind: Int, Default: "0", Min: "1"}},
		"no choices":    {{Name: "a", Kind: Enum, Default: "x"}},
		"no kind":       {{Name: "a", Default: "x"}},
		"bad bound":     {{Name: "a", Kind: Duration, Default: "1s", Min: "zero"}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			NewSpec(ps...)
		}()
	}
}

func TestGetterOfWrongKindPanics(t *testing.T) {
	v, _ := testSpec.Parse("t", nil)
	for name, f := range map[string]func(){
		"undeclared": func() { v.Int("nope") },
		"wrong kind": func() { v.Int("heartbeat") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func TestDoc(t *testing.T) {
	want := `heartbeat  positive duration          50ms    heartbeat interval
margin     non-negative duration      0s      subtracted
gossip     positive duration or off   20ms    gossip interval
window     positive integer           8       instances at once
drift      number in [0, 1)           0.1     clock drift
fast       true or false              false   go fast
read       one of quorum, log, lease  quorum  default read
label      string                     ""      a label
members    comma-separated list       -       bootstrap members (absent: Config.Nodes)
`
	if got := testSpec.Doc(); got != want {
		t.Fatalf("Doc:\n%s\nwant:\n%s", got, want)
	}
	src := "// Package x.\n//\n// # Parameters\n//\n" + "//\t" + strings.ReplaceAll(strings.TrimSuffix(want, "\n"), "\n", "\n//\t") + "\n//\n// more\npackage x\n"
	if err := testSpec.CheckDoc(src); err != nil {
		t.Fatal(err)
	}
	if err := testSpec.CheckDoc(strings.Replace(src, "instances at once", "instances", 1)); err == nil {
		t.Fatal("a stale doc table passed")
	}
}

func TestHeader(t *testing.T) {
	h := Header{Protocol: "p", Version: 1, Kinds: []string{"ping", "pong"}}
	e := h.Message(2, 8)
	e.Uvarint(300)
	if want := []byte{1, 2, 0xac, 0x02}; !reflect.DeepEqual(e.B, want) {
		t.Fatalf("message % x, want % x", e.B, want)
	}
	d, k, err := h.OpenMessage(e.B)
	if err != nil || k != 2 || d.Uvarint() != 300 || d.Done() != nil {
		t.Fatalf("open: kind %d, %v", k, err)
	}
	for _, c := range []struct {
		b    []byte
		is   error
		text string
	}{
		{nil, wire.ErrTruncated, "p: message header: wire: truncated"},
		{[]byte{1}, wire.ErrTruncated, "p: message header: wire: truncated"},
		{[]byte{2, 1}, ErrBadVersion, "p: message: bad version 2, want 1"},
		{[]byte{1, 3}, ErrUnknownType, "p: unknown message type 3"},
		{[]byte{1, 0}, ErrUnknownType, "p: unknown message type 0"},
	} {
		_, _, err := h.OpenMessage(c.b)
		if !errors.Is(err, c.is) || err.Error() != c.text {
			t.Errorf("% x: %v, want %s", c.b, err, c.text)
		}
	}
	r := h.Record(4)
	r.Bool(true)
	if d, err := h.OpenRecord(r.B, "flag"); err != nil || !d.Bool() {
		t.Fatalf("record: %v", err)
	}
	if _, err := h.OpenRecord([]byte{9, 1}, "flag"); !errors.Is(err, ErrBadVersion) || err.Error() != "p: flag record: bad version 9, want 1" {
		t.Errorf("record version: %v", err)
	}
	if _, err := h.OpenRecord(nil, "flag"); !errors.Is(err, wire.ErrTruncated) {
		t.Errorf("empty record: %v", err)
	}
	if h.KindName(1) != "ping" || h.KindName(7) != "kind 7" {
		t.Errorf("names: %s %s", h.KindName(1), h.KindName(7))
	}
}

func TestNodes(t *testing.T) {
	nodes := []automaton.NodeID{"a", "b", "c"}
	if Index(nodes, "c") != 2 || Index(nodes, "z") != -1 {
		t.Fatal("Index")
	}
	pos, me, err := Positions("p", nodes, "b")
	if err != nil || me != 1 || pos["a"] != 0 || pos["c"] != 2 || len(pos) != 3 {
		t.Fatalf("Positions: %v %d %v", pos, me, err)
	}
	if _, _, err := Positions("p", []automaton.NodeID{"a", "b", "a"}, "a"); err == nil || err.Error() != "p: node a listed twice" {
		t.Errorf("twice: %v", err)
	}
	if _, _, err := Positions("p", nodes, "z"); err == nil || err.Error() != "p: self z is not among the nodes [a b c]" {
		t.Errorf("self: %v", err)
	}
}

func TestBallot(t *testing.T) {
	a, b, c := Ballot{Round: 1, Node: 2}, Ballot{Round: 2, Node: 0}, Ballot{Round: 2, Node: 1}
	if !a.Less(b) || !b.Less(c) || c.Less(a) || a.Less(a) || !(Ballot{}).IsZero() || a.IsZero() {
		t.Fatal("order")
	}
	if n := c.Next(0); n != (Ballot{Round: 3, Node: 0}) || !c.Less(n) {
		t.Fatalf("Next %v", n)
	}
	if a.String() != "(1,2)" || a.Dotted() != "1.2" {
		t.Fatalf("%s %s", a, a.Dotted())
	}
	var e wire.Encoder
	Ballot{Round: 300, Node: 5}.Encode(&e)
	if want := []byte{0xac, 0x02, 5}; !reflect.DeepEqual(e.B, want) {
		t.Fatalf("% x", e.B)
	}
	d := wire.NewDecoder(e.B)
	if got := DecodeBallot(d, 5); got != (Ballot{Round: 300, Node: 5}) || d.Done() != nil {
		t.Fatalf("decode %v %v", got, d.Err())
	}
	d = wire.NewDecoder(e.B)
	if DecodeBallot(d, 4); d.Err() == nil {
		t.Fatal("node above the bound accepted")
	}
}
