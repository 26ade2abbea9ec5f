// Cache and Fetch: values round-trip, versions and namespaces separate entries, and the one lock policy
// (STORES.md §3) holds in-process and across independent store clients on real shared stores: a burst of cold
// misses loads once, a stale entry is refreshed once while the others get it at once.
package larder_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	larder "github.com/larder-cache/larder/clients/go"
	"github.com/larder-cache/larder/clients/go/format"
	"github.com/larder-cache/larder/clients/go/internal/testservers"
	"github.com/larder-cache/larder/clients/go/stores"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testservers.StopAll()
	os.Exit(code)
}

func memoryCache(t *testing.T, options ...larder.Option) *larder.Cache {
	c, err := larder.Open(context.Background(), "memory://", options...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGetSetAndFriends(t *testing.T) {
	ctx := context.Background()
	c := memoryCache(t)
	if _, ok := c.Get(ctx, "nothing"); ok {
		t.Fatal("hit on an empty cache")
	}
	value := format.NewMap("id", int64(7), "name", "Ada", "tags", []any{"a", "b"})
	if err := c.Set(ctx, "user:7", value, larder.TTL(time.Minute), larder.Version("v1"), larder.Tags("user:7")); err != nil {
		t.Fatal(err)
	}
	got, ok := c.Get(ctx, "user:7")
	if !ok {
		t.Fatal("miss")
	}
	if m := got.(*format.Map); m.Len() != 3 {
		t.Fatalf("%#v", got)
	}
	if _, ok := c.Get(ctx, "user:7", larder.Version("v2")); ok {
		t.Fatal("another version was a hit")
	}
	if _, ok := c.Get(ctx, "user:7", larder.Version("v1")); !ok {
		t.Fatal("its version was a miss")
	}
	if _, ok := c.WithNamespace("other").Get(ctx, "user:7"); ok {
		t.Fatal("namespaces do not separate keys")
	}
	if ok, _ := c.Add(ctx, "user:7", 1); ok {
		t.Fatal("add over a value")
	}
	if n, _, _ := c.Incr(ctx, "hits", 3, 0, true); n != 3 {
		t.Fatalf("incr %d", n)
	}
	if v, _ := c.Get(ctx, "hits"); v != int64(3) {
		t.Fatalf("a counter reads %#v", v)
	}
	if p, _ := c.PurgeTag(ctx, "user:7"); p.Count != 1 {
		t.Fatalf("purge %+v", p)
	}
	if _, ok := c.Get(ctx, "user:7"); ok {
		t.Fatal("purged value still there")
	}
	all := c.GetMulti(ctx, []string{"hits", "none"})
	if len(all) != 1 || all["hits"] != int64(3) {
		t.Fatalf("%v", all)
	}
	// A key of any length or shape works: the cache makes it safe.
	long := strings.Repeat("x", 400) + " spaces \n"
	if err := c.Set(ctx, long, "x"); err != nil {
		t.Fatal(err)
	}
	if v, _ := c.Get(ctx, long); v != "x" {
		t.Fatal("unsafe key not made safe")
	}
}

func TestTyped(t *testing.T) {
	type User struct {
		ID   int64  `msgpack:"id"`
		Name string `msgpack:"name"`
	}
	ctx := context.Background()
	c := memoryCache(t)
	users := larder.Typed[User]{C: c}
	if err := users.Set(ctx, "u", User{7, "Ada"}); err != nil {
		t.Fatal(err)
	}
	if u, ok := users.Get(ctx, "u"); !ok || u != (User{7, "Ada"}) {
		t.Fatalf("%+v %v", u, ok)
	}
	// The generic view reads it as the map other languages see.
	v, _ := c.Get(ctx, "u")
	if name, _ := v.(*format.Map).Get("name"); name != "Ada" {
		t.Fatalf("%#v", v)
	}
	calls := 0
	for range 3 {
		u, err := users.Fetch(ctx, "f", time.Minute, func(context.Context) (User, error) { calls++; return User{1, "x"}, nil })
		if err != nil || u.ID != 1 {
			t.Fatal(err)
		}
	}
	if calls != 1 {
		t.Fatalf("loader ran %d times", calls)
	}
}

func TestFetchCoalescesInProcess(t *testing.T) {
	ctx := context.Background()
	c := memoryCache(t)
	var loads atomic.Int32
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := c.Fetch(ctx, "k", time.Minute, func(context.Context) (any, error) {
				loads.Add(1)
				time.Sleep(50 * time.Millisecond)
				return "value", nil
			})
			if err != nil || v != "value" {
				t.Errorf("%v %v", v, err)
			}
		}()
	}
	wg.Wait()
	if loads.Load() != 1 {
		t.Fatalf("loader ran %d times", loads.Load())
	}
}

func TestFetchLoaderErrorsReachEveryWaiterAndCacheNothing(t *testing.T) {
	ctx := context.Background()
	c := memoryCache(t)
	boom := errors.New("boom")
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Fetch(ctx, "k", time.Minute, func(context.Context) (any, error) {
				time.Sleep(20 * time.Millisecond)
				return nil, boom
			})
			if !errors.Is(err, boom) {
				t.Errorf("%v", err)
			}
		}()
	}
	wg.Wait()
	if _, ok := c.Get(ctx, "k"); ok {
		t.Fatal("an error was cached")
	}
	// A panicking loader releases its waiters with an error, and its lock.
	func() {
		defer func() { _ = recover() }()
		_, _ = c.Fetch(ctx, "p", time.Minute, func(context.Context) (any, error) { panic("loader bug") })
	}()
	v, err := c.Fetch(ctx, "p", time.Minute, func(context.Context) (any, error) { return 1, nil })
	if err != nil || v != 1 {
		t.Fatalf("after a panic: %v %v", v, err)
	}
}

func TestFetchServesStaleWhileOneRefreshes(t *testing.T) {
	ctx := context.Background()
	c := memoryCache(t)
	_, _ = c.Fetch(ctx, "k", 50*time.Millisecond, func(context.Context) (any, error) { return "old", nil }, larder.Stale(time.Minute))
	time.Sleep(80 * time.Millisecond)
	var loads atomic.Int32
	var wg sync.WaitGroup
	results := make(chan any, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, _ := c.Fetch(ctx, "k", time.Minute, func(context.Context) (any, error) {
				loads.Add(1)
				time.Sleep(100 * time.Millisecond)
				return "new", nil
			}, larder.Stale(time.Minute))
			results <- v
		}()
	}
	wg.Wait()
	close(results)
	old := 0
	for v := range results {
		if v == "old" {
			old++
		}
	}
	if loads.Load() != 1 || old < 19 {
		t.Fatalf("loads %d, stale served %d", loads.Load(), old)
	}
	if v, _ := c.Get(ctx, "k"); v != "new" {
		t.Fatalf("refreshed value %v", v)
	}
}

// Independent clients of one shared store stand for processes: each has its own in-flight table and its own
// connections, so only the store lock can coalesce them.
func testLockPolicyAcrossClients(t *testing.T, url string) {
	ctx := context.Background()
	key := fmt.Sprintf("burst-%d", rand.Int63())
	var loads atomic.Int32
	var wg sync.WaitGroup
	const clients = 8
	for i := range clients {
		c, err := larder.Open(ctx, url+sep(url)+"timeout=2s")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v, err := c.Fetch(ctx, key, time.Minute, func(context.Context) (any, error) {
					loads.Add(1)
					time.Sleep(150 * time.Millisecond)
					return fmt.Sprintf("from %d", i), nil
				})
				if err != nil || v == nil {
					t.Errorf("%v %v", v, err)
				}
			}()
		}
	}
	wg.Wait()
	if loads.Load() != 1 {
		t.Fatalf("a burst of cold misses over %d clients loaded %d times", clients, loads.Load())
	}
	// A stale entry: refreshed once, every other client served the stale value at once.
	stale := key + "-stale"
	c0, _ := larder.Open(ctx, url)
	defer c0.Close()
	_ = c0.Set(ctx, stale, "old", larder.TTL(time.Millisecond), larder.Stale(time.Minute))
	time.Sleep(20 * time.Millisecond)
	loads.Store(0)
	var served atomic.Int32
	for range clients {
		c, _ := larder.Open(ctx, url+sep(url)+"timeout=2s")
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			v, _ := c.Fetch(ctx, stale, time.Minute, func(context.Context) (any, error) {
				loads.Add(1)
				time.Sleep(300 * time.Millisecond)
				return "new", nil
			}, larder.Stale(time.Minute))
			if v == "old" && time.Since(start) < 200*time.Millisecond {
				served.Add(1)
			}
		}()
	}
	wg.Wait()
	if loads.Load() != 1 || served.Load() != clients-1 {
		t.Fatalf("stale refresh: %d loads, %d served stale at once", loads.Load(), served.Load())
	}
}

func sep(url string) string {
	if strings.Contains(url, "?") {
		return "&"
	}
	return "?"
}

func TestLockPolicyOnMemcached(t *testing.T) {
	t.Parallel()
	testLockPolicyAcrossClients(t, "memcached://"+testservers.Memcached(t, "lock"))
}

func TestLockPolicyOnRedis(t *testing.T) {
	t.Parallel()
	testLockPolicyAcrossClients(t, testservers.Redis(t, "lock"))
}

func TestReadsAbsorbStoreFailures(t *testing.T) {
	ctx := context.Background()
	c, err := larder.Open(ctx, "memcached://127.0.0.1:1?timeout=100ms&connect_timeout=100ms")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Get(ctx, "k"); ok {
		t.Fatal("hit from a dead store")
	}
	v, err := c.Fetch(ctx, "k", time.Minute, func(context.Context) (any, error) { return "computed", nil })
	if err != nil || v != "computed" {
		t.Fatalf("fetch over a dead store: %v %v", v, err)
	}
	if c.Stats().StoreErrors == 0 {
		t.Fatal("store errors not counted")
	}
	if err := c.Set(ctx, "k", 1); stores.KindOf(err) == "" {
		t.Fatalf("a failed write is not the store's error: %v", err)
	}
}

// spec/STORES.md §8: a Cache on memory:// does not compress unless a compressor is named; on a shared store it
// tries lz4.
func TestCompressionByDefault(t *testing.T) {
	ctx := context.Background()
	text := strings.Repeat("larder ", 1000) // 7,000 bytes that LZ4 shrinks a lot
	compressorOf := func(s stores.Store, key string) format.Compressor {
		t.Helper()
		data, err := s.Get(ctx, key)
		if err != nil || data == nil {
			t.Fatalf("%q not stored: %v", key, err)
		}
		h, err := format.ReadHeader(data)
		if err != nil {
			t.Fatal(err)
		}
		return h.Compressor
	}
	memory := memoryCache(t)
	if err := memory.Set(ctx, "plain", text); err != nil {
		t.Fatal(err)
	}
	if got := compressorOf(memory.Store(), "plain"); got != format.None {
		t.Fatalf("memory:// by default: compressor %v, want none", got)
	}
	named := larder.New(memory.Store(), larder.WithCompressor(format.LZ4, 1024))
	if err := named.Set(ctx, "named", text); err != nil {
		t.Fatal(err)
	}
	if got := compressorOf(memory.Store(), "named"); got != format.LZ4 {
		t.Fatalf("memory:// with lz4 named: compressor %v", got)
	}
	if got, ok := memory.Get(ctx, "named"); !ok || got != text {
		t.Fatal("a compressed entry reads back alike")
	}
	shared, err := larder.Open(ctx, "memcached://"+testservers.Memcached(t, "compress"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shared.Close() }()
	if err := shared.Set(ctx, "shared", text); err != nil {
		t.Fatal(err)
	}
	if got := compressorOf(shared.Store(), "shared"); got != format.LZ4 {
		t.Fatalf("memcached by default: compressor %v, want lz4", got)
	}
}
