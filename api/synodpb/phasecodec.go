package synodpb

import (
	"unicode/utf8"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
)

// Hand decoders of the Phases stream's messages (client-driven ABD, issue
// 28 item 6). proto.Unmarshal decodes a PhaseRequest or PhaseResponse by
// reflection, one allocation per phase or reply and one per field; these
// read the fields by hand into one array of phases (or replies) per
// message. They give up (false, m unspecified) on anything but the
// fields they know in their expected wire types, valid UTF-8 strings and
// well-formed varints and lengths; UnmarshalMessage then decodes with
// proto.Unmarshal, so what is accepted and how it reads are proto's.
// Bytes fields are copied, as proto.Unmarshal copies them: a replica keeps
// a store's value, which must not hold the received message. A phase's (or
// a reply's) string and bytes fields are copied into one buffer of its
// own (fieldBuf), one allocation per phase instead of one per field: a
// field kept keeps only its own phase's other fields, never the message.

// DecodePhaseRequest decodes b into m (a zero PhaseRequest) by hand.
func DecodePhaseRequest(b []byte, m *PhaseRequest) bool {
	n := 0
	for rest := b; len(rest) > 0; {
		num, typ, k := protowire.ConsumeTag(rest)
		if k < 0 {
			return false
		}
		rest = rest[k:]
		k = protowire.ConsumeFieldValue(num, typ, rest)
		if k < 0 {
			return false
		}
		if num == 2 {
			n++
		}
		rest = rest[k:]
	}
	var phases []Phase
	if n > 0 {
		phases = make([]Phase, n)
		m.Phases = make([]*Phase, 0, n)
	}
	for len(b) > 0 {
		num, typ, k := protowire.ConsumeTag(b)
		b = b[k:]
		if typ != protowire.BytesType || (num != 1 && num != 2) {
			return false
		}
		v, k := protowire.ConsumeBytes(b)
		b = b[k:]
		if num == 1 {
			if !utf8.Valid(v) {
				return false
			}
			m.Namespace = string(v)
			continue
		}
		p := &phases[len(m.Phases)]
		if !decodePhase(v, p) {
			return false
		}
		m.Phases = append(m.Phases, p)
	}
	return true
}

func decodePhase(b []byte, p *Phase) bool {
	fb := fieldBuf{size: len(b)}
	for len(b) > 0 {
		num, typ, k := protowire.ConsumeTag(b)
		if k < 0 {
			return false
		}
		b = b[k:]
		switch {
		case typ == protowire.VarintType && (num == 1 || num == 5):
			v, k := protowire.ConsumeVarint(b)
			if k < 0 {
				return false
			}
			b = b[k:]
			if num == 1 {
				p.Id = v
			} else {
				p.Tomb = v != 0
			}
		case typ == protowire.BytesType && num >= 2 && num <= 4:
			v, k := protowire.ConsumeBytes(b)
			if k < 0 {
				return false
			}
			b = b[k:]
			switch num {
			case 2, 3:
				if !utf8.Valid(v) {
					return false
				}
				if num == 2 {
					p.Key = fb.str(v)
				} else {
					p.Tag = fb.str(v)
				}
			case 4:
				p.Value = fb.bytes(v)
			}
		default:
			return false
		}
	}
	return true
}

// fieldBuf copies one encoded phase's (or reply's) fields into one buffer
// of the encoding's size, made on the first non-empty field: the fields'
// contents together are never longer than their encoding, so the buffer
// is never outgrown and no field moves. Each field is handed out once and
// never written again (a bytes field is capped at its length: an append
// to it copies), so the strings over it are immutable.
type fieldBuf struct {
	size int
	buf  []byte
}

// bytes returns a copy of v (a non-nil empty slice when v is empty, as
// proto.Unmarshal leaves it).
func (f *fieldBuf) bytes(v []byte) []byte {
	if len(v) == 0 {
		return emptyBytes()
	}
	if f.buf == nil {
		f.buf = make([]byte, 0, max(f.size, len(v)))
	}
	off := len(f.buf)
	f.buf = append(f.buf, v...)
	return f.buf[off:len(f.buf):len(f.buf)]
}

// str returns v as a string, copied.
func (f *fieldBuf) str(v []byte) string {
	if len(v) == 0 {
		return ""
	}
	c := f.bytes(v)
	return unsafe.String(unsafe.SliceData(c), len(c))
}

// emptyBytes is what proto.Unmarshal leaves in a bytes field it read empty:
// a non-nil empty slice.
func emptyBytes() []byte { return []byte{} }

// DecodePhaseResponse decodes b into m (a zero PhaseResponse) by hand.
func DecodePhaseResponse(b []byte, m *PhaseResponse) bool {
	n := 0
	for rest := b; len(rest) > 0; {
		num, typ, k := protowire.ConsumeTag(rest)
		if k < 0 || num != 1 || typ != protowire.BytesType {
			return false
		}
		rest = rest[k:]
		k = protowire.ConsumeFieldValue(num, typ, rest)
		if k < 0 {
			return false
		}
		n++
		rest = rest[k:]
	}
	if n == 0 {
		return true
	}
	replies := make([]PhaseReply, n)
	m.Replies = make([]*PhaseReply, n)
	for i := range n {
		_, _, k := protowire.ConsumeTag(b)
		b = b[k:]
		v, k := protowire.ConsumeBytes(b)
		b = b[k:]
		if !decodePhaseReply(v, &replies[i]) {
			return false
		}
		m.Replies[i] = &replies[i]
	}
	return true
}

func decodePhaseReply(b []byte, r *PhaseReply) bool {
	fb := fieldBuf{size: len(b)}
	for len(b) > 0 {
		num, typ, k := protowire.ConsumeTag(b)
		if k < 0 {
			return false
		}
		b = b[k:]
		switch {
		case typ == protowire.VarintType && (num == 1 || num == 2 || num == 7):
			v, k := protowire.ConsumeVarint(b)
			if k < 0 {
				return false
			}
			b = b[k:]
			switch num {
			case 1:
				r.Id = v
			case 2:
				r.Code = uint32(v)
			case 7:
				r.Present = v != 0
			}
		case typ == protowire.BytesType && num >= 3 && num <= 6:
			v, k := protowire.ConsumeBytes(b)
			if k < 0 {
				return false
			}
			b = b[k:]
			if num == 6 {
				r.Value = fb.bytes(v)
				continue
			}
			if !utf8.Valid(v) {
				return false
			}
			switch num {
			case 3:
				r.Message = fb.str(v)
			case 4:
				r.Err = fb.str(v)
			case 5:
				r.Tag = fb.str(v)
			}
		default:
			return false
		}
	}
	return true
}
