// Issue 34 changed how entries are put together (a pooled payload buffer, LZ4 into a pooled buffer, the entry
// allocated at its final size, vmihailenco/msgpack writing straight onto the payload, map keys sorted on the
// stack): these tests hold Encode and MarshalTyped to the previous composition, byte for byte.
package format

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// previousEncode is Encode as it was: the payload serialized on its own, the header, then the compressed copy
// kept only if strictly shorter.
func previousEncode(t *testing.T, value any, o Options) []byte {
	t.Helper()
	payload, err := Serialize(o.Serializer, value)
	if err != nil {
		t.Fatal(err)
	}
	f := HeaderFields{Kind: KindValue, Serializer: o.Serializer, Compressor: None, CreatedAt: *o.CreatedAt,
		ExpiresAt: o.ExpiresAt, StaleMs: o.StaleMs, Version: o.Version, Tags: o.Tags}
	if o.TTLMs > 0 {
		f.ExpiresAt = *o.CreatedAt + o.TTLMs
	}
	out, err := AppendHeader(nil, &f)
	if err != nil {
		t.Fatal(err)
	}
	if o.Compressor != None && len(payload) >= o.Threshold {
		c, err := Compress(o.Compressor, payload, o.Level)
		if err != nil {
			t.Fatal(err)
		}
		if len(c) < len(payload) {
			out[compressorAt] = byte(o.Compressor)
			return append(out, c...)
		}
	}
	return append(out, payload...)
}

// previousMarshalTyped is MarshalTyped as it was: vmihailenco/msgpack into a plain io.Writer.
func previousMarshalTyped(value any) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	enc.UseCompactFloats(false)
	enc.SetSortMapKeys(true)
	err := enc.Encode(value)
	return buf.Bytes(), err
}

type pooledRow struct {
	ID     int64             `msgpack:"id"`
	Name   string            `msgpack:"name"`
	Score  float64           `msgpack:"score"`
	Small  float32           `msgpack:"small"`
	Active bool              `msgpack:"active"`
	Parent *int64            `msgpack:"parent"`
	Tags   []string          `msgpack:"tags"`
	Extra  map[string]string `msgpack:"extra"` // vmihailenco sorts these keys (not a map[string]uint16's)
}

func pooledValues() []any {
	big := map[string]any{}
	for i := range 40 { // more keys than the stack buffer holds
		big[fmt.Sprintf("k%02d", 39-i)] = i
	}
	rows := make([]any, 300)
	structs := make([]pooledRow, 300)
	for i := range rows {
		p := int64(i * 7)
		rows[i] = map[string]any{"id": int64(i), "name": fmt.Sprintf("row %d", i), "score": float64(i) / 3,
			"active": i%2 == 0, "parent": nil, "é": []any{"x", uint8(1), -40000, math.Inf(1)}}
		structs[i] = pooledRow{ID: int64(i) << 40, Name: "é" + fmt.Sprint(i), Score: 1.5, Small: 0.25, Active: i%3 == 0,
			Parent: &p, Tags: []string{"a", "b"}, Extra: map[string]string{"z": "1", "a": "65535"}}
	}
	return []any{nil, "", "text", bytes.Repeat([]byte("abc"), 2000), big, map[string]any{}, rows,
		map[string]any{"results": rows, "count": 300}, structs, pooledRow{}, &structs[0], []pooledRow{},
		string(bytes.Repeat([]byte("<tr><td>1</td></tr>"), 4000))}
}

func TestEncodeIsThePreviousComposition(t *testing.T) {
	for _, comp := range []Compressor{None, LZ4, Snappy, Zstd, Gzip, Brotli} {
		for _, threshold := range []int{0, 1024, 1 << 20} {
			for i, v := range pooledValues() {
				o := DefaultOptions()
				o.Compressor, o.Threshold, o.CreatedAt, o.TTLMs = comp, threshold, Uint64(1_700_000_000_000), 5000
				o.Version, o.Tags = String("v1"), []string{"t"}
				got, err := Encode(v, o)
				if err != nil {
					t.Fatal(err)
				}
				if want := previousEncode(t, v, o); !bytes.Equal(got, want) {
					t.Fatalf("compressor %d threshold %d value %d: entry differs from the previous composition", comp, threshold, i)
				}
				o.Version, o.Tags, o.TTLMs = nil, nil, 0
				got, _ = Encode(v, o)
				if want := previousEncode(t, v, o); !bytes.Equal(got, want) {
					t.Fatalf("compressor %d value %d (fixed header): entry differs", comp, i)
				}
			}
		}
	}
}

func TestMarshalTypedIsThePreviousEncoding(t *testing.T) {
	for i, v := range pooledValues() {
		got, err1 := MarshalTyped(v)
		want, err2 := previousMarshalTyped(v)
		if (err1 == nil) != (err2 == nil) || !bytes.Equal(got, want) {
			t.Fatalf("value %d: %d bytes (%v) against %d bytes (%v)", i, len(got), err1, len(want), err2)
		}
	}
	// map keys: sorted as sort.Strings sorts them, whatever their number
	m := map[string]any{}
	for i := range 100 {
		m[fmt.Sprintf("%c%d", 'z'-i%26, i)] = i
		b, err := AppendMsgpack(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		pairs := make([]Pair, len(keys))
		for j, k := range keys {
			pairs[j] = Pair{Key: k, Value: m[k]}
		}
		want, _ := AppendMsgpack(nil, &Map{Pairs: pairs})
		if !bytes.Equal(b, want) {
			t.Fatalf("%d keys: not in sorted order", len(m))
		}
	}
}
