// The codecs alone, without a store (issue 34): larder's entry encoding and decoding of each structured shape
// (format.Encode with LZ4 as over memcached and Redis, and uncompressed as over the memory store; Typed's struct
// path) against encoding/json's Marshal and Unmarshal of the same value, so that a network cell's gap can be
// split into codec and client.
//
//	go test -run XXX -bench Codec -benchmem ./bench/
package bench

import (
	"testing"

	"github.com/larder-cache/larder/clients/go/format"
)

func BenchmarkCodec(b *testing.B) {
	for _, sh := range structuredShapes() {
		for _, comp := range []format.Compressor{format.None, format.LZ4} {
			o := format.DefaultOptions()
			o.Compressor = comp
			cname := map[format.Compressor]string{format.None: "none", format.LZ4: "lz4"}[comp]
			b.Run("encode/larder-"+cname+"/"+sh.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := format.Encode(sh.value, o); err != nil {
						b.Fatal(err)
					}
				}
			})
			entry, err := format.Encode(sh.value, o)
			if err != nil {
				b.Fatal(err)
			}
			b.Run("decode/larder-"+cname+"/"+sh.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if sh.typed {
						_, payload, err := format.DecodePayload(entry, format.DefaultMaxSize)
						if err != nil {
							b.Fatal(err)
						}
						var q queryResult
						if err := format.UnmarshalTyped(payload, &q); err != nil {
							b.Fatal(err)
						}
						continue
					}
					if _, err := format.Decode(entry, format.DefaultMaxSize); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run("encode/json/"+sh.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := sh.encode(); err != nil {
					b.Fatal(err)
				}
			}
		})
		data, _ := sh.encode()
		b.Run("decode/json/"+sh.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := sh.decode(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
