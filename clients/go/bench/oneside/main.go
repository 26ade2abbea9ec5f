// Command oneside runs one side of one benchmark cell (larder's store or the incumbent client) alone in its own
// process against a server already running, so that its work can be counted without the other side's: wall time,
// user and system CPU and minor page faults per op from getrusage, and, around it, `perf stat -e
// 'syscalls:sys_enter_*'` or `strace -c -f -p` (with -pause, attached after the warm-up). The benchmarks in
// bench_test.go run both sides in one process, warmed up together, which is right for ratios and wrong for
// counting syscalls per side.
//
//	memcached -l 127.0.0.1 -p 23411 -U 0 -t 2 &
//	go run ./bench/oneside -who larder -store memcached -addr 127.0.0.1:23411 -op multiget -size 65536 -n 400
//	go run ./bench/oneside -who incumbent -store memcached -addr 127.0.0.1:23411 -op multiget -size 65536 -n 400
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/redis/go-redis/v9"

	"github.com/larder-cache/larder/clients/go/bench"
	"github.com/larder-cache/larder/clients/go/stores"
)

type ops struct {
	get, set func(ctx context.Context, key string) error
	multi    func(ctx context.Context) error
}

func main() {
	who := flag.String("who", "larder", "larder or incumbent (gomemcache, go-redis)")
	store := flag.String("store", "memcached", "memcached or redis")
	addr := flag.String("addr", "", "the server's host:port")
	op := flag.String("op", "get", "get, set or multiget (of 100 keys)")
	size := flag.Int("size", 1024, "value size in bytes")
	n := flag.Int("n", 10000, "operations per goroutine (after a tenth as many to warm up)")
	goroutines := flag.Int("g", 1, "goroutines")
	liveHeapMiB := flag.Int("live-heap-mib", 0, "MiB kept live for the run, as a service's data would be")
	pause := flag.Bool("pause", false, "after the warm-up, wait for a line on stdin (to attach strace -p)")
	flag.Parse()
	if *addr == "" {
		fmt.Fprintln(os.Stderr, "oneside: -addr is required")
		os.Exit(2)
	}
	heap := make([][]byte, max(0, *liveHeapMiB))
	for i := range heap {
		heap[i] = make([]byte, 1<<20)
		for j := 0; j < len(heap[i]); j += 4096 {
			heap[i][j] = 1
		}
	}
	value := make([]byte, *size)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = fmt.Sprintf("oneside-%d-%d", *size, i)
	}
	o, err := open(*who, *store, *addr, *goroutines, value, keys)
	if err != nil {
		fmt.Fprintln(os.Stderr, "oneside:", err)
		os.Exit(1)
	}
	ctx := context.Background()
	for _, k := range keys {
		if err := o.set(ctx, k); err != nil {
			fmt.Fprintln(os.Stderr, "oneside: filling the keys:", err)
			os.Exit(1)
		}
	}
	run := func(count int) error {
		var wg sync.WaitGroup
		errs := make(chan error, *goroutines)
		for range *goroutines {
			wg.Go(func() {
				for i := range count {
					var err error
					switch *op {
					case "get":
						err = o.get(ctx, keys[i%len(keys)])
					case "set":
						err = o.set(ctx, keys[i%len(keys)])
					default:
						err = o.multi(ctx)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		return <-errs
	}
	if err := run(max(1, *n/10)); err != nil {
		fmt.Fprintln(os.Stderr, "oneside:", err)
		os.Exit(1)
	}
	if *pause {
		fmt.Fprintln(os.Stderr, "warmed up; press enter")
		_, _ = fmt.Scanln()
	}
	u0, s0, f0 := bench.Usage()
	start := time.Now()
	if err := run(*n); err != nil {
		fmt.Fprintln(os.Stderr, "oneside:", err)
		os.Exit(1)
	}
	elapsed := time.Since(start)
	u1, s1, f1 := bench.Usage()
	count := float64(*n * *goroutines)
	fmt.Printf("%s %s %s %d B g%d: wall %.1f us/op, user %.1f us/op, sys %.1f us/op, %.1f faults/op\n",
		*who, *store, *op, *size, *goroutines, float64(elapsed.Nanoseconds())/count/1e3,
		float64((u1-u0).Nanoseconds())/count/1e3, float64((s1-s0).Nanoseconds())/count/1e3, float64(f1-f0)/count)
	runtime.KeepAlive(heap)
}

// open makes the operations of one side, with the benchmarks' pool sizes and timeouts.
func open(who, store, addr string, goroutines int, value []byte, keys []string) (ops, error) {
	switch {
	case who == "larder":
		url := fmt.Sprintf("memcached://%s?pool=%d&timeout=10s&prefix_purge=false", addr, max(2, goroutines))
		if store == "redis" {
			url = fmt.Sprintf("redis://%s/0?pool=%d&timeout=10s", addr, max(4, goroutines))
		}
		s, err := stores.Open(context.Background(), url)
		if err != nil {
			return ops{}, err
		}
		return ops{
			get:   func(ctx context.Context, k string) error { _, err := s.Get(ctx, k); return err },
			set:   func(ctx context.Context, k string) error { return s.Set(ctx, k, value, 0) },
			multi: func(ctx context.Context) error { _, err := s.GetMulti(ctx, keys); return err },
		}, nil
	case store == "memcached":
		c := memcache.New(addr)
		c.MaxIdleConns = max(2, goroutines)
		c.Timeout = 2 * time.Second
		return ops{
			get:   func(_ context.Context, k string) error { _, err := c.Get(k); return err },
			set:   func(_ context.Context, k string) error { return c.Set(&memcache.Item{Key: k, Value: value}) },
			multi: func(context.Context) error { _, err := c.GetMulti(keys); return err },
		}, nil
	case store == "redis":
		c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: max(4, goroutines), ReadTimeout: 2 * time.Second})
		return ops{
			get:   func(ctx context.Context, k string) error { return c.Get(ctx, k).Err() },
			set:   func(ctx context.Context, k string) error { return c.Set(ctx, k, value, 0).Err() },
			multi: func(ctx context.Context) error { return c.MGet(ctx, keys...).Err() },
		}, nil
	}
	return ops{}, fmt.Errorf("unknown store %q", store)
}
