// Probation against a frozen server (STORES.md §1): larder-faults holds every request to a real memcached or
// Redis; after `failures` timeouts the server is ejected and requests fail at once; once `retry_after` has passed,
// of a burst of requests exactly one is the probe and waits for `timeout`, the others still fail at once; once the
// server answers again, the next probe puts it back.
package stores_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/larder-cache/larder/clients/go/internal/testservers"
	"github.com/larder-cache/larder/clients/go/stores"
)

func TestProbationIsOneProbeAtATimeOnAFrozenServer(t *testing.T) {
	t.Parallel()
	const query = "timeout=150ms&retry_after=400ms&failures=2"
	for _, tc := range []struct{ name, url string }{
		{"memcached", "memcached://PROXY?" + query},
		{"redis", "redis://PROXY/0?" + query},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			upstream := testservers.Memcached(t, "probation")
			if tc.name == "redis" {
				upstream = strings.TrimSuffix(strings.TrimPrefix(testservers.Redis(t, "probation"), "redis://"), "/0")
			}
			proxy := testservers.Faults(t, upstream)
			s := openURL(t, strings.Replace(tc.url, "PROXY", proxy.Addr, 1))
			ctx := context.Background()
			if err := s.Set(ctx, "probation-key", []byte("v"), time.Minute); err != nil {
				t.Fatal(err)
			}
			if err := proxy.Command("freeze"); err != nil {
				t.Fatal(err)
			}
			// burst runs n concurrent gets and counts the kinds of their errors.
			burst := func(n int) map[stores.ErrorKind]int {
				kinds := map[stores.ErrorKind]int{}
				var mu sync.Mutex
				var wg sync.WaitGroup
				for range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, err := s.Get(ctx, "probation-key")
						mu.Lock()
						kinds[stores.KindOf(err)]++
						mu.Unlock()
					}()
				}
				wg.Wait()
				return kinds
			}
			// Two failures eject the server (with a pool, more requests may be out when it is).
			if kinds := burst(2); kinds[stores.Timeout] != 2 {
				t.Fatalf("the first two requests to a frozen server: %v, want two timeouts", kinds)
			}
			// Refused at once (unavailable): a request that had waited would have timed out.
			if kinds := burst(8); kinds[stores.Unavailable] != 8 {
				t.Fatalf("while ejected: %v, want 8 refused at once", kinds)
			}
			time.Sleep(450 * time.Millisecond)
			if kinds := burst(16); kinds[stores.Timeout] != 1 || kinds[stores.Unavailable] != 15 {
				t.Fatalf("on probation: %v, want one probe (a timeout) and 15 refused at once", kinds)
			}
			// The failed probe ejected it again; the server answers again, and after retry_after a probe puts it back.
			if err := proxy.Command("pass"); err != nil {
				t.Fatal(err)
			}
			if kinds := burst(4); kinds[stores.Unavailable] != 4 {
				t.Fatalf("right after the failed probe: %v, want every request refused", kinds)
			}
			time.Sleep(450 * time.Millisecond)
			deadline := time.Now().Add(5 * time.Second)
			for {
				v, err := s.Get(ctx, "probation-key")
				if err == nil {
					if string(v) != "v" {
						t.Fatalf("read %q after recovery", v)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the server is not back 5 s after it answers again: %v", err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if kinds := burst(16); kinds[""] != 16 {
				t.Fatalf("after a good probe: %v, want every request answered", kinds)
			}
		})
	}
}
