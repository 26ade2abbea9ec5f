// The compressors of FORMAT.md §3 in the wire forms every language reads (LZ4 block with a 4-byte size prefix,
// raw Snappy, zstd frames that record their content size, brotli, gzip), each decoder bounded by max_size: no
// size field is trusted before it is checked, and streaming codecs stop one byte past the limit.
package format

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"

	"github.com/andybalholm/brotli"
	"github.com/golang/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// DefaultMaxSize is the default bound on a decompressed payload: 64 MiB.
const DefaultMaxSize = 64 << 20

// Default levels (FORMAT.md §3); the other codecs have none.
const (
	DefaultZstdLevel   = 3
	DefaultBrotliLevel = 4
	DefaultGzipLevel   = 6
)

// lz4MaxRatio is the most an LZ4 block can expand: each extra length byte adds at most 255 bytes of output.
const lz4MaxRatio = 255

var lz4Pool = sync.Pool{New: func() any { return new(lz4.Compressor) }}

// zstd encoders are costly to build and safe for concurrent EncodeAll: one per level.
var (
	zstdEncMu sync.Mutex
	zstdEncs  = map[int]*zstd.Encoder{}
	zstdDec   *zstd.Decoder
	zstdOnce  sync.Once
)

// zstdMaxWindow bounds the history a zstd frame may ask for (a fixed codec allowance, FORMAT.md §7).
const zstdMaxWindow = 1 << 27

func zstdEncoder(level int) (*zstd.Encoder, error) {
	zstdEncMu.Lock()
	defer zstdEncMu.Unlock()
	if e, ok := zstdEncs[level]; ok {
		return e, nil
	}
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)),
		zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true), zstd.WithEncoderCRC(false))
	if err != nil {
		return nil, err
	}
	zstdEncs[level] = e
	return e, nil
}

func zstdDecoder() *zstd.Decoder {
	zstdOnce.Do(func() {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecodeAllCapLimit(true),
			zstd.WithDecoderMaxWindow(zstdMaxWindow), zstd.WithDecoderMaxMemory(math.MaxInt32))
		if err != nil {
			panic(err) // options are constant: cannot fail
		}
		zstdDec = d
	})
	return zstdDec
}

// Compress compresses data with c at level (nil = the codec's default).
func Compress(c Compressor, data []byte, level *int) ([]byte, error) {
	switch c {
	case None:
		return append([]byte{}, data...), nil
	case LZ4:
		if uint64(len(data)) > math.MaxUint32 {
			return nil, fmt.Errorf("lz4 input of %d bytes exceeds 4 GiB", len(data))
		}
		return appendLZ4(make([]byte, 0, 4+lz4.CompressBlockBound(len(data))), data)
	case Snappy:
		return snappy.Encode(nil, data), nil
	case Zstd:
		l := DefaultZstdLevel
		if level != nil {
			l = clamp(*level, 1, 22)
		}
		e, err := zstdEncoder(l)
		if err != nil {
			return nil, err
		}
		return e.EncodeAll(data, make([]byte, 0, len(data)/2+64)), nil
	case Brotli:
		l := DefaultBrotliLevel
		if level != nil {
			l = clamp(*level, 0, 11)
		}
		var buf bytes.Buffer
		w := brotli.NewWriterOptions(&buf, brotli.WriterOptions{Quality: l, LGWin: 22})
		if _, err := w.Write(data); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case Gzip:
		l := DefaultGzipLevel
		if level != nil {
			l = clamp(*level, 0, 9)
		}
		var buf bytes.Buffer
		w, err := gzip.NewWriterLevel(&buf, l)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(data); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	return nil, fmt.Errorf("unknown compressor %d", c)
}

// appendLZ4 appends data in larder's LZ4 form (a u32 little-endian size, then one block) to dst. The caller
// checks that data is under 4 GiB.
func appendLZ4(dst, data []byte) ([]byte, error) {
	at := len(dst)
	dst = slices.Grow(dst, 4+lz4.CompressBlockBound(len(data)))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(data)))
	comp := lz4Pool.Get().(*lz4.Compressor)
	n, err := comp.CompressBlock(data, dst[at+4:cap(dst)])
	lz4Pool.Put(comp)
	if err != nil {
		return nil, err
	}
	if n == 0 { // incompressible: pierrec writes nothing; a literal-only block is still a valid LZ4 block
		return appendLiteralBlock(dst, data), nil
	}
	return dst[:at+4+n], nil
}

// appendLiteralBlock writes data as one LZ4 sequence of literals only (what every LZ4 decoder reads).
func appendLiteralBlock(b, data []byte) []byte {
	n := len(data)
	if n < 15 {
		b = append(b, byte(n<<4))
	} else {
		b = append(b, 0xF0)
		rest := n - 15
		for rest >= 255 {
			b = append(b, 255)
			rest -= 255
		}
		b = append(b, byte(rest))
	}
	return append(b, data...)
}

func clamp(v, lo, hi int) int { return max(lo, min(hi, v)) }

// Decompress undoes c on data, refusing to produce more than maxSize bytes. Every failure is an
// *InvalidEntry of kind too_large or corrupt_payload.
func Decompress(c Compressor, data []byte, maxSize int) ([]byte, error) {
	switch c {
	case None:
		if len(data) > maxSize {
			return nil, tooLarge(uint64(len(data)), maxSize)
		}
		return data, nil
	case LZ4:
		return lz4Decompress(data, maxSize)
	case Snappy:
		return snappyDecompress(data, maxSize)
	case Zstd:
		return zstdDecompress(data, maxSize)
	case Brotli:
		return brotliDecompress(data, maxSize)
	case Gzip:
		return gzipDecompress(data, maxSize)
	}
	return nil, invalid(UnknownCodec, "unknown compressor %d", c)
}

func tooLarge(size uint64, maxSize int) error {
	return invalid(TooLarge, "payload of %d bytes exceeds the %d-byte limit", size, maxSize)
}

func tooLargeStream(codec string, maxSize int) error {
	return invalid(TooLarge, "%s payload decompresses to more than the %d-byte limit", codec, maxSize)
}

func lz4Decompress(data []byte, maxSize int) ([]byte, error) {
	if len(data) < 4 {
		return nil, invalid(CorruptPayload, "lz4 payload of %d bytes has no 4-byte size prefix", len(data))
	}
	declared := uint64(binary.LittleEndian.Uint32(data))
	if declared > uint64(maxSize) {
		return nil, tooLarge(declared, maxSize)
	}
	block := data[4:]
	if declared > lz4MaxRatio*uint64(len(block))+16 {
		return nil, invalid(CorruptPayload, "lz4 size prefix claims %d bytes from a %d-byte block, more than LZ4 can expand", declared, len(block))
	}
	out := make([]byte, declared)
	n, err := lz4.UncompressBlock(block, out)
	if err != nil {
		if declared == 0 && len(block) == 1 && block[0] == 0 {
			return out, nil // the empty block: one token with no literals
		}
		return nil, invalid(CorruptPayload, "lz4: %v", err)
	}
	if uint64(n) != declared {
		return nil, invalid(CorruptPayload, "lz4 block decoded to %d bytes, prefix declared %d", n, declared)
	}
	return out, nil
}

func snappyDecompress(data []byte, maxSize int) ([]byte, error) {
	if len(data) == 0 {
		return nil, invalid(CorruptPayload, "snappy payload is empty")
	}
	var declared uint64
	preamble := 0
	for i := 0; ; i++ {
		if i == 10 {
			return nil, invalid(CorruptPayload, "snappy length preamble is longer than 10 bytes")
		}
		if i == len(data) {
			return nil, invalid(CorruptPayload, "snappy length preamble is cut short")
		}
		c := data[i]
		if i < 9 || c <= 1 {
			declared |= uint64(c&0x7f) << (7 * i)
		} else {
			declared = math.MaxUint64
		}
		if c < 0x80 {
			preamble = i + 1
			break
		}
	}
	if declared > uint64(maxSize) {
		return nil, tooLarge(declared, maxSize)
	}
	if preamble > 5 || declared > math.MaxUint32 {
		return nil, invalid(CorruptPayload, "snappy length preamble of %d bytes (a raw block's takes at most 5)", preamble)
	}
	out := make([]byte, declared)
	got, err := snappy.Decode(out, data)
	if err != nil {
		return nil, invalid(CorruptPayload, "snappy: %v", err)
	}
	if uint64(len(got)) != declared {
		return nil, invalid(CorruptPayload, "snappy block decoded to %d bytes, preamble declared %d", len(got), declared)
	}
	return got, nil
}

func zstdDecompress(data []byte, maxSize int) ([]byte, error) {
	var h zstd.Header
	if err := h.Decode(data); err != nil {
		return nil, invalid(CorruptPayload, "not a zstd frame: %v", err)
	}
	if h.Skippable || !h.HasFCS {
		return nil, invalid(CorruptPayload, "zstd frame does not record its content size")
	}
	if h.FrameContentSize > uint64(maxSize) {
		return nil, tooLarge(h.FrameContentSize, maxSize)
	}
	declared := int(h.FrameContentSize)
	out, err := zstdDecoder().DecodeAll(data, make([]byte, 0, declared))
	if err != nil {
		return nil, invalid(CorruptPayload, "zstd: %v", err)
	}
	if len(out) != declared {
		return nil, invalid(CorruptPayload, "zstd frame decoded to %d bytes, header declared %d", len(out), declared)
	}
	return out, nil
}

func brotliDecompress(data []byte, maxSize int) ([]byte, error) {
	src := bytes.NewReader(data)
	r := brotli.NewReader(src)
	out, err := readLimited(r, maxSize)
	if errors.Is(err, errOverLimit) {
		return nil, tooLargeStream("brotli", maxSize)
	}
	if err != nil {
		return nil, invalid(CorruptPayload, "brotli: %v", err)
	}
	if src.Len() != 0 {
		return nil, invalid(CorruptPayload, "%d bytes after the brotli stream", src.Len())
	}
	return out, nil
}

func gzipDecompress(data []byte, maxSize int) ([]byte, error) {
	src := bytes.NewReader(data)
	r, err := gzip.NewReader(src)
	if err != nil {
		return nil, invalid(CorruptPayload, "gzip: %v", err)
	}
	r.Multistream(false)
	out, err := readLimited(r, maxSize)
	if errors.Is(err, errOverLimit) {
		return nil, tooLargeStream("gzip", maxSize)
	}
	if err != nil {
		return nil, invalid(CorruptPayload, "gzip: %v", err)
	}
	if src.Len() != 0 {
		return nil, invalid(CorruptPayload, "%d bytes after the gzip member", src.Len())
	}
	return out, nil
}

var errOverLimit = errors.New("over the limit")

// readLimited reads r to its end, failing with errOverLimit once more than maxSize bytes came out.
func readLimited(r io.Reader, maxSize int) ([]byte, error) {
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(r, int64(maxSize)+1))
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if n > int64(maxSize) {
		return nil, errOverLimit
	}
	return buf.Bytes(), nil
}
