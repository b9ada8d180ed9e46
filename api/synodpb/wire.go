package synodpb

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// gRPC's HTTP/2 wire format, for the Go client's and the server's own
// HTTP/2 transports (client/h2.go, gateway/grpcserver/h2server.go): the
// message prefix, grpc-timeout, grpc-message and binary metadata.

// FrameMessage marshals m behind gRPC's message prefix (uncompressed,
// length), refusing messages over MaxMessageSize.
func FrameMessage(m any) ([]byte, error) {
	var b []byte
	if pm, ok := m.(proto.Message); ok {
		b = make([]byte, 0, 5+proto.Size(pm))
	}
	return AppendFrame(b, m)
}

// AppendFrame is FrameMessage appending to b (b[:0] reuses b's array: a
// sender that writes the frame before it frames the next one).
func AppendFrame(b []byte, m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, status.Errorf(codes.Internal, "grpc: %T is not a protobuf message", m)
	}
	at := len(b)
	b = append(b, 0, 0, 0, 0, 0)
	b, err := proto.MarshalOptions{}.MarshalAppend(b, pm)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "grpc: error while marshaling: %v", err)
	}
	n := len(b) - at - 5
	if n > MaxMessageSize {
		return nil, status.Errorf(codes.ResourceExhausted, "grpc: trying to send message larger than max (%d vs. %d)", n, MaxMessageSize)
	}
	b[at] = 0
	binary.BigEndian.PutUint32(b[at+1:at+5], uint32(n))
	return b, nil
}

// UnmarshalMessage unmarshals a received message (without its prefix)
// into m.
func UnmarshalMessage(b []byte, m any) error {
	switch m := m.(type) { // hand decoders (phasecodec.go); proto's on anything else
	case *PhaseRequest:
		if DecodePhaseRequest(b, m) {
			return nil
		}
		proto.Reset(m)
	case *PhaseResponse:
		if DecodePhaseResponse(b, m) {
			return nil
		}
		proto.Reset(m)
	}
	pm, ok := m.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "grpc: %T is not a protobuf message", m)
	}
	if err := proto.Unmarshal(b, pm); err != nil {
		return status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)
	}
	return nil
}

// EncodeTimeout is gRPC's grpc-timeout value (at most 8 digits and a unit).
func EncodeTimeout(d time.Duration) string {
	if d <= 0 {
		return "1n"
	}
	for _, u := range []struct {
		d    time.Duration
		unit string
	}{{time.Nanosecond, "n"}, {time.Microsecond, "u"}, {time.Millisecond, "m"}, {time.Second, "S"}, {time.Minute, "M"}, {time.Hour, "H"}} {
		if v := (d + u.d - 1) / u.d; v < 1e8 {
			return strconv.FormatInt(int64(v), 10) + u.unit
		}
	}
	return "99999999H"
}

// DecodeTimeout parses grpc-timeout (at most 8 digits and a unit); a zero
// timeout is 1 ns (already past).
func DecodeTimeout(v string) (time.Duration, error) {
	if len(v) < 2 || len(v) > 9 {
		return 0, fmt.Errorf("malformed grpc-timeout %q", v)
	}
	n, err := strconv.ParseInt(v[:len(v)-1], 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("malformed grpc-timeout %q", v)
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, fmt.Errorf("malformed grpc-timeout %q", v)
	}
	return max(time.Duration(n)*unit, 1), nil // 8 digits of hours fit
}

// EncodeStatusMessage percent-encodes grpc-message (gRPC's HTTP/2 spec).
func EncodeStatusMessage(m string) string {
	var b strings.Builder
	for i := 0; i < len(m); i++ {
		if c := m[i]; c < 0x20 || c > 0x7e || c == '%' {
			if b.Len() == 0 {
				b.WriteString(m[:i])
			}
			fmt.Fprintf(&b, "%%%02X", c)
		} else if b.Len() > 0 {
			b.WriteByte(c)
		}
	}
	if b.Len() == 0 {
		return m
	}
	return b.String()
}

// DecodeStatusMessage undoes grpc-message's percent-encoding.
func DecodeStatusMessage(m string) string {
	if !strings.Contains(m, "%") {
		return m
	}
	var b strings.Builder
	for i := 0; i < len(m); i++ {
		if m[i] == '%' && i+2 < len(m) {
			if v, err := strconv.ParseUint(m[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(m[i])
	}
	return b.String()
}

// DecodeBinaryHeader decodes a "-bin" metadata value (base64, padded or
// not).
func DecodeBinaryHeader(v string) ([]byte, error) {
	if len(v)%4 == 0 {
		return base64.StdEncoding.DecodeString(v)
	}
	return base64.RawStdEncoding.DecodeString(v)
}
