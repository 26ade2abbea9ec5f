// Whole entries: header + payload, encoded and decoded. Encoding serializes, then applies FORMAT.md §3's rule
// (compress only payloads of at least Threshold bytes, keep the compressed form only if strictly shorter);
// decoding parses the header, decompresses within MaxSize and deserializes, every failure an *InvalidEntry.
package format

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
	"unicode/utf8"
)

// DefaultThreshold: payloads shorter than this are stored uncompressed.
const DefaultThreshold = 1024

// Options say how an entry is written. Start from DefaultOptions(): the zero value means raw, uncompressed.
type Options struct {
	Serializer Serializer
	Compressor Compressor
	Threshold  int
	Level      *int    // nil: the codec's default
	CreatedAt  *uint64 // nil: now
	ExpiresAt  uint64  // absolute ms; 0 = never (or computed from TTLMs)
	TTLMs      uint64  // when > 0: ExpiresAt = CreatedAt + TTLMs
	StaleMs    uint64
	Version    *string
	Tags       []string
}

// DefaultOptions are msgpack, lz4 from 1024 bytes, created now, never expiring.
func DefaultOptions() Options {
	return Options{Serializer: Msgpack, Compressor: LZ4, Threshold: DefaultThreshold}
}

// Uint64 and String return pointers, for the optional fields of Options.
func Uint64(v uint64) *uint64 { return &v }

// String returns a pointer to s.
func String(s string) *string { return &s }

// Int returns a pointer to v.
func Int(v int) *int { return &v }

// NowMs is the wall clock in ms since the epoch.
func NowMs() uint64 { return uint64(time.Now().UnixMilli()) }

// Entry is a decoded entry: its header, and Value (kind value) or Response (kind response).
type Entry struct {
	Header
	Value    any
	Response *Response
	// PayloadLen is the payload's length after decompression.
	PayloadLen int
}

// Serialize turns value into a payload with serializer s.
func Serialize(s Serializer, value any) ([]byte, error) {
	switch s {
	case Msgpack:
		return AppendMsgpack(nil, value)
	case JSON:
		return AppendJSON(nil, value)
	case Text:
		switch v := value.(type) {
		case string:
			return []byte(v), nil
		case []byte:
			if !utf8.Valid(v) {
				return nil, errors.New("the text serializer takes UTF-8 text")
			}
			return append([]byte{}, v...), nil
		}
		return nil, fmt.Errorf("the text serializer takes a string, not %T", value)
	case Raw:
		switch v := value.(type) {
		case string:
			return []byte(v), nil
		case []byte:
			return append([]byte{}, v...), nil
		}
		return nil, fmt.Errorf("the raw serializer takes bytes or a string, not %T", value)
	}
	return nil, fmt.Errorf("unknown serializer %d", s)
}

// Deserialize reads a decompressed payload; every failure is bad_value.
func Deserialize(s Serializer, payload []byte) (any, error) {
	switch s {
	case Msgpack:
		return DecodeMsgpack(payload)
	case JSON:
		v, err := ParseJSON(payload, false, MaxNesting)
		if err != nil {
			return nil, invalid(BadValue, "json: %v", err)
		}
		return v, nil
	case Text:
		if !utf8.Valid(payload) {
			return nil, invalid(BadValue, "text is not UTF-8")
		}
		return string(payload), nil
	case Raw:
		return append([]byte{}, payload...), nil
	}
	return nil, invalid(UnknownCodec, "unknown serializer %d", s)
}

// Encode writes value as a value entry (kind 0). A MessagePack payload is written into a pooled buffer that Build
// copies or compresses into the entry: one allocation of the entry's own size per write, not a payload that grows
// by doubling, then the entry, then a compressed copy (issue 34).
func Encode(value any, o Options) ([]byte, error) {
	if o.Serializer != Msgpack {
		payload, err := Serialize(o.Serializer, value)
		if err != nil {
			return nil, err
		}
		return Build(KindValue, o.Serializer, payload, o)
	}
	if str, ok := value.(string); ok && (o.Compressor == None || strLen(len(str)) < o.Threshold) {
		// A string stored as it is (over the memory store, or short): written once, into the entry itself.
		var head [64]byte
		h, err := buildHeader(KindValue, Msgpack, o, head[:0])
		if err != nil {
			return nil, err
		}
		return appendStr(append(make([]byte, 0, len(h)+strLen(len(str))), h...), str), nil
	}
	buf := scratchPool.Get().(*[]byte)
	defer putScratch(buf)
	payload, err := AppendMsgpack((*buf)[:0], value)
	*buf = payload[:0]
	if err != nil {
		return nil, err
	}
	return Build(KindValue, Msgpack, payload, o)
}

// scratchPool holds the buffers payloads are serialized and compressed into before they are copied into an entry.
var scratchPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// putScratch returns a buffer to the pool, unless a huge value grew it (kept, it would pin that memory).
func putScratch(b *[]byte) {
	if cap(*b) <= 1<<20 {
		scratchPool.Put(b)
	}
}

// EncodeResponse writes r as a response entry (kind 1, serializer msgpack whatever o says).
func EncodeResponse(r *Response, o Options) ([]byte, error) {
	payload, err := r.AppendPayload(nil)
	if err != nil {
		return nil, err
	}
	return Build(KindResponse, Msgpack, payload, o)
}

// Build writes an entry around an already serialized payload.
func Build(kind Kind, s Serializer, payload []byte, o Options) ([]byte, error) {
	var head [64]byte
	h, err := buildHeader(kind, s, o, head[:0])
	if err != nil {
		return nil, err
	}
	body := payload
	if o.Compressor != None && len(payload) >= o.Threshold {
		var compressed []byte
		if o.Compressor == LZ4 && uint64(len(payload)) <= math.MaxUint32 {
			// LZ4 into a pooled buffer: the entry is then allocated at its compressed size.
			buf := scratchPool.Get().(*[]byte)
			defer putScratch(buf)
			compressed, err = appendLZ4((*buf)[:0], payload)
			*buf = compressed[:0]
		} else {
			compressed, err = Compress(o.Compressor, payload, o.Level)
		}
		if err != nil {
			return nil, err
		}
		if len(compressed) < len(payload) {
			h[compressorAt] = byte(o.Compressor)
			body = compressed
		}
	}
	out := make([]byte, len(h)+len(body))
	copy(out, h)
	copy(out[len(h):], body)
	return out, nil
}

// strLen is the length of a MessagePack str of n bytes.
func strLen(n int) int {
	switch {
	case n <= 31:
		return 1 + n
	case n <= math.MaxUint8:
		return 2 + n
	case n <= math.MaxUint16:
		return 3 + n
	}
	return 5 + n
}

// buildHeader checks o and appends the entry's header (its compressor "none") to dst.
func buildHeader(kind Kind, s Serializer, o Options, dst []byte) ([]byte, error) {
	if int(o.Compressor) >= len(compressorNames) {
		return nil, fmt.Errorf("unknown compressor %d", o.Compressor)
	}
	if o.Threshold < 0 {
		return nil, fmt.Errorf("threshold must be non-negative, not %d", o.Threshold)
	}
	created := NowMs()
	if o.CreatedAt != nil {
		created = *o.CreatedAt
	}
	expires := o.ExpiresAt
	if o.TTLMs > 0 {
		if o.ExpiresAt != 0 {
			return nil, errors.New("give TTLMs or ExpiresAt, not both")
		}
		expires = math.MaxUint64
		if o.TTLMs <= math.MaxUint64-created {
			expires = created + o.TTLMs
		}
	}
	f := HeaderFields{Kind: kind, Serializer: s, Compressor: None, CreatedAt: created, ExpiresAt: expires,
		StaleMs: o.StaleMs, Version: o.Version, Tags: o.Tags}
	return AppendHeader(dst, &f)
}

// DecodePayload returns the header and the decompressed, still serialized payload.
func DecodePayload(data []byte, maxSize int) (*Header, []byte, error) {
	h, err := ReadHeader(data)
	if err != nil {
		return nil, nil, err
	}
	payload, err := Decompress(h.Compressor, data[h.Size:], maxSize)
	if err != nil {
		return nil, nil, err
	}
	return h, payload, nil
}

// Decode decodes a whole entry with maxSize bounding the decompressed payload (DefaultMaxSize if <= 0
// is not what you want: pass it explicitly).
func Decode(data []byte, maxSize int) (*Entry, error) {
	h, payload, err := DecodePayload(data, maxSize)
	if err != nil {
		return nil, err
	}
	e := &Entry{Header: *h, PayloadLen: len(payload)}
	if h.Kind == KindResponse {
		e.Response, err = DecodeResponse(payload)
	} else {
		e.Value, err = Deserialize(h.Serializer, payload)
	}
	if err != nil {
		return nil, err
	}
	return e, nil
}
