package esds

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/synod-dev/synod/automaton"
)

// Request options (the ESDS thesis §4.2.2, the operation descriptor: a unique id, a
// set prev of ids of operations that must precede it, a flag strict). ESDS
// declares them to the edges (automaton.OptionDeclarer); the RESP gateway,
// the gRPC API, the Go client, the history format and the simulator carry
// them by name:
//
//   - opid (automaton.OptOpID, a string, one operation): the operation's id.
//     A request that carries none gets AssignedOpID of its RequestID,
//     "<client id as 16 hex digits>-<seq>", filled in by the edge (the
//     spec's Assign) or, when a request reaches the protocol without it, by
//     the protocol itself in the same form. Ids of that form are reserved
//     for assigned ids: a client-chosen one is refused, so a client-chosen
//     id can never collide with an assigned one. An id is 1-256 printable
//     ASCII characters without spaces.
//   - prev (automaton.OptPrev, a list of at most MaxPrevIDs ids, each valid
//     as above): the operations that must precede this one. An operation
//     naming itself is refused by the protocol.
//   - strict (automaton.OptStrict, a bool, sticky on a RESP connection):
//     answer only once the operation's place in the eventual total order is
//     fixed, with its value there.
//
// The seed leaves ids to the clients (§4.2.2: UUIDs chosen locally); the
// assigned form is this implementation's choice, and it is what the id
// summary of garbage-collected operations compresses (store.go).

// MaxOpIDLen bounds an op id; MaxPrevIDs bounds a prev set.
const (
	MaxOpIDLen = 256
	MaxPrevIDs = 1024
)

// AssignedOpID is the op id of a request that carries none:
// "<client id as 16 hex digits>-<seq>". A retry carries the same RequestID,
// hence the same id, and joins the one operation.
// One allocation (the string): fmt.Sprintf("%016x-%d") took three (its
// two arguments boxed), once per request.
func AssignedOpID(r automaton.RequestID) string {
	const hex = "0123456789abcdef"
	var b [16 + 1 + 20]byte
	for i := range 16 {
		b[i] = hex[r.Client>>(4*(15-i))&15]
	}
	b[16] = '-'
	return string(strconv.AppendUint(b[:17], r.Seq, 10))
}

var assignedRE = regexp.MustCompile(`^[0-9a-f]{16}-[0-9]+$`)

func checkID(id string) error {
	if id == "" {
		return fmt.Errorf("op id is empty")
	}
	if len(id) > MaxOpIDLen {
		return fmt.Errorf("op id too long (%d bytes, limit %d)", len(id), MaxOpIDLen)
	}
	for i := 0; i < len(id); i++ {
		if id[i] < '!' || id[i] > '~' {
			return fmt.Errorf("op id %q: only printable ASCII characters without spaces are allowed", id)
		}
	}
	return nil
}

// CheckOpID validates a client-chosen op id: 1-256 printable ASCII
// characters without spaces, not of the reserved assigned form.
func CheckOpID(id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if assignedRE.MatchString(id) {
		return fmt.Errorf("op id %q has the form of an assigned id (16 hex digits, '-', a number), which is reserved; choose another", id)
	}
	return nil
}

// CheckPrev validates a prev set: at most MaxPrevIDs ids, each 1-256
// printable ASCII characters without spaces (assigned ids are welcome: they
// name other clients' operations).
func CheckPrev(ids []string) error {
	if len(ids) > MaxPrevIDs {
		return fmt.Errorf("prev set too large (%d ids, limit %d)", len(ids), MaxPrevIDs)
	}
	for _, id := range ids {
		if err := checkID(id); err != nil {
			return fmt.Errorf("prev: %w", err)
		}
	}
	return nil
}

// RequestOptions implements automaton.OptionDeclarer.
func (p protocol) RequestOptions() []automaton.OptionSpec {
	return []automaton.OptionSpec{
		{
			Name:         automaton.OptOpID,
			Type:         automaton.OptString,
			Doc:          "the operation's unique id (default: assigned from the request id)",
			PerOperation: true,
			Validate:     func(v []string) error { return CheckOpID(v[0]) },
			Assign:       func(id automaton.RequestID) []string { return []string{AssignedOpID(id)} },
		},
		{
			Name:     automaton.OptPrev,
			Type:     automaton.OptList,
			Doc:      "ids of operations that must be ordered before this one",
			MaxItems: MaxPrevIDs,
			Validate: CheckPrev,
		},
		{
			Name:   automaton.OptStrict,
			Type:   automaton.OptBool,
			Doc:    "answer once the operation's place in the eventual total order is fixed",
			Sticky: true,
		},
	}
}

// requestDescriptor reads the operation descriptor's id, prev set and strict
// flag from a request's options.
func requestDescriptor(req automaton.Request) (id string, prev []string, strict bool) {
	id = req.Opts.String(automaton.OptOpID)
	if id == "" {
		id = AssignedOpID(req.ID)
	}
	return id, req.Opts.Get(automaton.OptPrev), req.Opts.Bool(automaton.OptStrict)
}
