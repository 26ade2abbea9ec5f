// Fuzz targets for the decoders of untrusted bytes: whatever the input, Decode and DisplayPayload return a
// value or an *InvalidEntry, never panic, and never produce more than max_size bytes of payload. Seeds are every
// entry of spec/vectors (valid and invalid); `go test` runs the seeds, `go test -fuzz FuzzDecode` explores.
package format

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func vectorEntries(f *testing.F) {
	for _, file := range []string{"entries.json", "invalid.json"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "..", "spec", "vectors", file))
		if err != nil {
			f.Fatal(err)
		}
		var doc struct {
			Cases []struct {
				EntryHex string `json:"entry_hex"`
			} `json:"cases"`
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			f.Fatal(err)
		}
		for _, c := range doc.Cases {
			b, _ := hex.DecodeString(c.EntryHex)
			f.Add(b)
		}
	}
}

func FuzzDecode(f *testing.F) {
	vectorEntries(f)
	const maxSize = 1 << 16
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Decode(data, maxSize)
		if err != nil {
			if KindOf(err) == "" {
				t.Fatalf("error that is not an *InvalidEntry: %v", err)
			}
			return
		}
		if e.PayloadLen > maxSize {
			t.Fatalf("payload of %d bytes past max_size", e.PayloadLen)
		}
		h, payload, err := DecodePayload(data, maxSize)
		if err != nil {
			t.Fatal(err)
		}
		if h.Kind == KindValue {
			if _, err := DisplayPayload(h.Serializer, payload); err != nil && KindOf(err) == "" {
				t.Fatalf("display error that is not an *InvalidEntry: %v", err)
			}
		}
	})
}

func FuzzMsgpack(f *testing.F) {
	f.Add([]byte{0x93, 0x01, 0xa1, 'a', 0xc0})
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := DecodeMsgpack(data)
		if err != nil {
			return
		}
		// What decodes re-encodes, and decodes to the same display.
		again, err := AppendMsgpack(nil, v)
		if err != nil {
			t.Fatalf("re-encoding %#v: %v", v, err)
		}
		v2, err := DecodeMsgpack(again)
		if err != nil {
			t.Fatal(err)
		}
		d1, _ := DisplayJSON(v, -1)
		d2, _ := DisplayJSON(v2, -1)
		if d1 != d2 {
			t.Fatalf("%s != %s", d1, d2)
		}
	})
}

func FuzzJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5,"x"],"a":null}`, `"\ud83c\udf5e"`, `-0`, `1e400`, `[[[[]]]]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseJSON(data, false, MaxNesting)
		if err != nil {
			return
		}
		if _, err := AppendJSON(nil, v); err != nil {
			return // infinities and big integers have no JSON payload form
		}
	})
}
