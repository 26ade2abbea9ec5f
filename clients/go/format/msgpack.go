// MessagePack in larder's canonical form (FORMAT.md §2): smallest integers, float64, str for text, bin for
// bytes, maps in their given order. Written here rather than through a general library because byte identity
// with the other languages, ordered maps and a decoder bounded against hostile bytes (depth, claimed lengths,
// trailing bytes) are the format's own rules; vmihailenco/msgpack serves only Go structs (EncodeValue's
// fallback and Typed[T]).
package format

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"slices"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"
)

// AppendMsgpack appends value in canonical MessagePack. It takes nil, bool, every int, uint and float type,
// string, []byte, []any, []string, *Map, Map, map[string]any (keys sorted: Go maps have no order), Ext, and
// other Go values through vmihailenco/msgpack (compact ints, sorted map keys).
func AppendMsgpack(dst []byte, value any) ([]byte, error) {
	return appendMsgpack(dst, value, 0)
}

func appendMsgpack(b []byte, value any, level int) ([]byte, error) {
	switch v := value.(type) {
	case nil:
		return append(b, 0xc0), nil
	case bool:
		if v {
			return append(b, 0xc3), nil
		}
		return append(b, 0xc2), nil
	case int:
		return appendInt(b, int64(v)), nil
	case int8:
		return appendInt(b, int64(v)), nil
	case int16:
		return appendInt(b, int64(v)), nil
	case int32:
		return appendInt(b, int64(v)), nil
	case int64:
		return appendInt(b, v), nil
	case uint:
		return appendUint(b, uint64(v)), nil
	case uint8:
		return appendUint(b, uint64(v)), nil
	case uint16:
		return appendUint(b, uint64(v)), nil
	case uint32:
		return appendUint(b, uint64(v)), nil
	case uint64:
		return appendUint(b, v), nil
	case float32:
		return appendFloat(b, float64(v)), nil
	case float64:
		return appendFloat(b, v), nil
	case string:
		return appendStr(b, v), nil
	case []byte:
		return appendBin(b, v), nil
	case BigInt:
		return b, fmt.Errorf("integer %s is outside the MessagePack range [-2^63, 2^64-1]", string(v))
	case Ext:
		return appendExt(b, v), nil
	case *Ext:
		return appendExt(b, *v), nil
	case []any:
		if level >= MaxNesting {
			return b, errTooDeep
		}
		b = appendArrayHead(b, len(v))
		var err error
		for _, item := range v {
			if b, err = appendMsgpack(b, item, level+1); err != nil {
				return b, err
			}
		}
		return b, nil
	case []string:
		if level >= MaxNesting {
			return b, errTooDeep
		}
		b = appendArrayHead(b, len(v))
		for _, s := range v {
			b = appendStr(b, s)
		}
		return b, nil
	case *Map:
		if v == nil {
			return append(b, 0xc0), nil
		}
		return appendMap(b, v.Pairs, level)
	case Map:
		return appendMap(b, v.Pairs, level)
	case map[string]any:
		if level >= MaxNesting {
			return b, errTooDeep
		}
		// The keys sorted in a buffer on the stack for a map of up to 16 (a row's columns), not one per map.
		var small [16]string
		keys := small[:0]
		if len(v) > len(small) {
			keys = make([]string, 0, len(v))
		}
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = appendMapHead(b, len(v))
		var err error
		for _, k := range keys {
			b = appendStr(b, k)
			if b, err = appendMsgpack(b, v[k], level+1); err != nil {
				return b, err
			}
		}
		return b, nil
	}
	return appendReflected(b, value)
}

var errTooDeep = fmt.Errorf("value nested more than %d levels deep", MaxNesting)

func appendMap(b []byte, pairs []Pair, level int) ([]byte, error) {
	if level >= MaxNesting {
		return b, errTooDeep
	}
	b = appendMapHead(b, len(pairs))
	var err error
	for _, p := range pairs {
		if b, err = appendMsgpack(b, p.Key, level+1); err != nil {
			return b, err
		}
		if b, err = appendMsgpack(b, p.Value, level+1); err != nil {
			return b, err
		}
	}
	return b, nil
}

// appendReflected encodes a Go value the switch does not know (a struct, a typed slice or map) with
// vmihailenco/msgpack in the compact form; its floats are widened as FORMAT.md §2 asks only for float64 fields.
func appendReflected(b []byte, value any) ([]byte, error) {
	rv := reflect.ValueOf(value)
	switch rv.Kind() {
	case reflect.Pointer:
		if rv.IsNil() {
			return append(b, 0xc0), nil
		}
	case reflect.Func, reflect.Chan, reflect.UnsafePointer, reflect.Complex64, reflect.Complex128:
		return b, fmt.Errorf("msgpack cannot hold a %T", value)
	}
	return appendTyped(b, value)
}

// MarshalTyped encodes a Go value (a struct, say) with vmihailenco/msgpack in larder's compact form.
func MarshalTyped(value any) ([]byte, error) {
	return appendTyped(nil, value)
}

// appendTyped appends value as vmihailenco/msgpack writes it in larder's compact form, straight onto b.
func appendTyped(b []byte, value any) ([]byte, error) {
	buf := byteWriter(b)
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(&buf)
	enc.UseCompactInts(true)
	enc.UseCompactFloats(false)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(value); err != nil {
		return b, err
	}
	return buf, nil
}

// UnmarshalTyped decodes one MessagePack object into out (a pointer), refusing trailing bytes.
func UnmarshalTyped(data []byte, out any) error {
	if err := checkMsgpack(data); err != nil {
		return err
	}
	return msgpack.Unmarshal(data, out)
}

// byteWriter is the buffer vmihailenco/msgpack writes into. It is an io.ByteWriter too: without WriteByte the
// encoder wraps it in an adapter that allocated a one-byte slice per marker (issue 34: 6,800 allocations, most of a
// 64 KiB query result's encoding time, for 830 structs).
type byteWriter []byte

func (w *byteWriter) Write(p []byte) (int, error) { *w = append(*w, p...); return len(p), nil }

func (w *byteWriter) WriteByte(c byte) error { *w = append(*w, c); return nil }

func (w *byteWriter) WriteString(s string) (int, error) { *w = append(*w, s...); return len(s), nil }

func appendInt(b []byte, v int64) []byte {
	if v >= 0 {
		return appendUint(b, uint64(v))
	}
	switch {
	case v >= -32:
		return append(b, byte(v))
	case v >= math.MinInt8:
		return append(b, 0xd0, byte(v))
	case v >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(v))
	case v >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(v))
}

func appendUint(b []byte, v uint64) []byte {
	switch {
	case v <= 0x7f:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xcf), v)
}

func appendFloat(b []byte, v float64) []byte {
	return binary.BigEndian.AppendUint64(append(b, 0xcb), math.Float64bits(v))
}

func appendStr(b []byte, s string) []byte {
	n := len(s)
	switch {
	case n <= 31:
		b = append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

func appendBin(b []byte, s []byte) []byte {
	n := len(s)
	switch {
	case n <= math.MaxUint8:
		b = append(b, 0xc4, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, 0xc5), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xc6), uint32(n))
	}
	return append(b, s...)
}

func appendExt(b []byte, e Ext) []byte {
	n := len(e.Data)
	switch n {
	case 1:
		b = append(b, 0xd4)
	case 2:
		b = append(b, 0xd5)
	case 4:
		b = append(b, 0xd6)
	case 8:
		b = append(b, 0xd7)
	case 16:
		b = append(b, 0xd8)
	default:
		switch {
		case n <= math.MaxUint8:
			b = append(b, 0xc7, byte(n))
		case n <= math.MaxUint16:
			b = binary.BigEndian.AppendUint16(append(b, 0xc8), uint16(n))
		default:
			b = binary.BigEndian.AppendUint32(append(b, 0xc9), uint32(n))
		}
	}
	b = append(b, byte(e.Type))
	return append(b, e.Data...)
}

func appendArrayHead(b []byte, n int) []byte {
	switch {
	case n <= 15:
		return append(b, 0x90|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xdc), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xdd), uint32(n))
}

func appendMapHead(b []byte, n int) []byte {
	switch {
	case n <= 15:
		return append(b, 0x80|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xde), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xdf), uint32(n))
}

// DecodeMsgpack decodes exactly one MessagePack object (trailing bytes are an error) into the value model:
// nil, bool, int64 (uint64 above MaxInt64), float64 (float32 widened), string, []byte, []any, *Map, Ext.
// Every failure is an *InvalidEntry of kind bad_value.
func DecodeMsgpack(data []byte) (any, error) {
	r := mpReader{data: data}
	v, err := r.value(0)
	if err != nil {
		return nil, err
	}
	if r.pos != len(data) {
		return nil, invalid(BadValue, "msgpack: %d bytes after the value", len(data)-r.pos)
	}
	return v, nil
}

// checkMsgpack checks that data is exactly one well-formed MessagePack object, without building it.
func checkMsgpack(data []byte) error {
	r := mpReader{data: data}
	if err := r.skip(); err != nil {
		return err
	}
	if r.pos != len(data) {
		return invalid(BadValue, "msgpack: %d bytes after the value", len(data)-r.pos)
	}
	return nil
}

// mpReader reads MessagePack from a byte slice; it never allocates more than the bytes it has justify.
type mpReader struct {
	data    []byte
	pos     int
	lenient bool // a str that is not UTF-8 comes back as []byte (for display) instead of an error
}

func errEnds() error { return invalid(BadValue, "msgpack: payload ends early") }

func (r *mpReader) byte() (byte, error) {
	if r.pos >= len(r.data) {
		return 0, errEnds()
	}
	c := r.data[r.pos]
	r.pos++
	return c, nil
}

func (r *mpReader) take(n uint64) ([]byte, error) {
	if n > uint64(len(r.data)-r.pos) {
		return nil, errEnds()
	}
	out := r.data[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return out, nil
}

func (r *mpReader) uintN(size int) (uint64, error) {
	b, err := r.take(uint64(size))
	if err != nil {
		return 0, err
	}
	switch size {
	case 1:
		return uint64(b[0]), nil
	case 2:
		return uint64(binary.BigEndian.Uint16(b)), nil
	case 4:
		return uint64(binary.BigEndian.Uint32(b)), nil
	}
	return binary.BigEndian.Uint64(b), nil
}

// head reads a marker and classifies it: for containers the element count (pairs for maps), for
// str/bin/ext the data length. kind is one of 'n','b','i','u','f','F','s','B','a','m','e'.
type mpHead struct {
	kind   byte
	n      uint64 // count or length; for ints the value bits
	extTyp int8
}

func (r *mpReader) head() (mpHead, error) {
	c, err := r.byte()
	if err != nil {
		return mpHead{}, err
	}
	switch {
	case c <= 0x7f:
		return mpHead{kind: 'u', n: uint64(c)}, nil
	case c >= 0xe0:
		return mpHead{kind: 'i', n: uint64(int64(int8(c)))}, nil
	case c >= 0x80 && c <= 0x8f:
		return mpHead{kind: 'm', n: uint64(c & 0x0f)}, nil
	case c >= 0x90 && c <= 0x9f:
		return mpHead{kind: 'a', n: uint64(c & 0x0f)}, nil
	case c >= 0xa0 && c <= 0xbf:
		return mpHead{kind: 's', n: uint64(c & 0x1f)}, nil
	}
	var n uint64
	switch c {
	case 0xc0:
		return mpHead{kind: 'n'}, nil
	case 0xc2:
		return mpHead{kind: 'b', n: 0}, nil
	case 0xc3:
		return mpHead{kind: 'b', n: 1}, nil
	case 0xc4, 0xc5, 0xc6:
		n, err = r.uintN(1 << (c - 0xc4))
		return mpHead{kind: 'B', n: n}, err
	case 0xc7, 0xc8, 0xc9:
		if n, err = r.uintN(1 << (c - 0xc7)); err != nil {
			return mpHead{}, err
		}
		t, err := r.byte()
		return mpHead{kind: 'e', n: n, extTyp: int8(t)}, err
	case 0xca:
		n, err = r.uintN(4)
		return mpHead{kind: 'F', n: n}, err
	case 0xcb:
		n, err = r.uintN(8)
		return mpHead{kind: 'f', n: n}, err
	case 0xcc, 0xcd, 0xce, 0xcf:
		n, err = r.uintN(1 << (c - 0xcc))
		return mpHead{kind: 'u', n: n}, err
	case 0xd0:
		n, err = r.uintN(1)
		return mpHead{kind: 'i', n: uint64(int64(int8(n)))}, err
	case 0xd1:
		n, err = r.uintN(2)
		return mpHead{kind: 'i', n: uint64(int64(int16(n)))}, err
	case 0xd2:
		n, err = r.uintN(4)
		return mpHead{kind: 'i', n: uint64(int64(int32(n)))}, err
	case 0xd3:
		n, err = r.uintN(8)
		return mpHead{kind: 'i', n: n}, err
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
		t, err := r.byte()
		return mpHead{kind: 'e', n: 1 << (c - 0xd4), extTyp: int8(t)}, err
	case 0xd9, 0xda, 0xdb:
		n, err = r.uintN(1 << (c - 0xd9))
		return mpHead{kind: 's', n: n}, err
	case 0xdc, 0xdd:
		n, err = r.uintN(2 << (c - 0xdc))
		return mpHead{kind: 'a', n: n}, err
	case 0xde, 0xdf:
		n, err = r.uintN(2 << (c - 0xde))
		return mpHead{kind: 'm', n: n}, err
	}
	return mpHead{}, invalid(BadValue, "msgpack: reserved marker 0x%02x", c)
}

// value reads one object at nesting level `level`.
func (r *mpReader) value(level int) (any, error) {
	h, err := r.head()
	if err != nil {
		return nil, err
	}
	switch h.kind {
	case 'n':
		return nil, nil
	case 'b':
		return h.n == 1, nil
	case 'u':
		if h.n > math.MaxInt64 {
			return h.n, nil
		}
		return int64(h.n), nil
	case 'i':
		return int64(h.n), nil
	case 'F':
		return float64(math.Float32frombits(uint32(h.n))), nil
	case 'f':
		return math.Float64frombits(h.n), nil
	case 's':
		b, err := r.take(h.n)
		if err != nil {
			return nil, err
		}
		if !utf8.Valid(b) {
			if r.lenient {
				return append([]byte{}, b...), nil
			}
			return nil, invalid(BadValue, "msgpack: str is not UTF-8")
		}
		return string(b), nil
	case 'B':
		b, err := r.take(h.n)
		if err != nil {
			return nil, err
		}
		return append([]byte{}, b...), nil
	case 'e':
		b, err := r.take(h.n)
		if err != nil {
			return nil, err
		}
		return Ext{Type: h.extTyp, Data: append([]byte{}, b...)}, nil
	case 'a':
		if level >= MaxNesting {
			return nil, invalid(BadValue, "msgpack: value nested more than %d levels deep", MaxNesting)
		}
		if h.n > uint64(len(r.data)-r.pos) {
			return nil, errEnds()
		}
		out := make([]any, h.n)
		for i := range out {
			if out[i], err = r.value(level + 1); err != nil {
				return nil, err
			}
		}
		return out, nil
	case 'm':
		if level >= MaxNesting {
			return nil, invalid(BadValue, "msgpack: value nested more than %d levels deep", MaxNesting)
		}
		if h.n > uint64(len(r.data)-r.pos)/2 {
			return nil, errEnds()
		}
		m := &Map{Pairs: make([]Pair, h.n)}
		for i := range m.Pairs {
			if m.Pairs[i].Key, err = r.value(level + 1); err != nil {
				return nil, err
			}
			if m.Pairs[i].Value, err = r.value(level + 1); err != nil {
				return nil, err
			}
		}
		return m, nil
	}
	return nil, invalid(BadValue, "msgpack: unreadable object")
}

// skip steps over one whole object without building it (iteratively: depth does not matter here).
func (r *mpReader) skip() error {
	pending := uint64(1)
	for pending > 0 {
		if pending > uint64(len(r.data)-r.pos) {
			return errEnds()
		}
		pending--
		h, err := r.head()
		if err != nil {
			return err
		}
		switch h.kind {
		case 's', 'B', 'e':
			if _, err := r.take(h.n); err != nil {
				return err
			}
		case 'a':
			pending += h.n
		case 'm':
			pending += 2 * h.n
		}
	}
	return nil
}
