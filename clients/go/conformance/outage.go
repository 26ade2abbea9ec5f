// outage.json (spec/vectors/README.md, "outage.json"): Fetch while the store fails. Each case puts larder-faults
// (LARDER_FAULTS) between a faulted cache and a real memcached or Redis (LARDER_CONFORMANCE_MEMCACHED,
// LARDER_CONFORMANCE_REDIS), opens a direct cache on the server itself under the same fresh namespace, and runs
// its steps: faults, bursts of concurrent Fetch calls (every caller gets the value, each round in time, the loader
// run as often as the case says), direct writes, reads and flushes, and waits for a value after recovery.
package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	larder "github.com/larder-cache/larder/clients/go"
	"github.com/larder-cache/larder/clients/go/internal/faultsproc"
)

type outageFile struct {
	Cases []outageCase `json:"cases"`
}

type outageCase struct {
	Name     string       `json:"name"`
	Store    string       `json:"store"`
	URLQuery string       `json:"url_query"`
	Steps    []outageStep `json:"steps"`
}

type outageStep struct {
	Fault *string `json:"fault"`
	Burst *struct {
		Key         string `json:"key"`
		Callers     int    `json:"callers"`
		Rounds      int    `json:"rounds"`
		LoaderValue string `json:"loader_value"`
		LoaderMs    int    `json:"loader_ms"`
	} `json:"burst"`
	Expect *struct {
		Value         string `json:"value"`
		RoundWithinMs int    `json:"round_within_ms"`
		Loads         *int   `json:"loads"`
		LoadsAtMost   *int   `json:"loads_at_most"`
	} `json:"expect"`
	WriteDirect *keyValue `json:"write_direct"`
	ReadDirect  *keyValue `json:"read_direct"`
	FlushDirect *bool     `json:"flush_direct"`
	AwaitValue  *struct {
		Key         string `json:"key"`
		Value       string `json:"value"`
		LoaderValue string `json:"loader_value"`
		WithinMs    int    `json:"within_ms"`
	} `json:"await_value"`
}

type keyValue struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// outageEnv is what outage.json takes from the environment.
type outageEnv struct{ faults, memcached, redis string }

func outageCases(data []byte) ([]Case, error) {
	var f outageFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	if len(f.Cases) == 0 {
		return nil, fmt.Errorf("no cases")
	}
	var env outageEnv
	var err error
	if env.faults, err = needEnv("LARDER_FAULTS", "the larder-faults binary (crates/testkit)"); err != nil {
		return nil, err
	}
	if env.memcached, err = needEnv("LARDER_CONFORMANCE_MEMCACHED", "the 127.0.0.1:PORT of a real memcached"); err != nil {
		return nil, err
	}
	if env.redis, err = needEnv("LARDER_CONFORMANCE_REDIS", "the 127.0.0.1:PORT of a real redis-server"); err != nil {
		return nil, err
	}
	cases := make([]Case, 0, len(f.Cases))
	for _, oc := range f.Cases {
		if oc.Store != "memcached" && oc.Store != "redis" {
			return nil, fmt.Errorf("case %s: unknown store %q", oc.Name, oc.Store)
		}
		for i, st := range oc.Steps {
			if err := st.check(); err != nil {
				return nil, fmt.Errorf("case %s, step %d: %v", oc.Name, i+1, err)
			}
		}
		cases = append(cases, Case{Name: oc.Name, Check: func() error { return runOutage(env, oc) }})
	}
	return cases, nil
}

// check is an error unless the step is exactly one of the known ones, with what it needs.
func (st outageStep) check() error {
	n := 0
	for _, set := range []bool{st.Fault != nil, st.Burst != nil, st.WriteDirect != nil, st.ReadDirect != nil,
		st.FlushDirect != nil, st.AwaitValue != nil} {
		if set {
			n++
		}
	}
	switch {
	case n != 1:
		return fmt.Errorf("a step is exactly one of fault, burst, write_direct, read_direct, flush_direct, await_value")
	case st.Burst != nil && st.Expect == nil:
		return fmt.Errorf("a burst without expect")
	case st.Burst != nil && (st.Expect.Loads == nil) == (st.Expect.LoadsAtMost == nil):
		return fmt.Errorf("a burst expects exactly one of loads and loads_at_most")
	case st.Burst != nil && (st.Burst.Callers < 1 || st.Burst.Rounds < 1):
		return fmt.Errorf("a burst needs callers and rounds")
	}
	return nil
}

func runOutage(env outageEnv, oc outageCase) error {
	upstream, scheme, db := env.memcached, "memcached://", ""
	if oc.Store == "redis" {
		upstream, scheme, db = env.redis, "redis://", "/0"
	}
	proxy, err := faultsproc.Start(env.faults, upstream)
	if err != nil {
		return err
	}
	defer proxy.Stop()
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	ns := larder.WithNamespace("outage-" + hex.EncodeToString(nonce[:]))
	ctx := context.Background()
	faulted, err := larder.Open(ctx, scheme+proxy.Addr+db+"?"+oc.URLQuery, ns)
	if err != nil {
		return fmt.Errorf("opening the faulted cache: %v", err)
	}
	defer faulted.Close()
	direct, err := larder.Open(ctx, scheme+upstream+db, ns)
	if err != nil {
		return fmt.Errorf("opening the direct cache: %v", err)
	}
	defer direct.Close()
	for i, st := range oc.Steps {
		if err := st.run(ctx, proxy, faulted, direct); err != nil {
			return fmt.Errorf("step %d: %v", i+1, err)
		}
	}
	return nil
}

const outageTTL = 60 * time.Second

func (st outageStep) run(ctx context.Context, proxy *faultsproc.Proxy, faulted, direct *larder.Cache) error {
	switch {
	case st.Fault != nil:
		return proxy.Command(*st.Fault)
	case st.Burst != nil:
		return st.burst(ctx, faulted)
	case st.WriteDirect != nil:
		if err := direct.Set(ctx, st.WriteDirect.Key, st.WriteDirect.Value, larder.TTL(outageTTL)); err != nil {
			return fmt.Errorf("write_direct %s: %v", st.WriteDirect.Key, err)
		}
	case st.ReadDirect != nil:
		got, ok := direct.Get(ctx, st.ReadDirect.Key)
		if !ok || got != st.ReadDirect.Value {
			return fmt.Errorf("read_direct %s: got %#v (found %v), want %q", st.ReadDirect.Key, got, ok, st.ReadDirect.Value)
		}
	case st.FlushDirect != nil:
		if err := direct.Clear(ctx); err != nil {
			return fmt.Errorf("flush_direct: %v", err)
		}
	case st.AwaitValue != nil:
		return st.await(ctx, faulted)
	}
	return nil
}

func (st outageStep) burst(ctx context.Context, faulted *larder.Cache) error {
	b, want := st.Burst, st.Expect
	var loads atomic.Int64
	loader := func(ctx context.Context) (any, error) {
		loads.Add(1)
		time.Sleep(time.Duration(b.LoaderMs) * time.Millisecond)
		return b.LoaderValue, nil
	}
	limit := time.Duration(want.RoundWithinMs) * time.Millisecond
	for round := 1; round <= b.Rounds; round++ {
		start := time.Now()
		results := make([]any, b.Callers)
		errs := make([]error, b.Callers)
		var wg sync.WaitGroup
		for i := range b.Callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = faulted.Fetch(ctx, b.Key, outageTTL, loader)
			}()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(limit + 5*time.Second):
			return fmt.Errorf("burst %s round %d: the fetch calls had not all returned after %v", b.Key, round, limit+5*time.Second)
		}
		took := time.Since(start)
		for i := range b.Callers {
			if errs[i] != nil {
				return fmt.Errorf("burst %s round %d: a fetch failed: %v", b.Key, round, errs[i])
			}
			if results[i] != want.Value {
				return fmt.Errorf("burst %s round %d: a fetch returned %#v, want %q", b.Key, round, results[i], want.Value)
			}
		}
		if took > limit {
			return fmt.Errorf("burst %s round %d took %v, more than %v", b.Key, round, took.Round(time.Millisecond), limit)
		}
	}
	n := int(loads.Load())
	if want.Loads != nil && n != *want.Loads {
		return fmt.Errorf("burst %s: the loader ran %d times over %d rounds, want exactly %d", b.Key, n, b.Rounds, *want.Loads)
	}
	if want.LoadsAtMost != nil && n > *want.LoadsAtMost {
		return fmt.Errorf("burst %s: the loader ran %d times over %d rounds, want at most %d", b.Key, n, b.Rounds, *want.LoadsAtMost)
	}
	return nil
}

func (st outageStep) await(ctx context.Context, faulted *larder.Cache) error {
	a := st.AwaitValue
	loader := func(context.Context) (any, error) { return a.LoaderValue, nil }
	deadline := time.Now().Add(time.Duration(a.WithinMs) * time.Millisecond)
	var last any
	var lastErr error
	for {
		last, lastErr = faulted.Fetch(ctx, a.Key, outageTTL, loader)
		if lastErr == nil && last == a.Value {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("await_value %s: not %q within %d ms (last fetch: %#v, error %v)", a.Key, a.Value, a.WithinMs, last, lastErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
