// Package synoderr is Synod's one error value: a Kind (try again, moved,
// wrong type, refused, invalid, ...) and a message, from the code that
// decides an error to the edge that writes it in RESP or gRPC, and back in
// the Go client.
//
//	err := synoderr.New(synoderr.TryAgain, "no quorum: 1 of 3 replicas answered")
//	err.Error()                          // "TRYAGAIN no quorum: 1 of 3 replicas answered"
//	errors.Is(err, synoderr.TryAgain)    // true: a Kind is an error, matched by kind
//	synoderr.KindOf(err).Retry()         // true
//
// # The kind on the wire is the Redis error code
//
// Results cross nodes, logs and snapshots as service.Result, whose Err is
// text, and the protocols' wire goldens and the conformance digests pin
// those bytes. So the kind is not a new field: it is the text's first word,
// the Redis error code ("TRYAGAIN no quorum ...", "WRONGTYPE Operation
// against a key ..."), as a Redis client reads it. Error.Error() is that
// text; Parse reads it back. A text without an upper-case first word is an
// ERR (Redis's generic code; Parse supplies it, as Redis does for a
// script's error without one).
//
// The RESP edge writes Error() after "-" (resp.Writer.WriteError). The gRPC
// edge answers a refusal (nothing ran) with the status code of its kind
// (Kind.GRPCCode) and a message that starts with the Redis code, unless
// the error was made without one for a kind whose code is ERR
// (GRPCMessage: "NOPERM User ...", "WRONGPASS ...", "TRYAGAIN node is
// shutting down ..." keep theirs, "unknown namespace ..." reads as
// before); an operation's own error is a result, not a status, with the
// same text the RESP edge writes.
// FromGRPC reads a status back: the message's code word when it has one,
// else the status code.
//
// Several kinds share Redis's ERR (Invalid, Unsupported, NotFound,
// Internal, Generic): over RESP they all read back as Generic, as every
// Redis client sees them; over gRPC the status code keeps them apart. A
// Redis code this package does not list keeps its word (Error.Code) and
// reads as the kind of the nearest listed one (WRONGPASS is NoAuth,
// LOADING is TryAgain, NOSCRIPT is NotFound) or Generic.
//
// There is no not-leader kind. A Synod node that is not the leader
// forwards a client's request (Multi-Paxos, PB-Paxos, primary-backup) or,
// between nodes, answers TRYAGAIN (the durable primary-backup's "not the
// primary of view"); a client sees TryAgain, and learns the leader from
// leader notifications (WatchLeader, SUBSCRIBE synod:leader:<ns>), not from
// an error. A sharded cluster's wrong node answers Moved with the slot's
// node, as a Redis cluster does.
package synoderr

import (
	"errors"
	"strconv"
	"strings"
)

// Kind classifies an error by what the caller can do about it.
type Kind uint8

const (
	// Generic is an operation's own outcome (INCR of a non-integer) or an
	// error nothing more is known of. RESP "ERR", gRPC UNKNOWN.
	Generic Kind = iota
	// Invalid: the request is malformed (syntax, arity, a value out of
	// range, too large); nothing ran. RESP "ERR", gRPC INVALID_ARGUMENT.
	Invalid
	// Unsupported: the namespace's protocol or service cannot run this
	// request (a transaction shape, an operation beyond a register);
	// nothing ran. RESP "ERR", gRPC FAILED_PRECONDITION.
	Unsupported
	// NotFound: the namespace (or script, or function) does not exist;
	// nothing ran. RESP "ERR", gRPC NOT_FOUND.
	NotFound
	// TryAgain: not now (a leader change, no quorum, a timeout inside the
	// protocol, a node shutting down). A read can be retried; a write's
	// outcome is unknown unless the protocol deduplicates retries.
	// RESP "TRYAGAIN", gRPC UNAVAILABLE.
	TryAgain
	// Moved: another node serves the key's slot (a sharded cluster);
	// nothing ran. RESP "MOVED", gRPC FAILED_PRECONDITION.
	Moved
	// ClusterDown: no node serves the key's slot now; nothing ran.
	// RESP "CLUSTERDOWN", gRPC UNAVAILABLE.
	ClusterDown
	// WrongType: the key holds another type; nothing ran. RESP
	// "WRONGTYPE", gRPC FAILED_PRECONDITION.
	WrongType
	// NoAuth: authentication is required or failed. RESP "NOAUTH"
	// (and WRONGPASS), gRPC UNAUTHENTICATED.
	NoAuth
	// NoPerm: the user may not run this command or use this namespace.
	// RESP "NOPERM", gRPC PERMISSION_DENIED.
	NoPerm
	// Aborted: a transaction was discarded; nothing of it took effect.
	// RESP "EXECABORT", gRPC ABORTED.
	Aborted
	// Internal: a fault of the node (its storage failed, an invariant
	// broke). RESP "ERR", gRPC INTERNAL.
	Internal

	numKinds
)

// kinds holds each kind's name, Redis code and gRPC status code (the
// numbers of the gRPC specification's status codes, so that this package
// needs no gRPC import; synoderr_test checks them against codes.*).
var kinds = [numKinds]struct {
	name, code string
	grpc       uint32
}{
	Generic:     {"generic", "ERR", 2},               // UNKNOWN
	Invalid:     {"invalid", "ERR", 3},               // INVALID_ARGUMENT
	Unsupported: {"unsupported", "ERR", 9},           // FAILED_PRECONDITION
	NotFound:    {"not found", "ERR", 5},             // NOT_FOUND
	TryAgain:    {"try again", "TRYAGAIN", 14},       // UNAVAILABLE
	Moved:       {"moved", "MOVED", 9},               // FAILED_PRECONDITION
	ClusterDown: {"cluster down", "CLUSTERDOWN", 14}, // UNAVAILABLE
	WrongType:   {"wrong type", "WRONGTYPE", 9},      // FAILED_PRECONDITION
	NoAuth:      {"no auth", "NOAUTH", 16},           // UNAUTHENTICATED
	NoPerm:      {"no permission", "NOPERM", 7},      // PERMISSION_DENIED
	Aborted:     {"aborted", "EXECABORT", 10},        // ABORTED
	Internal:    {"internal", "ERR", 13},             // INTERNAL
}

// Kinds lists every kind.
func Kinds() []Kind {
	out := make([]Kind, numKinds)
	for i := range out {
		out[i] = Kind(i)
	}
	return out
}

// String names the kind.
func (k Kind) String() string {
	if k >= numKinds {
		return "kind(" + strconv.Itoa(int(k)) + ")"
	}
	return kinds[k].name
}

// Error makes a Kind an error, so that errors.Is(err, synoderr.TryAgain)
// asks an error's kind.
func (k Kind) Error() string { return "synod: " + k.String() }

// Code is the kind's Redis error code ("ERR", "TRYAGAIN", ...).
func (k Kind) Code() string {
	if k >= numKinds {
		return "ERR"
	}
	return kinds[k].code
}

// GRPCCode is the kind's gRPC status code (codes.Code's number).
func (k Kind) GRPCCode() uint32 {
	if k >= numKinds {
		return 2
	}
	return kinds[k].grpc
}

// Retry reports whether the request may succeed if sent again (to this
// node later, or elsewhere): TryAgain, Moved and ClusterDown. For TryAgain
// a write's outcome is unknown; the other two ran nothing.
func (k Kind) Retry() bool { return k == TryAgain || k == Moved || k == ClusterDown }

// byCode maps a Redis error code to its kind: each kind's own code, and
// the Redis codes Synod or its clients meet that share a kind.
var byCode = map[string]Kind{
	"TRYAGAIN":    TryAgain,
	"LOADING":     TryAgain,
	"MOVED":       Moved,
	"ASK":         Moved,
	"CLUSTERDOWN": ClusterDown,
	"WRONGTYPE":   WrongType,
	"NOAUTH":      NoAuth,
	"WRONGPASS":   NoAuth,
	"NOPERM":      NoPerm,
	"EXECABORT":   Aborted,
	"NOSCRIPT":    NotFound,
	"CROSSSLOT":   Invalid,
	"NOPROTO":     Invalid,
}

// byGRPC maps a gRPC status code to the kind a status without a Redis code
// word reads as. Codes no kind owns read as the nearest: DEADLINE_EXCEEDED
// is TryAgain (a timeout: outcome unknown), UNIMPLEMENTED Unsupported,
// OUT_OF_RANGE Invalid, DATA_LOSS Internal.
var byGRPC = map[uint32]Kind{
	2:  Generic,
	3:  Invalid,
	4:  TryAgain,
	5:  NotFound,
	7:  NoPerm,
	9:  Unsupported,
	10: Aborted,
	11: Invalid,
	12: Unsupported,
	13: Internal,
	14: TryAgain,
	15: Internal,
	16: NoAuth,
}

// Error is an error of a kind. Its text is its Redis form: Code, a space,
// Msg.
type Error struct {
	Kind Kind
	// code is the Redis error code the text was written with (Parse, Of,
	// WithCode: WRONGPASS for NoAuth, BUSY for Generic); "" means
	// Kind.Code().
	code string
	// Msg is the message without the code.
	Msg string
}

// New returns an error of kind k.
func New(k Kind, msg string) *Error { return &Error{Kind: k, Msg: msg} }

// WithCode returns an error of kind k written with the Redis code code
// (WRONGPASS, BUSY, NOSCRIPT: Redis's own words for a kind's case).
func WithCode(k Kind, code, msg string) *Error {
	return &Error{Kind: k, code: code, Msg: msg}
}

// Of returns text as an error of kind k: a text that starts with a Redis
// code keeps it ("NOPERM User ..." stays as it is), any other gets k's.
func Of(k Kind, text string) *Error {
	if code, rest, ok := cutCode(text); ok {
		return WithCode(k, code, rest)
	}
	return New(k, text)
}

// Code is the error's Redis error code.
func (e *Error) Code() string {
	if e.code != "" {
		return e.code
	}
	return e.Kind.Code()
}

// Error is the Redis form, "CODE message".
func (e *Error) Error() string { return e.Code() + " " + e.Msg }

// Is matches a Kind: errors.Is(err, synoderr.Moved).
func (e *Error) Is(target error) bool {
	k, ok := target.(Kind)
	return ok && k == e.Kind
}

// Parse reads an error text in its Redis form. A first word of two or more
// upper-case letters (or _) followed by a space is the code; any other
// text is an ERR, whose Error() is then "ERR " + text (the gateway's rule
// since its first version, and Redis's for a script's error).
func Parse(text string) *Error {
	code, msg, ok := cutCode(text)
	if !ok {
		return &Error{Kind: Generic, Msg: text}
	}
	k, known := byCode[code]
	if !known {
		k = Generic
	}
	return WithCode(k, code, msg)
}

// cutCode splits text into its leading Redis code and the rest.
func cutCode(text string) (code, rest string, ok bool) {
	code, rest, found := strings.Cut(text, " ")
	if !found || len(code) < 2 {
		return "", text, false
	}
	for i := 0; i < len(code); i++ {
		if c := code[i]; (c < 'A' || c > 'Z') && c != '_' {
			return "", text, false
		}
	}
	return code, rest, true
}

// Text returns text in its Redis form: unchanged when it starts with a
// code, else prefixed with "ERR ". Text(s) == Parse(s).Error().
func Text(text string) string {
	if _, _, ok := cutCode(text); ok {
		return text
	}
	return "ERR " + text
}

// FromGRPC reads a gRPC status (code and message) as an error: the
// message's Redis code decides the kind when it has one (ERR refined by
// the status code: INVALID_ARGUMENT with "ERR ..." is Invalid), else the
// status code does. Code 0 (OK) has no error: nil.
func FromGRPC(code uint32, msg string) *Error {
	if code == 0 {
		return nil
	}
	byStatus, ok := byGRPC[code]
	if !ok {
		byStatus = Generic
	}
	if c, rest, ok := cutCode(msg); ok {
		if c == "ERR" {
			return WithCode(byStatus, c, rest)
		}
		return Parse(msg)
	}
	return &Error{Kind: byStatus, Msg: msg}
}

// GRPCMessage is the message a gRPC status of e carries: Msg alone for an
// error made with New of a kind whose code is ERR (the status code tells
// the kind: "unknown namespace ..."), else Error() (the text as written:
// "NOPERM User ...", "ERR this namespace's protocol ...").
func (e *Error) GRPCMessage() string {
	if e.code == "" && e.Kind.Code() == "ERR" {
		return e.Msg
	}
	return e.Error()
}

// KindOf returns the kind of the first *Error in err's chain, and whether
// there is one.
func KindOf(err error) (Kind, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind, true
	}
	return Generic, false
}
