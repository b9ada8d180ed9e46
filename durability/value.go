package durability

import (
	"fmt"
	"math"
	"strconv"

	"github.com/synod-dev/synod/wire"
)

// Value is one argument of an update method, or one column of a recovery
// row: int64, float64, string, []byte or bool. The generator converts a
// method's typed parameters (int, int32, uint16, ...) to these kinds and
// back (As* below), so that the update buffer, the SQL statements and the
// wire carry one small set of types.
type Value = any

// Kind names a parameter kind the generator supports.
type Kind string

// The parameter kinds.
const (
	KindInt    Kind = "int"
	KindFloat  Kind = "float"
	KindString Kind = "string"
	KindBytes  Kind = "bytes"
	KindBool   Kind = "bool"
)

// AsInt64 converts a recorded or scanned value to int64 (drivers scan SQL
// integers as int64, some as []byte or string).
func AsInt64(v Value) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case float64:
		if x != math.Trunc(x) {
			return 0, fmt.Errorf("%v is not an integer", x)
		}
		return int64(x), nil
	case []byte:
		return strconv.ParseInt(string(x), 10, 64)
	case string:
		return strconv.ParseInt(x, 10, 64)
	case bool:
		if x {
			return 1, nil
		}
		return 0, nil
	}
	return 0, fmt.Errorf("%T is not an integer", v)
}

// AsFloat64 converts a value to float64.
func AsFloat64(v Value) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case int64:
		return float64(x), nil
	case []byte:
		return strconv.ParseFloat(string(x), 64)
	case string:
		return strconv.ParseFloat(x, 64)
	}
	return 0, fmt.Errorf("%T is not a number", v)
}

// AsString converts a value to a string.
func AsString(v Value) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case []byte:
		return string(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	}
	return "", fmt.Errorf("%T is not a string", v)
}

// AsBytes converts a value to a byte slice (a copy).
func AsBytes(v Value) ([]byte, error) {
	switch x := v.(type) {
	case []byte:
		return append([]byte(nil), x...), nil
	case string:
		return []byte(x), nil
	}
	return nil, fmt.Errorf("%T is not bytes", v)
}

// AsBool converts a value to a bool (SQLite has no boolean: 0 and 1).
func AsBool(v Value) (bool, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case int64:
		return x != 0, nil
	case []byte:
		return strconv.ParseBool(string(x))
	case string:
		return strconv.ParseBool(x)
	}
	return false, fmt.Errorf("%T is not a bool", v)
}

// Value tags on the wire.
const (
	tagInt byte = iota + 1
	tagFloat
	tagString
	tagBytes
	tagBool
	tagNil
)

func encodeValue(e *wire.Encoder, v Value) {
	switch x := v.(type) {
	case int64:
		e.Byte(tagInt)
		e.Varint(x)
	case float64:
		e.Byte(tagFloat)
		e.Uvarint(math.Float64bits(x))
	case string:
		e.Byte(tagString)
		e.String(x)
	case []byte:
		e.Byte(tagBytes)
		e.Bytes(x)
	case bool:
		e.Byte(tagBool)
		e.Bool(x)
	case nil:
		e.Byte(tagNil)
	default:
		panic(fmt.Sprintf("durability: value of type %T", v))
	}
}

func decodeValue(d *wire.Decoder) Value {
	switch t := d.Byte(); t {
	case tagInt:
		return d.Varint()
	case tagFloat:
		return math.Float64frombits(d.Uvarint())
	case tagString:
		return d.String()
	case tagBytes:
		return d.BytesCopy()
	case tagBool:
		return d.Bool()
	case tagNil:
		return nil
	default:
		d.Fail(fmt.Errorf("durability: unknown value tag %d", t))
		return nil
	}
}

// EncodeUpdates is the wire form of a replication proxy's update buffer
// (what commitA ships to the backups).
func EncodeUpdates(e *wire.Encoder, ups []Update) {
	e.Uvarint(uint64(len(ups)))
	for _, u := range ups {
		e.String(u.Object)
		e.String(u.Method)
		e.Bytes(u.State)
		e.Uvarint(uint64(len(u.Args)))
		for _, a := range u.Args {
			encodeValue(e, a)
		}
	}
}

// DecodeUpdates reads what EncodeUpdates wrote.
func DecodeUpdates(d *wire.Decoder) []Update {
	n := d.Count(1<<20, 3)
	var ups []Update
	for i := 0; i < n && d.Err() == nil; i++ {
		u := Update{Object: d.String(), Method: d.String(), State: d.BytesCopy()}
		if len(u.State) == 0 {
			u.State = nil
		}
		k := d.Count(1<<16, 1)
		for j := 0; j < k && d.Err() == nil; j++ {
			u.Args = append(u.Args, decodeValue(d))
		}
		ups = append(ups, u)
	}
	return ups
}
