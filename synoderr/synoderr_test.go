package synoderr_test

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/synod-dev/synod/synoderr"
)

// want is every kind's Redis code, gRPC status code and retry rule, written
// out here independently of the package's table.
var want = map[synoderr.Kind]struct {
	code  string
	grpc  codes.Code
	retry bool
	bare  synoderr.Kind // what a status of the code with no Redis code in its message reads as
}{
	synoderr.Generic:     {"ERR", codes.Unknown, false, synoderr.Generic},
	synoderr.Invalid:     {"ERR", codes.InvalidArgument, false, synoderr.Invalid},
	synoderr.Unsupported: {"ERR", codes.FailedPrecondition, false, synoderr.Unsupported},
	synoderr.NotFound:    {"ERR", codes.NotFound, false, synoderr.NotFound},
	synoderr.TryAgain:    {"TRYAGAIN", codes.Unavailable, true, synoderr.TryAgain},
	synoderr.Moved:       {"MOVED", codes.FailedPrecondition, true, synoderr.Unsupported},
	synoderr.ClusterDown: {"CLUSTERDOWN", codes.Unavailable, true, synoderr.TryAgain},
	synoderr.WrongType:   {"WRONGTYPE", codes.FailedPrecondition, false, synoderr.Unsupported},
	synoderr.NoAuth:      {"NOAUTH", codes.Unauthenticated, false, synoderr.NoAuth},
	synoderr.NoPerm:      {"NOPERM", codes.PermissionDenied, false, synoderr.NoPerm},
	synoderr.Aborted:     {"EXECABORT", codes.Aborted, false, synoderr.Aborted},
	synoderr.Internal:    {"ERR", codes.Internal, false, synoderr.Internal},
}

// TestKindsMapBothWays: every kind has its Redis code and gRPC status code,
// an error of it reads back as itself from its gRPC form, and from its
// Redis form as itself (or as Generic when its code is ERR, which RESP
// cannot tell apart).
func TestKindsMapBothWays(t *testing.T) {
	if len(synoderr.Kinds()) != len(want) {
		t.Fatalf("%d kinds, the test knows %d: add the new kind to want", len(synoderr.Kinds()), len(want))
	}
	for _, k := range synoderr.Kinds() {
		w, ok := want[k]
		if !ok {
			t.Fatalf("kind %v missing from want", k)
		}
		e := synoderr.New(k, "some message")
		if got := k.Code(); got != w.code {
			t.Errorf("%v: Redis code %q, want %q", k, got, w.code)
		}
		if got := codes.Code(k.GRPCCode()); got != w.grpc {
			t.Errorf("%v: gRPC code %v, want %v", k, got, w.grpc)
		}
		if got := k.Retry(); got != w.retry {
			t.Errorf("%v: Retry %v, want %v", k, got, w.retry)
		}
		if got, wantText := e.Error(), w.code+" some message"; got != wantText {
			t.Errorf("%v: text %q, want %q", k, got, wantText)
		}
		back := synoderr.Parse(e.Error())
		wantBack := k
		if w.code == "ERR" {
			wantBack = synoderr.Generic
		}
		if back.Kind != wantBack || back.Msg != "some message" || back.Error() != e.Error() {
			t.Errorf("%v: Parse(%q) = %v %q, want %v", k, e.Error(), back.Kind, back.Error(), wantBack)
		}
		g := synoderr.FromGRPC(k.GRPCCode(), e.GRPCMessage())
		if g.Kind != k || g.Msg != "some message" {
			t.Errorf("%v: FromGRPC(%v, %q) = %v %q", k, codes.Code(k.GRPCCode()), e.GRPCMessage(), g.Kind, g.Msg)
		}
		if b := synoderr.FromGRPC(k.GRPCCode(), "bare message"); b.Kind != w.bare {
			t.Errorf("%v: a %v status without a Redis code reads as %v, want %v", k, codes.Code(k.GRPCCode()), b.Kind, w.bare)
		}
		if !errors.Is(fmt.Errorf("wrapped: %w", e), k) {
			t.Errorf("%v: errors.Is does not find the kind through a wrap", k)
		}
		for _, other := range synoderr.Kinds() {
			if other != k && errors.Is(e, other) {
				t.Errorf("%v: errors.Is matches %v too", k, other)
			}
		}
		if got, ok := synoderr.KindOf(fmt.Errorf("x: %w", e)); !ok || got != k {
			t.Errorf("%v: KindOf = %v, %v", k, got, ok)
		}
	}
	if _, ok := synoderr.KindOf(errors.New("plain")); ok {
		t.Error("KindOf finds a kind in a plain error")
	}
}

// TestParse: Redis codes that share a kind keep their word; a text without
// a code is an ERR (the gateway's rule).
func TestParse(t *testing.T) {
	for _, c := range []struct {
		in, text string
		kind     synoderr.Kind
	}{
		{"TRYAGAIN no quorum", "TRYAGAIN no quorum", synoderr.TryAgain},
		{"LOADING loading the dataset", "LOADING loading the dataset", synoderr.TryAgain},
		{"WRONGPASS invalid username-password pair", "WRONGPASS invalid username-password pair", synoderr.NoAuth},
		{"NOSCRIPT No matching script.", "NOSCRIPT No matching script.", synoderr.NotFound},
		{"MOVED 3999 127.0.0.1:6381", "MOVED 3999 127.0.0.1:6381", synoderr.Moved},
		{"BUSY script exceeded its budget", "BUSY script exceeded its budget", synoderr.Generic},
		{"unknown kv operation \"x\"", "ERR unknown kv operation \"x\"", synoderr.Generic},
		{"TRYAGAIN", "ERR TRYAGAIN", synoderr.Generic},     // no message: not a code (as before)
		{"Tryagain x", "ERR Tryagain x", synoderr.Generic}, // lower case: not a code
		{"A b", "ERR A b", synoderr.Generic},               // one letter: not a code
		{"", "ERR ", synoderr.Generic},
	} {
		e := synoderr.Parse(c.in)
		if e.Kind != c.kind || e.Error() != c.text || synoderr.Text(c.in) != c.text {
			t.Errorf("Parse(%q) = %v %q (Text %q), want %v %q", c.in, e.Kind, e.Error(), synoderr.Text(c.in), c.kind, c.text)
		}
	}
}

// TestFromGRPC: a status's code word wins over its status code; ERR and
// no word take the status code's kind.
func TestFromGRPC(t *testing.T) {
	for _, c := range []struct {
		code codes.Code
		msg  string
		kind synoderr.Kind
		text string
	}{
		{codes.PermissionDenied, "NOPERM User u has no permissions", synoderr.NoPerm, "NOPERM User u has no permissions"},
		{codes.Unauthenticated, "WRONGPASS invalid username-password pair", synoderr.NoAuth, "WRONGPASS invalid username-password pair"},
		{codes.NotFound, "unknown namespace \"x\"", synoderr.NotFound, "ERR unknown namespace \"x\""},
		{codes.Unavailable, "node is shutting down", synoderr.TryAgain, "TRYAGAIN node is shutting down"},
		{codes.DeadlineExceeded, "request timed out", synoderr.TryAgain, "TRYAGAIN request timed out"},
		{codes.InvalidArgument, "ERR bad", synoderr.Invalid, "ERR bad"},
		{codes.Unavailable, "ERR odd", synoderr.TryAgain, "ERR odd"}, // the word stays, the kind follows the status
		{codes.FailedPrecondition, "WRONGTYPE Operation against a key", synoderr.WrongType, "WRONGTYPE Operation against a key"},
		{codes.Unimplemented, "no such method", synoderr.Unsupported, "ERR no such method"},
	} {
		e := synoderr.FromGRPC(uint32(c.code), c.msg)
		if e.Kind != c.kind || e.Error() != c.text {
			t.Errorf("FromGRPC(%v, %q) = %v %q, want %v %q", c.code, c.msg, e.Kind, e.Error(), c.kind, c.text)
		}
	}
	if synoderr.FromGRPC(uint32(codes.OK), "") != nil {
		t.Error("FromGRPC(OK) is not nil")
	}
}
