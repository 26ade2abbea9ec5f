// The HTTP response payload (FORMAT.md §4): a MessagePack array [status, [[name, value]…], body, coding],
// what the front serves and what page caches in every language write for it.
package format

import (
	"fmt"
	"unicode/utf8"
)

// ContentEncodings are the codings a response body may be stored in (FORMAT.md §4).
var ContentEncodings = []string{"identity", "gzip", "br", "zstd"}

// Field is one response header line, as bytes (names SHOULD be lowercase).
type Field struct {
	Name  []byte
	Value []byte
}

// Response is an HTTP response as an entry holds it.
type Response struct {
	Status          int
	Headers         []Field
	Body            []byte
	ContentEncoding string
}

// Header returns the value of the first header line named name (case-insensitively).
func (r *Response) Header(name string) ([]byte, bool) {
	for _, f := range r.Headers {
		if asciiEqualFold(string(f.Name), name) {
			return f.Value, true
		}
	}
	return nil, false
}

func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 32
		}
		if 'A' <= y && y <= 'Z' {
			y += 32
		}
		if x != y {
			return false
		}
	}
	return true
}

func validEncoding(e string) bool {
	for _, c := range ContentEncodings {
		if c == e {
			return true
		}
	}
	return false
}

// AppendPayload writes the response's msgpack payload.
func (r *Response) AppendPayload(b []byte) ([]byte, error) {
	if r.Status < 100 || r.Status > 999 {
		return nil, fmt.Errorf("status %d is outside 100-999", r.Status)
	}
	enc := r.ContentEncoding
	if enc == "" {
		enc = "identity"
	}
	if !validEncoding(enc) {
		return nil, fmt.Errorf("content_encoding %q is not one of identity, gzip, br, zstd", enc)
	}
	b = append(b, 0x94)
	b = appendUint(b, uint64(r.Status))
	b = appendArrayHead(b, len(r.Headers))
	for _, f := range r.Headers {
		b = append(b, 0x92)
		b = appendBin(b, f.Name)
		b = appendBin(b, f.Value)
	}
	b = appendBin(b, r.Body)
	return appendStr(b, enc), nil
}

// DecodeResponse reads a response payload; anything that does not fit is bad_value.
func DecodeResponse(payload []byte) (*Response, error) {
	r := mpReader{data: payload}
	h, err := r.head()
	if err != nil {
		return nil, err
	}
	if h.kind != 'a' {
		return nil, invalid(BadValue, "response: payload is not an array")
	}
	if h.n < 4 {
		return nil, invalid(BadValue, "response: array of %d elements, at least 4 needed", h.n)
	}
	resp := &Response{}
	st, err := r.head()
	if err != nil {
		return nil, err
	}
	if st.kind != 'u' || st.n < 100 || st.n > 999 {
		return nil, invalid(BadValue, "response: status is not an integer in 100-999")
	}
	resp.Status = int(st.n)
	hh, err := r.head()
	if err != nil {
		return nil, err
	}
	if hh.kind != 'a' {
		return nil, invalid(BadValue, "response: headers are not an array")
	}
	if hh.n > uint64(len(payload)-r.pos) {
		return nil, errEnds()
	}
	resp.Headers = make([]Field, 0, hh.n)
	for range hh.n {
		ph, err := r.head()
		if err != nil {
			return nil, err
		}
		if ph.kind != 'a' || ph.n != 2 {
			return nil, invalid(BadValue, "response: a header is not a [name, value] pair")
		}
		name, err := r.bytesOrStr("header name")
		if err != nil {
			return nil, err
		}
		value, err := r.bytesOrStr("header value")
		if err != nil {
			return nil, err
		}
		resp.Headers = append(resp.Headers, Field{name, value})
	}
	bh, err := r.head()
	if err != nil {
		return nil, err
	}
	if bh.kind != 'B' {
		return nil, invalid(BadValue, "response: body is not bin")
	}
	body, err := r.take(bh.n)
	if err != nil {
		return nil, err
	}
	resp.Body = append([]byte{}, body...)
	eh, err := r.head()
	if err != nil {
		return nil, err
	}
	if eh.kind != 's' {
		return nil, invalid(BadValue, "response: content_encoding is not a str")
	}
	enc, err := r.take(eh.n)
	if err != nil {
		return nil, err
	}
	if !validEncoding(string(enc)) {
		return nil, invalid(BadValue, "response: content_encoding %q is not one of identity, gzip, br, zstd", enc)
	}
	resp.ContentEncoding = string(enc)
	for i := uint64(4); i < h.n; i++ { // reserved elements: read and ignored
		if err := r.skip(); err != nil {
			return nil, err
		}
	}
	if r.pos != len(payload) {
		return nil, invalid(BadValue, "response: %d bytes after the array", len(payload)-r.pos)
	}
	return resp, nil
}

func (r *mpReader) bytesOrStr(what string) ([]byte, error) {
	h, err := r.head()
	if err != nil {
		return nil, err
	}
	if h.kind != 'B' && h.kind != 's' {
		return nil, invalid(BadValue, "response: %s is not bin or str", what)
	}
	b, err := r.take(h.n)
	if err != nil {
		return nil, err
	}
	if h.kind == 's' && !utf8.Valid(b) {
		return nil, invalid(BadValue, "response: %s str is not UTF-8", what)
	}
	return append([]byte{}, b...), nil
}
