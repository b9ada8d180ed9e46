package grpcserver

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Header blocks read by the direct transport's reader (issue 28 item 6,
// branch grpc51, session 51).
//
// x/net's Framer decodes a header block itself when its ReadMetaHeaders
// is set, but pays per block for a MetaHeadersFrame, the closure it gives
// the hpack decoder and the variables that closure captures, and a field
// list grown from nothing: about ten allocations of a unary call's. Here
// the reader assembles the block (HEADERS, then CONTINUATION: the Framer
// still checks their order) into a buffer of the connection's and
// decodes it into a field list of the connection's, with one emit
// function made per connection; a field's strings are hpack's (a field
// in the dynamic table costs nothing, a literal one its strings). The
// checks are readMetaFrame's: a field value HTTP allows, a lower-case
// token for a name, pseudo-headers first, known, once each, not of a
// request and a response at once, the header list within maxHeaderList.
// A block breaking one of them resets its stream (PROTOCOL_ERROR) where
// x/net's StreamError made the reader fail the connection; an hpack
// error, or a block far beyond the limit, ends the connection
// (COMPRESSION_ERROR, PROTOCOL_ERROR) as before.

// maxHeaderList bounds a header list's size (HTTP/2's SETTINGS_MAX_HEADER_
// LIST_SIZE measure: names, values and 32 per field), as the Framer's
// MaxHeaderListSize did.
const maxHeaderList = 16 << 20

// headerBlock is the reader's header block being assembled and decoded.
type headerBlock struct {
	dec    *hpack.Decoder
	block  []byte
	sid    uint32
	end    bool // the HEADERS frame ended the stream
	fields []hpack.HeaderField
	size   uint32
	sawReg bool  // a regular field was emitted
	bad    error // the block's first invalid field
}

func (h *headerBlock) init() {
	h.dec = hpack.NewDecoder(4096, h.emit)
	h.dec.SetMaxStringLength(maxHeaderList)
}

// start begins a block with a HEADERS frame and reports whether it is
// complete.
func (h *headerBlock) start(f *http2.HeadersFrame) bool {
	h.block = append(h.block[:0], f.HeaderBlockFragment()...)
	h.sid, h.end = f.StreamID, f.StreamEnded()
	return f.HeadersEnded()
}

// add appends a CONTINUATION frame (the Framer checked that it continues
// the block) and reports whether the block is complete.
func (h *headerBlock) add(f *http2.ContinuationFrame) bool {
	h.block = append(h.block, f.HeaderBlockFragment()...)
	return f.HeadersEnded()
}

var errHeaderListTooLarge = errors.New("header list too large")

// decode decodes the complete block: its fields (valid until the next
// block), h.bad set if one is invalid; an error is the connection's.
func (h *headerBlock) decode() ([]hpack.HeaderField, error) {
	h.fields, h.size, h.sawReg, h.bad = h.fields[:0], 0, false, nil
	block := h.block
	if cap(h.block) > 64<<10 {
		h.block = nil // a rare large block is not kept
	}
	if len(block) > 2*maxHeaderList {
		return nil, http2.ConnectionError(http2.ErrCodeProtocol)
	}
	h.dec.SetEmitEnabled(true)
	if _, err := h.dec.Write(block); err != nil {
		return nil, http2.ConnectionError(http2.ErrCodeCompression)
	}
	if err := h.dec.Close(); err != nil {
		return nil, http2.ConnectionError(http2.ErrCodeCompression)
	}
	if h.bad == nil {
		h.bad = checkPseudos(h.fields)
	}
	return h.fields, nil
}

// emit is the decoder's: one field, checked.
func (h *headerBlock) emit(hf hpack.HeaderField) {
	if h.bad != nil {
		return
	}
	switch {
	case !httpguts.ValidHeaderFieldValue(hf.Value):
		h.bad = fmt.Errorf("invalid header field value for %q", hf.Name)
	case strings.HasPrefix(hf.Name, ":"):
		if h.sawReg {
			h.bad = errors.New("pseudo header field after regular")
		}
	default:
		h.sawReg = true
		if !validFieldName(hf.Name) {
			h.bad = fmt.Errorf("invalid header field name %q", hf.Name)
		}
	}
	if h.bad == nil {
		if h.size += hf.Size(); h.size > maxHeaderList {
			h.bad = errHeaderListTooLarge
		}
	}
	if h.bad != nil {
		h.dec.SetEmitEnabled(false)
		return
	}
	h.fields = append(h.fields, hf)
}

// validFieldName: a non-empty token without upper case (HTTP/2's field
// names are lower case).
func validFieldName(v string) bool {
	if v == "" {
		return false
	}
	for _, r := range v {
		if !httpguts.IsTokenRune(r) || 'A' <= r && r <= 'Z' {
			return false
		}
	}
	return true
}

// checkPseudos checks a block's pseudo-header fields (they come first):
// known ones, each once, not of a request and a response together.
func checkPseudos(fs []hpack.HeaderField) error {
	var req, resp bool
	for i, hf := range fs {
		if !strings.HasPrefix(hf.Name, ":") {
			break
		}
		switch hf.Name {
		case ":method", ":path", ":scheme", ":authority", ":protocol":
			req = true
		case ":status":
			resp = true
		default:
			return fmt.Errorf("invalid pseudo-header %q", hf.Name)
		}
		for _, g := range fs[:i] {
			if g.Name == hf.Name {
				return fmt.Errorf("duplicate pseudo-header %q", hf.Name)
			}
		}
	}
	if req && resp {
		return errors.New("mix of request and response pseudo headers")
	}
	return nil
}
