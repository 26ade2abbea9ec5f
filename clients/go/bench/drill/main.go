// Command drill is the Go client's fetch drill (issue 33): it loads a Cache steadily with Fetch from many
// goroutines while a harness (bench/drills.py) freezes, kills, slows or restarts the store behind larder-faults,
// and prints what it saw, one line of JSON per interval on standard output, then a total. The contract is the
// same for every language's drill program:
//
//	go run ./bench/drill --store memcached://127.0.0.1:PORT --seconds 10 [--workers 16] [--keys 50]
//	    [--ttl-ms 60000] [--loader-ms 20] [--interval-ms 250]
//
// Each worker fetches "drill:<n>" for n uniform in [0, keys) with the default options (outage memory on); the
// loader counts a load, sleeps loader-ms and returns a ~1 KiB query result. A fetch that returns an error (or a
// value that is not the key's) counts an error. Lines:
//
//	{"t_ms":250,"calls":1234,"errors":0,"loads":3,"p50_ms":0.12,"p99_ms":1.5,"max_ms":21.3}
//	{"done":true,"calls":48000,"errors":0,"loads":50}
//
// The program stops within about a second after --seconds even when the store is frozen: calls still in flight
// then are abandoned (not counted). Logs, and the cache's stats at the end, go to standard error.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	larder "github.com/larder-cache/larder/clients/go"
	"github.com/larder-cache/larder/clients/go/format"
)

// config is the command line.
type config struct {
	store      string
	seconds    float64
	workers    int
	keys       int
	ttlMS      int
	loaderMS   int
	intervalMS int
}

const usageText = `usage: drill --store URL --seconds S [--workers 16] [--keys 50] [--ttl-ms 60000] [--loader-ms 20] [--interval-ms 250]

The Go client's fetch drill: WORKERS goroutines call Cache.Fetch("drill:<n>", ttl, loader) with n uniform in
[0, KEYS) until S seconds have passed, over a cache opened on the store URL with default options (the outage
memory on). The loader counts a load, sleeps LOADER-MS and returns a ~1 KiB query result. Every INTERVAL-MS one
line of JSON goes to standard output:
  {"t_ms", "calls", "errors", "loads", "p50_ms", "p99_ms", "max_ms"}
and at the end {"done": true, "calls", "errors", "loads"} (exit 0, errors or not). Logs go to standard error.
Bad arguments: a usage line on standard error, exit 2.

options:
`

// parseArgs reads the command line; help is true for --help.
func parseArgs(args []string, stderr io.Writer) (cfg config, help bool, err error) {
	fs := flag.NewFlagSet("drill", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&cfg.store, "store", "", "the store's URL, e.g. memcached://127.0.0.1:11211 or redis://127.0.0.1:6379/0 (required)")
	fs.Float64Var(&cfg.seconds, "seconds", 0, "how long to run, in seconds (required, > 0)")
	fs.IntVar(&cfg.workers, "workers", 16, "concurrent callers (goroutines)")
	fs.IntVar(&cfg.keys, "keys", 50, "distinct keys drill:0 .. drill:<keys-1>")
	fs.IntVar(&cfg.ttlMS, "ttl-ms", 60000, "the entries' time to live, in milliseconds")
	fs.IntVar(&cfg.loaderMS, "loader-ms", 20, "how long the loader sleeps, in milliseconds")
	fs.IntVar(&cfg.intervalMS, "interval-ms", 250, "the reporting interval, in milliseconds")
	usage := func() {
		fmt.Fprint(stderr, usageText)
		fs.SetOutput(stderr)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return cfg, true, nil
		}
		return cfg, false, err
	}
	switch {
	case fs.NArg() > 0:
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case cfg.store == "":
		err = errors.New("--store is required")
	case !(cfg.seconds > 0) || math.IsInf(cfg.seconds, 0):
		err = errors.New("--seconds must be a number > 0")
	case cfg.workers < 1:
		err = errors.New("--workers must be at least 1")
	case cfg.keys < 1:
		err = errors.New("--keys must be at least 1")
	case cfg.ttlMS < 1:
		err = errors.New("--ttl-ms must be at least 1")
	case cfg.loaderMS < 0:
		err = errors.New("--loader-ms must be at least 0")
	case cfg.intervalMS < 1:
		err = errors.New("--interval-ms must be at least 1")
	}
	return cfg, false, err
}

// bucket is what happened in one interval.
type bucket struct {
	calls, errors, loads int64
	latencies            []float64 // ms, of the calls completed in the interval
}

// intervals holds the buckets not printed yet, by index (time since start / interval): each call and load goes to
// the interval it happened in, even when the printing runs late on a loaded machine.
type intervals struct {
	mu      sync.Mutex
	start   time.Time
	every   time.Duration
	buckets map[int64]*bucket
	taken   int64 // the last interval taken: what comes in for it after all goes to the next one
}

// at is the bucket of the interval holding time t (the caller holds mu).
func (iv *intervals) at(t time.Time) *bucket {
	k := max(int64(t.Sub(iv.start)/iv.every), iv.taken+1)
	b := iv.buckets[k]
	if b == nil {
		b = &bucket{}
		iv.buckets[k] = b
	}
	return b
}

func (iv *intervals) call(done time.Time, ms float64, failed bool) {
	iv.mu.Lock()
	b := iv.at(done)
	b.calls++
	if failed {
		b.errors++
	}
	b.latencies = append(b.latencies, ms)
	iv.mu.Unlock()
}

func (iv *intervals) load(t time.Time) {
	iv.mu.Lock()
	iv.at(t).loads++
	iv.mu.Unlock()
}

// take removes and returns interval k's bucket.
func (iv *intervals) take(k int64) bucket {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	b := iv.buckets[k]
	delete(iv.buckets, k)
	iv.taken = k
	if b == nil {
		return bucket{}
	}
	return *b
}

type intervalLine struct {
	TMS    int64   `json:"t_ms"`
	Calls  int64   `json:"calls"`
	Errors int64   `json:"errors"`
	Loads  int64   `json:"loads"`
	P50MS  float64 `json:"p50_ms"`
	P99MS  float64 `json:"p99_ms"`
	MaxMS  float64 `json:"max_ms"`
}

type doneLine struct {
	Done   bool  `json:"done"`
	Calls  int64 `json:"calls"`
	Errors int64 `json:"errors"`
	Loads  int64 `json:"loads"`
}

// percentile is the nearest-rank percentile p (0 < p <= 1) of sorted latencies (0 when there are none).
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func round3(ms float64) float64 { return math.Round(ms*1000) / 1000 }

// emit writes one JSON line to standard output at once (os.Stdout is unbuffered).
func emit(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintln(os.Stderr, "drill: encoding a line:", err)
		return
	}
	_, _ = os.Stdout.Write(append(b, '\n'))
}

// result is the loader's value for key n: a query result of about 1 KiB.
func result(n int) map[string]any {
	rows := make([]any, 25)
	for j := range rows {
		rows[j] = map[string]any{"i": j, "name": "row " + strconv.Itoa(j), "score": float64(j) * 1.5}
	}
	return map[string]any{"id": n, "rows": rows}
}

// idOf is the "id" of a value: the loader's own map, or what a read decodes (a *format.Map, its integers int64
// or uint64).
func idOf(v any) (int64, bool) {
	var id any
	switch m := v.(type) {
	case map[string]any:
		id = m["id"]
	case *format.Map:
		id, _ = m.Get("id")
	default:
		return 0, false
	}
	switch id := id.(type) {
	case int:
		return int64(id), true
	case int64:
		return id, true
	case uint64:
		return int64(id), id <= math.MaxInt64
	}
	return 0, false
}

func main() {
	cfg, help, err := parseArgs(os.Args[1:], os.Stderr)
	if help {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "drill: %v\n%s(--help for more)\n", err, usageText[:strings.IndexByte(usageText, '\n')+1])
		os.Exit(2)
	}

	start := time.Now()
	end := start.Add(time.Duration(cfg.seconds * float64(time.Second)))
	runCtx, stop := context.WithDeadline(context.Background(), end)
	defer stop()

	cache, err := larder.Open(runCtx, cfg.store)
	if err != nil {
		fmt.Fprintf(os.Stderr, "drill: opening the store: %v\n", err)
		os.Exit(2)
	}
	fmt.Fprintf(os.Stderr, "drill: %s, %d workers, %d keys, ttl %d ms, loader %d ms, %g s\n",
		cfg.store, cfg.workers, cfg.keys, cfg.ttlMS, cfg.loaderMS, cfg.seconds)

	interval := time.Duration(cfg.intervalMS) * time.Millisecond
	iv := &intervals{start: start, every: interval, buckets: map[int64]*bucket{}, taken: -1}
	var logged atomic.Int64 // error messages written to stderr (a few, not one per call)
	ttl := time.Duration(cfg.ttlMS) * time.Millisecond
	loaderSleep := time.Duration(cfg.loaderMS) * time.Millisecond
	logError := func(format string, args ...any) {
		if logged.Add(1) <= 20 {
			fmt.Fprintf(os.Stderr, "drill: "+format+"\n", args...)
		}
	}

	var workers sync.WaitGroup
	for range cfg.workers {
		workers.Go(func() {
			for runCtx.Err() == nil {
				n := rand.IntN(cfg.keys)
				loader := func(ctx context.Context) (any, error) {
					now := time.Now()
					if !now.Before(end) {
						// The run is over (its context's deadline may not have fired yet): no load to count.
						return nil, context.DeadlineExceeded
					}
					iv.load(now)
					t := time.NewTimer(loaderSleep)
					defer t.Stop()
					select {
					case <-t.C:
					case <-ctx.Done():
						return nil, ctx.Err()
					}
					return result(n), nil
				}
				key := "drill:" + strconv.Itoa(n)
				t0 := time.Now()
				v, err := cache.Fetch(runCtx, key, ttl, loader)
				done := time.Now()
				if !done.Before(end) {
					// Ended after the run: abandoned by its end, not counted.
					return
				}
				failed := err != nil
				if failed {
					logError("fetch %s: %v", key, err)
				} else if id, ok := idOf(v); !ok || id != int64(n) {
					failed = true
					logError("fetch %s: not its value (a %T)", key, v)
				}
				iv.call(done, float64(done.Sub(t0).Nanoseconds())/1e6, failed)
			}
		})
	}

	// Interval k ends at start + (k+1)*interval, the last one at the end of the run; its line is printed once that
	// time has passed.
	var total doneLine
	last := int64((end.Sub(start) + interval - 1) / interval)
	for k := range last {
		at := start.Add(time.Duration(k+1) * interval)
		if at.After(end) {
			at = end
		}
		time.Sleep(time.Until(at))
		b := iv.take(k)
		slices.Sort(b.latencies)
		line := intervalLine{TMS: at.Sub(start).Milliseconds(), Calls: b.calls, Errors: b.errors, Loads: b.loads}
		if n := len(b.latencies); n > 0 {
			line.P50MS = round3(percentile(b.latencies, 0.50))
			line.P99MS = round3(percentile(b.latencies, 0.99))
			line.MaxMS = round3(b.latencies[n-1])
		}
		emit(line)
		total.Calls += b.calls
		total.Errors += b.errors
		total.Loads += b.loads
	}
	stop()
	total.Done = true
	emit(total)

	// Give the workers a moment to see the end; a call stuck on a frozen store is abandoned.
	finished := make(chan struct{})
	go func() {
		workers.Wait()
		_ = cache.Close()
		close(finished)
	}()
	select {
	case <-finished:
	case <-time.After(time.Second):
		fmt.Fprintln(os.Stderr, "drill: calls still in flight at the end were abandoned")
	}
	st := cache.Stats()
	fmt.Fprintf(os.Stderr, "drill: cache stats: hits %d, misses %d, stale served %d, loads %d, coalesced waits %d, "+
		"coalesced across processes %d, store errors %d, outage kept %d, outage served %d\n",
		st.Hits, st.Misses, st.StaleServed, st.Loads, st.CoalescedWaits, st.CoalescedAcrossProcesses,
		st.StoreErrors, st.OutageKept, st.OutageServed)
	os.Exit(0)
}
