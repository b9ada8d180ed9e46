package check

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/service"
)

// input is the porcupine Input of one operation.
type input struct {
	part    int    // index of the partition (object) the operation belongs to
	service string // "kv" or "counter"
	kind    string
	key     string
	args    []string
}

// output is the porcupine Output of one operation.
type output struct {
	// unknown: the operation may or may not have taken effect and its reply is
	// not known; any output is accepted.
	unknown bool
	res     history.Result
}

// kvState is the state of one KV key.
type kvState struct {
	present bool
	value   string
}

// counterState is the state of one Counter namespace.
type counterState int64

// Result constructors in history form.
var (
	resNil = history.Result{Type: "nil"}
	resOK  = history.Result{Type: "ok"}
)

func resBytes(s string) history.Result { return history.Result{Type: "bytes", Bytes: s} }
func resInt(i int64) history.Result    { return history.Result{Type: "int", Int: i} }
func resErr(e string) history.Result   { return history.Result{Type: "err", Err: e} }

// applyKV is the sequential specification of one KV key: it mirrors
// service.KVState.Apply (which the tests cross-check) on a single key.
func applyKV(s kvState, in input) (history.Result, kvState) {
	switch in.kind {
	case "get":
		if !s.present {
			return resNil, s
		}
		return resBytes(s.value), s
	case "exists":
		if s.present {
			return resInt(1), s
		}
		return resInt(0), s
	case "set":
		if len(in.args) == 2 && (in.args[1] == "nx") == s.present {
			return resNil, s
		}
		return resOK, kvState{true, in.args[0]}
	case "del":
		if !s.present {
			return resInt(0), s
		}
		return resInt(1), kvState{}
	case "cas":
		if !s.present || s.value != in.args[0] {
			return resInt(0), s
		}
		return resInt(1), kvState{true, in.args[1]}
	case "append":
		nv := s.value + in.args[0]
		if len(nv) > service.MaxValueSize {
			return resErr("string exceeds maximum allowed size"), s
		}
		return resInt(int64(len(nv))), kvState{true, nv}
	case "incr":
		var cur int64
		if s.present {
			c, err := strconv.ParseInt(s.value, 10, 64)
			if err != nil {
				return resErr("value is not an integer or out of range"), s
			}
			cur = c
		}
		d, _ := strconv.ParseInt(in.args[0], 10, 64) // validated when the history was read
		n := cur + d
		if (d > 0 && n < cur) || (d < 0 && n > cur) {
			return resErr("increment or decrement would overflow"), s
		}
		return resInt(n), kvState{true, strconv.FormatInt(n, 10)}
	}
	// Unreachable: operations are validated before they reach the model.
	panic("check: kv model: unknown operation " + in.kind)
}

// applyCounter is the sequential specification of a Counter (service.CounterState).
func applyCounter(s counterState, in input) (history.Result, counterState) {
	if in.kind == "add" {
		d, _ := strconv.ParseInt(in.args[0], 10, 64) // validated
		s += counterState(d)
	}
	return resInt(int64(s)), s
}

// newSpec returns the porcupine model for all partitions. Init returns nil,
// meaning "the object's initial state", which Step resolves per service; this
// lets one model serve KV keys and Counter namespaces side by side.
func newSpec(opt Options) porcupine.Model {
	return porcupine.Model{
		Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
			var parts [][]porcupine.Operation
			index := map[int]int{}
			for _, op := range ops {
				p := op.Input.(input).part
				i, ok := index[p]
				if !ok {
					i = len(parts)
					index[p] = i
					parts = append(parts, nil)
				}
				parts[i] = append(parts[i], op)
			}
			return parts
		},
		Init: func() interface{} { return nil },
		Step: func(state, in, out interface{}) (bool, interface{}) {
			i, o := in.(input), out.(output)
			var want history.Result
			var next interface{}
			switch i.service {
			case "counter":
				s, _ := state.(counterState)
				want, next = applyCounter(s, i)
			default:
				s, _ := state.(kvState)
				want, next = applyKV(s, i)
			}
			if o.unknown {
				return true, next
			}
			if i.kind == "del" && opt.IgnoreDelCount {
				return true, next
			}
			return want.Equal(o.res), next
		},
		Equal: func(a, b interface{}) bool { return normalize(a) == normalize(b) },
		Hash: func(state interface{}) uint64 {
			switch s := normalize(state).(type) {
			case kvState:
				if !s.present {
					return 0
				}
				h := fnv.New64a()
				h.Write([]byte(s.value))
				return h.Sum64() | 1
			case counterState:
				return uint64(s)
			}
			return 0
		},
		DescribeOperation: func(in, out interface{}) string {
			return describeOp(in.(input), out.(output), opt)
		},
		DescribeState: func(state interface{}) string {
			switch s := state.(type) {
			case kvState:
				if !s.present {
					return "(absent)"
				}
				return quote(s.value)
			case counterState:
				return strconv.FormatInt(int64(s), 10)
			}
			return "(initial)"
		},
		DescribeOperationMetadata: func(m interface{}) string {
			s, _ := m.(string)
			return s
		},
	}
}

// normalize maps the nil initial state to the zero state of a KV key, so that
// it compares equal to a key that was set and deleted. For a Counter the nil
// initial state then differs from counterState(0); that only costs porcupine a
// cache hit (Equal prunes the search, it does not decide it), and hashes stay
// consistent with Equal.
func normalize(s interface{}) interface{} {
	if s == nil {
		return kvState{}
	}
	return s
}

// describeOp renders an operation Redis-style for the visualization and reports.
func describeOp(in input, out output, opt Options) string {
	var b strings.Builder
	b.WriteString(strings.ToUpper(in.kind))
	if in.service != "counter" {
		b.WriteString(" " + quote(in.key))
	}
	for j, a := range in.args {
		if in.kind == "set" && j == 1 {
			b.WriteString(" " + strings.ToUpper(a))
		} else {
			b.WriteString(" " + quote(a))
		}
	}
	b.WriteString(" -> ")
	switch {
	case out.unknown:
		b.WriteString("? (maybe applied)")
	default:
		b.WriteString(describeResult(out.res))
		if in.kind == "del" && opt.IgnoreDelCount {
			b.WriteString(" (unchecked)")
		}
	}
	return b.String()
}

func describeResult(r history.Result) string {
	switch r.Type {
	case "nil":
		return "(nil)"
	case "ok":
		return "OK"
	case "bytes":
		return quote(r.Bytes)
	case "int":
		return strconv.FormatInt(r.Int, 10)
	case "err":
		return "(error) " + r.Err
	}
	return fmt.Sprintf("(result type %q)", r.Type)
}

// quote quotes a key or value, shortening long ones.
func quote(s string) string {
	const max = 40
	if len(s) > max {
		return fmt.Sprintf("%q…(%d bytes)", s[:max], len(s))
	}
	return strconv.Quote(s)
}
