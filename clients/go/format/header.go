// The entry header (FORMAT.md §1): the fixed 23 bytes and the optional stale window, version and tags. Stores
// and caches read expiry, version and tags here without touching the payload.
package format

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"
)

// Layout constants of FORMAT.md §1.
const (
	Magic0          = 0xC1
	Magic1          = 0x4C
	FormatVersion   = 1
	FixedHeaderLen  = 23
	compressorAt    = 5
	ExpiresAtOffset = 15

	flagStale    = 0x01
	flagVersion  = 0x02
	flagTags     = 0x04
	reservedFlag = 0xF8
)

// Kind is what an entry holds.
type Kind uint8

// Kinds of FORMAT.md §1.
const (
	KindValue    Kind = 0
	KindResponse Kind = 1
)

var kindNames = []string{"value", "response"}

// numberName is the name FORMAT.md gives number n, or what(n) for a number it does not define.
func numberName(names []string, n uint8, what string) string {
	if int(n) < len(names) {
		return names[n]
	}
	return fmt.Sprintf("%s(%d)", what, n)
}

func (k Kind) String() string { return numberName(kindNames, uint8(k), "kind") }

// Serializer numbers of FORMAT.md §2.
type Serializer uint8

// Serializers.
const (
	Raw     Serializer = 0
	Msgpack Serializer = 1
	JSON    Serializer = 2
	Text    Serializer = 3
)

var serializerNames = []string{"raw", "msgpack", "json", "text"}

func (s Serializer) String() string { return numberName(serializerNames, uint8(s), "serializer") }

// Compressor numbers of FORMAT.md §3.
type Compressor uint8

// Compressors.
const (
	None   Compressor = 0
	LZ4    Compressor = 1
	Snappy Compressor = 2
	Zstd   Compressor = 3
	Brotli Compressor = 4
	Gzip   Compressor = 5
)

var compressorNames = []string{"none", "lz4", "snappy", "zstd", "brotli", "gzip"}

func (c Compressor) String() string { return numberName(compressorNames, uint8(c), "compressor") }

// ParseKind, ParseSerializer and ParseCompressor read the names the CLI and the vectors use.
func ParseKind(name string) (Kind, error) {
	i, err := lookup(kindNames, name, "kind")
	return Kind(i), err
}

// ParseSerializer reads a serializer name.
func ParseSerializer(name string) (Serializer, error) {
	i, err := lookup(serializerNames, name, "serializer")
	return Serializer(i), err
}

// ParseCompressor reads a compressor name.
func ParseCompressor(name string) (Compressor, error) {
	i, err := lookup(compressorNames, name, "compressor")
	return Compressor(i), err
}

func lookup(names []string, name, what string) (int, error) {
	for i, n := range names {
		if n == name {
			return i, nil
		}
	}
	return 0, fmt.Errorf("unknown %s %q (expected one of: %s)", what, name, joinComma(names))
}

func joinComma(names []string) string {
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}

// Header is a parsed entry header. Times are ms since the Unix epoch; ExpiresAt 0 means never.
type Header struct {
	Kind       Kind
	Serializer Serializer
	Compressor Compressor
	CreatedAt  uint64
	ExpiresAt  uint64
	StaleMs    uint64
	Version    *string
	Tags       []string
	// Size is how many bytes the header takes: the payload starts there.
	Size int
}

// HardExpiry is ExpiresAt + StaleMs (saturating), and false when the entry never expires.
func (h *Header) HardExpiry() (uint64, bool) { return HardExpiry(h.ExpiresAt, h.StaleMs) }

// HardExpiry is expires_at + stale_ms, saturating; ok is false when the entry never expires.
func HardExpiry(expiresAt, staleMs uint64) (uint64, bool) {
	if expiresAt == 0 {
		return 0, false
	}
	if staleMs > math.MaxUint64-expiresAt {
		return math.MaxUint64, true
	}
	return expiresAt + staleMs, true
}

// LooksLikeEntry reports whether data starts like an entry (its magic and room for the fixed header): what
// stores check before paying for ReadHeader on a value that may be a counter or a caller's raw bytes.
func LooksLikeEntry(data []byte) bool {
	return len(data) >= FixedHeaderLen && data[0] == Magic0 && data[1] == Magic1
}

// PeekExpiresAt reads only expires_at; ok is false when data does not start like an entry.
func PeekExpiresAt(data []byte) (uint64, bool) {
	if len(data) < FixedHeaderLen || data[0] != Magic0 || data[1] != Magic1 {
		return 0, false
	}
	return binary.LittleEndian.Uint64(data[ExpiresAtOffset:]), true
}

// ReadHeader parses the header of data (the entry, or at least its header) without reading the payload.
func ReadHeader(data []byte) (*Header, error) {
	n := len(data)
	if n < 3 {
		if n >= 2 && (data[0] != Magic0 || data[1] != Magic1) {
			return nil, invalid(BadMagic, "first bytes are %02x %02x, not c1 4c", data[0], data[1])
		}
		return nil, invalid(Truncated, "fixed header needs %d bytes, entry has %d", FixedHeaderLen, n)
	}
	if data[0] != Magic0 || data[1] != Magic1 {
		return nil, invalid(BadMagic, "first bytes are %02x %02x, not c1 4c", data[0], data[1])
	}
	if data[2] != FormatVersion {
		return nil, invalid(UnsupportedVersion, "format version %d (this reader knows version %d)", data[2], FormatVersion)
	}
	if n < FixedHeaderLen {
		return nil, invalid(Truncated, "fixed header needs %d bytes, entry has %d", FixedHeaderLen, n)
	}
	h := &Header{Kind: Kind(data[3]), Serializer: Serializer(data[4]), Compressor: Compressor(data[5])}
	if int(h.Kind) >= len(kindNames) {
		return nil, invalid(UnknownCodec, "unknown kind %d", data[3])
	}
	if int(h.Serializer) >= len(serializerNames) {
		return nil, invalid(UnknownCodec, "unknown serializer %d", data[4])
	}
	if int(h.Compressor) >= len(compressorNames) {
		return nil, invalid(UnknownCodec, "unknown compressor %d", data[5])
	}
	flags := data[6]
	if flags&reservedFlag != 0 {
		return nil, invalid(BadHeader, "reserved flag bits set: %#04x", flags)
	}
	if h.Kind == KindResponse && h.Serializer != Msgpack {
		return nil, invalid(BadHeader, "an HTTP response entry must use msgpack, not %s", h.Serializer)
	}
	h.CreatedAt = binary.LittleEndian.Uint64(data[7:])
	h.ExpiresAt = binary.LittleEndian.Uint64(data[15:])
	pos := FixedHeaderLen
	if flags&flagStale != 0 {
		if n-pos < 8 {
			return nil, invalid(Truncated, "stale window needs 8 bytes at offset %d", pos)
		}
		h.StaleMs = binary.LittleEndian.Uint64(data[pos:])
		pos += 8
	}
	if flags&flagVersion != 0 {
		v, next, err := readString(data, pos, "version")
		if err != nil {
			return nil, err
		}
		h.Version, pos = &v, next
	}
	if flags&flagTags != 0 {
		if n-pos < 2 {
			return nil, invalid(Truncated, "tag count needs 2 bytes at offset %d", pos)
		}
		count := int(binary.LittleEndian.Uint16(data[pos:]))
		pos += 2
		// Each tag takes at least its 2-byte length: never allocate for more tags than the bytes can hold.
		if count > (n-pos)/2 {
			return nil, invalid(Truncated, "%d tags promised, %d bytes left", count, n-pos)
		}
		h.Tags = make([]string, 0, count)
		for range count {
			t, next, err := readString(data, pos, "tag")
			if err != nil {
				return nil, err
			}
			h.Tags = append(h.Tags, t)
			pos = next
		}
	}
	h.Size = pos
	return h, nil
}

func readString(data []byte, pos int, what string) (string, int, error) {
	if len(data)-pos < 2 {
		return "", 0, invalid(Truncated, "%s length needs 2 bytes at offset %d", what, pos)
	}
	l := int(binary.LittleEndian.Uint16(data[pos:]))
	pos += 2
	if len(data)-pos < l {
		return "", 0, invalid(Truncated, "%s of %d bytes runs past the end", what, l)
	}
	b := data[pos : pos+l]
	if !utf8.Valid(b) {
		return "", 0, invalid(BadHeader, "%s is not UTF-8", what)
	}
	return string(b), pos + l, nil
}

// HeaderFields are what an encoder writes into a header.
type HeaderFields struct {
	Kind       Kind
	Serializer Serializer
	Compressor Compressor
	CreatedAt  uint64
	ExpiresAt  uint64
	StaleMs    uint64
	Version    *string
	Tags       []string
}

// AppendHeader appends the header bytes for f.
func AppendHeader(b []byte, f *HeaderFields) ([]byte, error) {
	var flags byte
	if f.StaleMs > 0 {
		flags |= flagStale
	}
	if f.Version != nil {
		flags |= flagVersion
	}
	if len(f.Tags) > 0 {
		flags |= flagTags
	}
	b = append(b, Magic0, Magic1, FormatVersion, byte(f.Kind), byte(f.Serializer), byte(f.Compressor), flags)
	b = binary.LittleEndian.AppendUint64(b, f.CreatedAt)
	b = binary.LittleEndian.AppendUint64(b, f.ExpiresAt)
	if f.StaleMs > 0 {
		b = binary.LittleEndian.AppendUint64(b, f.StaleMs)
	}
	var err error
	if f.Version != nil {
		if b, err = appendString(b, *f.Version, "version"); err != nil {
			return nil, err
		}
	}
	if len(f.Tags) > 0 {
		if len(f.Tags) > math.MaxUint16 {
			return nil, fmt.Errorf("%d tags; the format allows at most %d", len(f.Tags), math.MaxUint16)
		}
		b = binary.LittleEndian.AppendUint16(b, uint16(len(f.Tags)))
		for _, t := range f.Tags {
			if b, err = appendString(b, t, "tag"); err != nil {
				return nil, err
			}
		}
	}
	return b, nil
}

func appendString(b []byte, s, what string) ([]byte, error) {
	if len(s) > math.MaxUint16 {
		return nil, fmt.Errorf("%s is %d bytes; the format allows at most %d", what, len(s), math.MaxUint16)
	}
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("%s is not UTF-8", what)
	}
	b = binary.LittleEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...), nil
}
