// Benchmarks, side by side in one run (the machine is shared: read them as ratios): larder's memcached and Redis
// stores against gomemcache and go-redis on the same servers (get, set, multi-get of 100, Cache.Fetch hit; 1 KiB
// and 64 KiB values; 1 and 50 goroutines), and the memory store's hit (and a Cache.Fetch hit over it) against
// otter and ristretto.
//
//	go test -run XXX -bench . -benchtime 2s ./bench/
//	ROUNDS=6 bash bench/rounds.sh; MEMORY=1 ROUNDS=6 bash bench/rounds.sh      (interleaved rounds, medians)
//
// Servers are started on loopback by the benchmark itself.
package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
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
	heap := liveHeap(os.Getenv("LARDER_BENCH_LIVE_HEAP_MIB"))
	code := m.Run()
	runtime.KeepAlive(heap)
	testservers.StopAll()
	os.Exit(code)
}

// liveHeap keeps mib MiB live for the whole run (LARDER_BENCH_LIVE_HEAP_MIB; none by default), as a service's
// own data would be: with a heap of a few MB the runtime's collector runs every few multi-gets of 100 x 64 KiB
// and returns memory to the system that the next call faults back in (page faults, 2026-11-25: ~400 per call
// for larder, ~300 for gomemcache, whose bigger allocations keep a bigger heap goal), and that, not the
// client's own work, is most of such a cell's CPU. Both sides of every cell run over the same heap.
func liveHeap(mib string) [][]byte {
	n, err := strconv.Atoi(mib)
	if err != nil || n <= 0 {
		return nil
	}
	heap := make([][]byte, n)
	for i := range heap {
		heap[i] = make([]byte, 1<<20)
		for j := 0; j < len(heap[i]); j += 4096 {
			heap[i][j] = 1 // touched, so that it is resident like a service's data
		}
	}
	return heap
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
	user, sys, faults := Usage()
	defer reportCPU(b, user+sys, serverCPU(), faults)
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

// reportCPU reports the CPU time per op of this process and of the servers, and this process's page faults
// per op, since the given readings.
func reportCPU(b *testing.B, process, server time.Duration, faults int64) {
	if b.N > 0 {
		user, sys, nowFaults := Usage()
		b.ReportMetric(float64(user+sys-process)/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64(serverCPU()-server)/float64(b.N), "server-cpu-ns/op")
		b.ReportMetric(float64(nowFaults-faults)/float64(b.N), "faults/op")
	}
}

// incumbentFirst, set by bench/rounds.sh on every other round, runs each cell's incumbent before larder: the first
// of two runs on a fresh connection and server measured slower (memcached get 1 KiB/1, 2026-11-25: larder first
// 52/54/52/35/56/39 µs, the same larder run again after gomemcache 46/23/37/40/22/45 µs), so a fixed order
// favoured whichever side ran second.
var incumbentFirst = os.Getenv("LARDER_BENCH_INCUMBENT_FIRST") == "1"

// pair runs one cell's two sides, larder's and the incumbent's, in this round's order, after warming both up.
func pair(b *testing.B, op, incumbent, name string, g int, larderOp, incumbentOp func(i int) error) {
	warmed := false
	run := func(who string, f func(i int) error) {
		b.Run(op+"/"+who+"/"+name, func(b *testing.B) {
			if !warmed {
				warmed = true
				warmUp(g, larderOp, incumbentOp)
				b.ResetTimer()
			}
			parallel(b, g, f)
		})
	}
	if incumbentFirst {
		run(incumbent, incumbentOp)
		run("larder", larderOp)
	} else {
		run("larder", larderOp)
		run(incumbent, incumbentOp)
	}
}

// warmUp runs both sides of a cell for a while, alternating, before either is timed: the servers' and the
// connections' first requests (new connections, the servers' first lookups, the process's first GC cycles)
// then fall on neither side's figure. Only a cell that runs is warmed (a -bench filter skips the rest).
func warmUp(g int, ops ...func(i int) error) {
	for range 2 {
		for _, op := range ops {
			parallelFor(g, 50*time.Millisecond, op)
		}
	}
}

// parallelFor runs op on each of g goroutines until d has passed (errors are the timed runs' business).
func parallelFor(g int, d time.Duration, op func(i int) error) {
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range g {
		wg.Go(func() {
			for i := 0; time.Now().Before(end); i++ {
				_ = op(i)
			}
		})
	}
	wg.Wait()
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
			larderGet := func(i int) error { _, err := larderStore.Get(ctx, keys[i%100]); return err }
			gmGet := func(i int) error { _, err := gm.Get(keys[i%100]); return err }
			pair(b, "get", "gomemcache", name, g, larderGet, gmGet)
			pair(b, "set", "gomemcache", name, g,
				func(i int) error { return larderStore.Set(ctx, keys[i%100], v, 0) },
				func(i int) error { return gm.Set(&memcache.Item{Key: keys[i%100], Value: v}) })
			pair(b, "multiget100", "gomemcache", name, g,
				func(int) error { _, err := larderStore.GetMulti(ctx, keys); return err },
				func(int) error { _, err := gm.GetMulti(keys); return err })
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
			larderGet := func(i int) error { _, err := larderStore.Get(ctx, keys[i%100]); return err }
			rcGet := func(i int) error { return rc.Get(ctx, keys[i%100]).Err() }
			pair(b, "get", "go-redis", name, g, larderGet, rcGet)
			pair(b, "set", "go-redis", name, g,
				func(i int) error { return larderStore.Set(ctx, keys[i%100], v, 0) },
				func(i int) error { return rc.Set(ctx, keys[i%100], v, 0).Err() })
			pair(b, "multiget100", "go-redis", name, g,
				func(int) error { _, err := larderStore.GetMulti(ctx, keys); return err },
				func(int) error { return rc.MGet(ctx, keys...).Err() })
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
	// Cache.Fetch hits over a memory store of the same keys: the entry's header read and its value decoded on
	// every hit (no incumbent; beside the stores' gets to show what the Cache layer adds).
	cache := larder.New(stores.NewMemory(256<<20, 0))
	for _, k := range keys {
		if err := cache.Set(ctx, k, v); err != nil {
			b.Fatal(err)
		}
	}
	loader := func(context.Context) (any, error) { return v, nil }
	for _, g := range []int{1, 50} {
		name := fmt.Sprintf("g%d", g)
		b.Run("larder-fetch/"+name, func(b *testing.B) {
			parallel(b, g, func(i int) error { _, err := cache.Fetch(ctx, keys[i%n], time.Minute, loader); return err })
		})
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
