// Unit tests of the format beyond the vectors: round trips of every serializer and compressor, the compression
// rule, bounds against hostile sizes, and the display of floats as Python's repr.
package format

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func TestRoundTripEveryCodec(t *testing.T) {
	value := NewMap("id", int64(7), "name", strings.Repeat("Ada ", 400), "ok", true, "n", nil, "f", 1.5,
		"list", []any{int64(-1), uint64(math.MaxUint64), "é"}, "bin", []byte{0, 1, 2})
	for _, c := range []Compressor{None, LZ4, Snappy, Zstd, Brotli, Gzip} {
		o := DefaultOptions()
		o.Compressor = c
		o.Tags = []string{"t1", "日本"}
		o.Version = String("")
		o.TTLMs = 60000
		o.StaleMs = 5
		data, err := Encode(value, o)
		if err != nil {
			t.Fatal(err)
		}
		e, err := Decode(data, DefaultMaxSize)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if e.Compressor != c {
			t.Errorf("%s: stored %s", c, e.Compressor)
		}
		if e.ExpiresAt != e.CreatedAt+60000 || *e.Version != "" || e.Tags[1] != "日本" || e.StaleMs != 5 {
			t.Errorf("%s: header %+v", c, e.Header)
		}
		a, _ := DisplayJSON(e.Value, -1)
		b, _ := DisplayJSON(value, -1)
		if a != b {
			t.Errorf("%s: %s != %s", c, a, b)
		}
	}
}

func TestCompressionKeptOnlyWhenSmaller(t *testing.T) {
	o := DefaultOptions()
	o.Serializer = Raw
	o.Threshold = 0
	random := make([]byte, 2000)
	for i := range random {
		random[i] = byte(i*7919 + i*i)
	}
	for _, c := range []Compressor{LZ4, Snappy, Zstd, Brotli, Gzip} {
		o.Compressor = c
		data, _ := Encode([]byte("x"), o)
		if data[5] != byte(None) {
			t.Errorf("%s: a 1-byte payload was stored compressed", c)
		}
		data, _ = Encode(bytes.Repeat([]byte("ab"), 600), o)
		if data[5] != byte(c) {
			t.Errorf("%s: a compressible payload was stored plain", c)
		}
	}
}

func TestDecompressorsRefuseOversizedOutput(t *testing.T) {
	big := bytes.Repeat([]byte{'a'}, 100000)
	for _, c := range []Compressor{LZ4, Snappy, Zstd, Brotli, Gzip} {
		comp, err := Compress(c, big, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decompress(c, comp, 99999); KindOf(err) != TooLarge {
			t.Errorf("%s: %v", c, err)
		}
		out, err := Decompress(c, comp, 100000)
		if err != nil || !bytes.Equal(out, big) {
			t.Errorf("%s: %v", c, err)
		}
	}
}

func TestFloatRepr(t *testing.T) {
	for f, want := range map[float64]string{1: "1.0", 0.0001: "0.0001", 123456789: "123456789.0", 1e16: "1e+16",
		1.5e-7: "1.5e-07", 1e15: "1000000000000000.0", 0.1: "0.1", 562949953421312.25: "562949953421312.2",
		math.Inf(1): "Infinity", math.Inf(-1): "-Infinity", 1e-5: "1e-05", 2.5e-5: "2.5e-05", 1.5e300: "1.5e+300"} {
		if got := string(AppendFloatRepr(nil, f)); got != want {
			t.Errorf("%v: %s, want %s", f, got, want)
		}
	}
	if got := string(AppendFloatRepr(nil, math.Copysign(0, -1))); got != "-0.0" {
		t.Errorf("-0.0: %s", got)
	}
}

func TestNestingLimit(t *testing.T) {
	var v any = []any{}
	for range MaxNesting - 1 {
		v = []any{v}
	}
	if _, err := AppendMsgpack(nil, v); err != nil {
		t.Fatalf("100 levels: %v", err)
	}
	if _, err := AppendMsgpack(nil, []any{v}); err == nil {
		t.Fatal("101 levels encoded")
	}
	deep := append(bytes.Repeat([]byte{0x91}, 101), 0xc0)
	if _, err := DecodeMsgpack(deep); KindOf(err) != BadValue {
		t.Fatalf("101 levels decoded: %v", err)
	}
}

func TestTypedStructs(t *testing.T) {
	type user struct {
		ID   int    `msgpack:"id"`
		Name string `msgpack:"name"`
	}
	data, err := AppendMsgpack(nil, user{7, "Ada"})
	if err != nil {
		t.Fatal(err)
	}
	// A struct is written as a map in field order, as rmp_serde::to_vec_named and Python write the same value.
	want, _ := AppendMsgpack(nil, NewMap("id", 7, "name", "Ada"))
	if !bytes.Equal(data, want) {
		t.Fatalf("%x != %x", data, want)
	}
	var back user
	if err := UnmarshalTyped(data, &back); err != nil || back != (user{7, "Ada"}) {
		t.Fatalf("%v %+v", err, back)
	}
	if err := UnmarshalTyped(append(data, 0), &back); KindOf(err) != BadValue {
		t.Fatalf("trailing byte: %v", err)
	}
}
