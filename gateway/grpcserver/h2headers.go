package grpcserver

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/synod-dev/synod/internal/h2util"
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
	raw    []byte // a HEADERS frame's payload (nextFrame)
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
	return h.startRaw(f.StreamID, f.StreamEnded(), f.HeadersEnded(), f.HeaderBlockFragment())
}

// startRaw is start for a HEADERS frame the reader parsed itself
// (nextFrame).
func (h *headerBlock) startRaw(sid uint32, end, ended bool, frag []byte) bool {
	h.block = append(h.block[:0], frag...)
	h.sid, h.end = sid, end
	return ended
}

// nextFrame reads the next frame: a HEADERS frame is parsed here, its
// payload read into the block's buffer, and acted on (nil frame), so the
// Framer does not make a HeadersFrame for it (one allocation per call);
// the others are the Framer's.
func (c *h2sconn) nextFrame() (http2.Frame, error) {
	fh, err := c.fr.ReadFrameHeader() // checks the frame's size and order
	if err != nil {
		return nil, err
	}
	if fh.Type != http2.FrameHeaders {
		return c.fr.ReadFrameForHeader(fh)
	}
	h := &c.hb
	if cap(h.raw) < int(fh.Length) {
		h.raw = make([]byte, fh.Length)
	}
	p := h.raw[:fh.Length]
	if _, err := io.ReadFull(c.br, p); err != nil {
		return nil, err
	}
	frag, err := h2util.HeadersFragment(fh, p)
	if err != nil {
		return nil, err
	}
	if h.startRaw(fh.StreamID, fh.Flags.Has(http2.FlagHeadersEndStream), fh.Flags.Has(http2.FlagHeadersEndHeaders), frag) {
		c.rawBlock = true
	}
	return nil, nil
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
