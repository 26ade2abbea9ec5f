// Structured values side by side (issue 34): larder's Cache (MessagePack entries, LZ4 from 1 KiB) against the
// incumbents with the value encoded as their users encode it: encoding/json around gomemcache, go-redis and otter
// (in process; it holds the JSON bytes, since holding the object itself shares it with every reader), a page
// stored as its bytes. A query result as maps goes through Cache.Set/Get (Get gives the generic value model), as
// structs through Typed[T] (Get decodes into T, as json.Unmarshal into T does). Set and get, one goroutine.
//
//	ROUNDS=6 BENCH=Structured bash bench/rounds.sh
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/maypok86/otter/v2"
	"github.com/redis/go-redis/v9"

	larder "github.com/larder-cache/larder/clients/go"
	"github.com/larder-cache/larder/clients/go/internal/testservers"
	"github.com/larder-cache/larder/clients/go/stores"
)

// structuredShape is one value and how each side reads it back.
type structuredShape struct {
	name  string
	value any
	// decode reads the incumbent's bytes back as its users do (JSON into the value's type, a page as a string).
	decode func([]byte) error
	// encode is the incumbent's encoding (JSON, a page's bytes as they are).
	encode func() ([]byte, error)
	// typed: larder's side goes through Typed[queryResult].
	typed bool
}

func structuredShapes() []structuredShape {
	jsonOf := func(v any) func() ([]byte, error) { return func() ([]byte, error) { return json.Marshal(v) } }
	intoAny := func(b []byte) error { var v any; return json.Unmarshal(b, &v) }
	intoQuery := func(b []byte) error { var v queryResult; return json.Unmarshal(b, &v) }
	page := renderedPage(64 << 10)
	var shapes []structuredShape
	for _, n := range []struct {
		name string
		rows int
	}{{"query1k", 13}, {"query64k", 830}} {
		m, st := queryMaps(n.rows), queryStructs(n.rows)
		shapes = append(shapes,
			structuredShape{name: n.name + "-maps", value: m, decode: intoAny, encode: jsonOf(m)},
			structuredShape{name: n.name + "-structs", value: st, decode: intoQuery, encode: jsonOf(st), typed: true})
	}
	doc := nestedDocument()
	return append(shapes,
		structuredShape{name: "document", value: doc, decode: intoAny, encode: jsonOf(doc)},
		structuredShape{name: "page64k", value: page,
			decode: func(b []byte) error { _ = string(b); return nil },
			encode: func() ([]byte, error) { return []byte(page), nil }})
}

func BenchmarkStructured(b *testing.B) {
	ctx := context.Background()
	mcAddr := testservers.Memcached(b, "bench")
	redisURL := testservers.Redis(b, "bench")
	redisAddr := strings.TrimSuffix(strings.TrimPrefix(redisURL, "redis://"), "/0")
	gm := memcache.New(mcAddr)
	gm.MaxIdleConns = 2
	gm.Timeout = 2 * time.Second
	rc := redis.NewClient(&redis.Options{Addr: redisAddr, PoolSize: 4, ReadTimeout: 2 * time.Second})
	b.Cleanup(func() { rc.Close() })
	ot := otter.Must(&otter.Options[string, []byte]{MaximumSize: 1000})
	type incumbent struct {
		name string
		set  func(key string, data []byte) error
		get  func(key string) ([]byte, error)
	}
	sides := []struct {
		store string
		cache *larder.Cache
		inc   incumbent
	}{
		{"memory", larder.New(stores.NewMemory(256<<20, 0)), incumbent{"otter",
			func(k string, d []byte) error { ot.Set(k, d); return nil },
			func(k string) ([]byte, error) { v, _ := ot.GetIfPresent(k); return v, nil }}},
		{"memcached", larder.New(openStore(b, fmt.Sprintf("memcached://%s?pool=2&timeout=10s&prefix_purge=false", mcAddr))),
			incumbent{"gomemcache",
				func(k string, d []byte) error { return gm.Set(&memcache.Item{Key: k, Value: d}) },
				func(k string) ([]byte, error) {
					it, err := gm.Get(k)
					if err != nil {
						return nil, err
					}
					return it.Value, nil
				}}},
		{"redis", larder.New(openStore(b, redisURL+"?pool=4&timeout=10s")), incumbent{"go-redis",
			func(k string, d []byte) error { return rc.Set(ctx, k, d, 0).Err() },
			func(k string) ([]byte, error) { return rc.Get(ctx, k).Bytes() }}},
	}
	for _, side := range sides {
		for _, sh := range structuredShapes() {
			key, incKey := "structured-"+sh.name, "incumbent-"+sh.name // apart: one server holds both
			typed := larder.Typed[queryResult]{C: side.cache}
			larderSet := func(int) error { return side.cache.Set(ctx, key, sh.value) }
			larderGet := func(int) error {
				if _, ok := side.cache.Get(ctx, key); !ok {
					return fmt.Errorf("%s: larder missed %s", side.store, key)
				}
				return nil
			}
			if sh.typed {
				q := sh.value.(queryResult)
				larderSet = func(int) error { return typed.Set(ctx, key, q) }
				larderGet = func(int) error {
					if _, ok := typed.Get(ctx, key); !ok {
						return fmt.Errorf("%s: larder missed %s", side.store, key)
					}
					return nil
				}
			}
			incSet := func(int) error {
				data, err := sh.encode()
				if err != nil {
					return err
				}
				return side.inc.set(incKey, data)
			}
			incGet := func(int) error {
				data, err := side.inc.get(incKey)
				if err != nil {
					return err
				}
				return sh.decode(data)
			}
			if err := larderSet(0); err != nil {
				b.Fatal(err)
			}
			if err := incSet(0); err != nil {
				b.Fatal(err)
			}
			name := sh.name + "/g1"
			pair(b, side.store+"-set", side.inc.name, name, 1, larderSet, incSet)
			pair(b, side.store+"-get", side.inc.name, name, 1, larderGet, incGet)
		}
	}
}
