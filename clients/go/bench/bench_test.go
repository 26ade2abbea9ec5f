// Benchmarks, side by side in one run (the machine is shared: read them as ratios): larder's memcached and Redis
// stores against gomemcache and go-redis on the same servers (get, set, multi-get of 100, Cache.Fetch hit; 1 KiB
// and 64 KiB values; 1 and 50 goroutines), and the memory store's hit against otter and ristretto.
//
//	go test -run XXX -bench . -benchtime 2s ./bench/
//
// Servers are started on loopback by the benchmark itself.
package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/dgraph-io/ristretto/v2"
	"github.com/maypok86/otter/v2"
	"github.com/redis/go-redis/v9"

	larder "github.com/larder-cache/larder/clients/go"
	"github.com/larder-cache/larder/clients/go/internal/testservers"
	"github.com/larder-cache/larder/clients/go/stores"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testservers.StopAll()
	os.Exit(code)
}

var sizes = []int{1 << 10, 64 << 10}

func value(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}

// parallel runs op with 1 or 50 goroutines.
func parallel(b *testing.B, goroutines int, op func(i int) error) {
	b.ReportAllocs()
	if goroutines == 1 {
		for i := 0; b.Loop(); i++ {
			if err := op(i); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	b.SetParallelism(max(1, goroutines/max(1, runtimeProcs())))
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if err := op(i); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

func openStore(b *testing.B, url string) stores.Store {
	s, err := stores.Open(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func BenchmarkMemcached(b *testing.B) {
	addr := testservers.Memcached(b, "bench")
	ctx := context.Background()
	for _, g := range []int{1, 50} {
		pool := max(2, g)
		larderStore := openStore(b, fmt.Sprintf("memcached://%s?pool=%d&timeout=10s&prefix_purge=false", addr, pool))
		gm := memcache.New(addr)
		gm.MaxIdleConns = pool
		gm.Timeout = 2 * time.Second
		for _, size := range sizes {
			v := value(size)
			keys := make([]string, 100)
			for i := range keys {
				keys[i] = fmt.Sprintf("bench-%d-%d", size, i)
				_ = larderStore.Set(ctx, keys[i], v, 0)
			}
			name := fmt.Sprintf("%dKiB/g%d", size>>10, g)
			b.Run("get/larder/"+name, func(b *testing.B) {
				parallel(b, g, func(i int) error { _, err := larderStore.Get(ctx, keys[i%100]); return err })
			})
			b.Run("get/gomemcache/"+name, func(b *testing.B) {
				parallel(b, g, func(i int) error { _, err := gm.Get(keys[i%100]); return err })
			})
			b.Run("set/larder/"+name, func(b *testing.B) {
				parallel(b, g, func(i int) error { return larderStore.Set(ctx, keys[i%100], v, 0) })
			})
			b.Run("set/gomemcache/"+name, func(b *testing.B) {
				parallel(b, g, func(i int) error { return gm.Set(&memcache.Item{Key: keys[i%100], Value: v}) })
			})
			b.Run("multiget100/larder/"+name, func(b *testing.B) {
				parallel(b, g, func(int) error { _, err := larderStore.GetMulti(ctx, keys); return err })
			})
			b.Run("multiget100/gomemcache/"+name, func(b *testing.B) {
				parallel(b, g, func(int) error { _, err := gm.GetMulti(keys); return err })
			})
			cache := larder.New(larderStore)
			_ = cache.Set(ctx, "fetch", v)
			b.Run("fetch-hit/larder/"+name, func(b *testing.B) {
				parallel(b, g, func(int) error {
					_, err := cache.Fetch(ctx, "fetch", time.Minute, func(context.Context) (any, error) { return v, nil })
					return err
				})
			})
		}
	}
}

func BenchmarkRedis(b *testing.B) {
	url := testservers.Redis(b, "bench")
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "redis://"), "/0")
	ctx := context.Background()
	for _, g := range []int{1, 50} {
		pool := max(4, g)
		larderStore := openStore(b, fmt.Sprintf("%s?pool=%d&timeout=10s", url, pool))
		rc := redis.NewClient(&redis.Options{Addr: addr, PoolSize: pool, ReadTimeout: 2 * time.Second})
		b.Cleanup(func() { rc.Close() })
		for _, size := range sizes {
			v := value(size)
			keys := make([]string, 100)
			for i := range keys {
				keys[i] = fmt.Sprintf("bench-%d-%d", size, i)
				_ = larderStore.Set(ctx, keys[i], v, 0)
			}
			name := fmt.Sprintf("%dKiB/g%d", size>>10, g)
			b.Run("get/larder/"+name, func(b *testing.B) {
				parallel(b, g, func(i int) error { _, err := larderStore.Get(ctx, keys[i%100]); return err })
			})
			b.Run("get/go-redis/"+name, func(b *testing.B) {
				parallel(b, g, func(i int) error { return rc.Get(ctx, keys[i%100]).Err() })
			})
			b.Run("set/larder/"+name, func(b *testing.B) {
				parallel(b, g, func(i int) error { return larderStore.Set(ctx, keys[i%100], v, 0) })
			})
			b.Run("set/go-redis/"+name, func(b *testing.B) {
				parallel(b, g, func(i int) error { return rc.Set(ctx, keys[i%100], v, 0).Err() })
			})
			b.Run("multiget100/larder/"+name, func(b *testing.B) {
				parallel(b, g, func(int) error { _, err := larderStore.GetMulti(ctx, keys); return err })
			})
			b.Run("multiget100/go-redis/"+name, func(b *testing.B) {
				parallel(b, g, func(int) error { return rc.MGet(ctx, keys...).Err() })
			})
			cache := larder.New(larderStore)
			_ = cache.Set(ctx, "fetch", v)
			b.Run("fetch-hit/larder/"+name, func(b *testing.B) {
				parallel(b, g, func(int) error {
					_, err := cache.Fetch(ctx, "fetch", time.Minute, func(context.Context) (any, error) { return v, nil })
					return err
				})
			})
		}
	}
}

func BenchmarkMemoryHit(b *testing.B) {
	ctx := context.Background()
	const n = 10000
	keys := make([]string, n)
	v := value(100)
	mem := stores.NewMemory(256<<20, 0)
	ot := otter.Must(&otter.Options[string, []byte]{MaximumSize: 2 * n})
	rs, err := ristretto.NewCache(&ristretto.Config[string, []byte]{NumCounters: 20 * n, MaxCost: 256 << 20, BufferItems: 64})
	if err != nil {
		b.Fatal(err)
	}
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%d", i)
		_ = mem.Set(ctx, keys[i], v, 0)
		ot.Set(keys[i], v)
		rs.Set(keys[i], v, int64(len(v)))
	}
	rs.Wait()
	for _, g := range []int{1, 50} {
		name := fmt.Sprintf("g%d", g)
		b.Run("larder-memory/"+name, func(b *testing.B) {
			parallel(b, g, func(i int) error { _, err := mem.Get(ctx, keys[i%n]); return err })
		})
		b.Run("otter/"+name, func(b *testing.B) {
			parallel(b, g, func(i int) error { ot.GetIfPresent(keys[i%n]); return nil })
		})
		b.Run("ristretto/"+name, func(b *testing.B) {
			parallel(b, g, func(i int) error { rs.Get(keys[i%n]); return nil })
		})
	}
}
