// The memcached store against real memcached servers: the shared behaviour, ketama placement as other
// languages compute it, ejection of a dead server and its keys moving, records checked on read, and hostile
// replies cut off within the timeout.
package stores_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/larder-cache/larder/clients/go/stores"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/larder-cache/larder/clients/go/ring"
	"time"

	"github.com/larder-cache/larder/clients/go/internal/testservers"
)

func openURL(t testing.TB, url string) stores.Store {
	s, err := stores.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestMemcachedStore(t *testing.T) {
	t.Parallel()
	url := "memcached://" + testservers.Memcached(t, "a") + "," + testservers.Memcached(t, "b") + "?purge_skew=0s"
	behave(t, func(t *testing.T) stores.Store { return openURL(t, url) }, true)
}

func TestMemcachedPrefixOption(t *testing.T) {
	addr := testservers.Memcached(t, "a")
	ctx := context.Background()
	a, b := openURL(t, "memcached://"+addr+"?prefix=app1:"), openURL(t, "memcached://"+addr+"?prefix=app2:")
	_ = a.Set(ctx, "shared", []byte("1"), time.Minute)
	if v, _ := b.Get(ctx, "shared"); v != nil {
		t.Fatal("prefixes do not separate applications")
	}
	raw := openURL(t, "memcached://"+addr)
	if v, _ := raw.Get(ctx, "app1:shared"); string(v) != "1" {
		t.Fatalf("stored key is not prefix+key: %q", v)
	}
}

// deadAddr is a loopback port with nothing listening.
func deadAddr() string {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	a := l.Addr().String()
	l.Close()
	return a
}

func TestMemcachedEjectsADeadServerAndMovesItsKeys(t *testing.T) {
	live, dead := testservers.Memcached(t, "a"), deadAddr()
	s := openURL(t, "memcached://"+live+","+dead+"?failures=2&retry_after=1s&timeout=200ms")
	ctx := context.Background()
	// Find keys of the dead server: the first two requests fail (connection refused), then it is ejected and
	// its keys go to the live one.
	var deadKeys []string
	host, port, _ := net.SplitHostPort(dead)
	lhost, lport, _ := net.SplitHostPort(live)
	r := ring.Build([]ring.Server{{Host: lhost, Port: atoi(lport), Weight: 1}, {Host: host, Port: atoi(port), Weight: 1}}, nil)
	for i := 0; len(deadKeys) < 5; i++ {
		k := fmt.Sprintf("eject-%d-%d", i, time.Now().UnixNano())
		if r.Pick(k) == 1 {
			deadKeys = append(deadKeys, k)
		}
	}
	failures := 0
	for _, k := range deadKeys {
		if err := s.Set(ctx, k, []byte("v"), time.Minute); err != nil {
			failures++
		}
	}
	if failures > 2 {
		t.Fatalf("%d requests failed: a dead server costs at most `failures` errors", failures)
	}
	start := time.Now()
	for _, k := range deadKeys[2:] {
		if v, err := s.Get(ctx, k); string(v) != "v" || err != nil {
			t.Fatalf("%s after ejection: %q %v", k, v, err)
		}
	}
	if time.Since(start) > 100*time.Millisecond {
		t.Fatal("requests waited on an ejected server")
	}
	st, _ := s.Stats(ctx)
	if st.ServerErrors[dead] < 2 {
		t.Fatalf("errors not counted: %v", st.ServerErrors)
	}
}

// Every operation against each hostile memcached fails with the store's error, by the timeout or at once. wide
// answers a get with 10,000 values of 512 KiB, each within max_item: the first is a whole reply to `mg k v`, so
// only a client that knows where its replies end (the `mn` that closes every exchange) sees the rest; before,
// get, get_many and delete_if read the first value and succeeded, leaving 5 GB in the connection.
func TestMemcachedHostileReplies(t *testing.T) {
	servers := map[string][]string{"drip": nil, "huge": nil, "endless-line": nil, "garbage": nil, "silent": nil,
		"wide": {"--count", "10000", "--size", "524288"}}
	for behaviour, args := range servers {
		t.Run(behaviour, func(t *testing.T) {
			addr, stop := testservers.Hostile(t, "memcached", behaviour, args...)
			defer stop()
			s := openURL(t, "memcached://"+addr+"?timeout=300ms&failures=100")
			for name, op := range everyOperation(t, s) {
				start := time.Now()
				err := op()
				took := time.Since(start)
				if err == nil {
					t.Fatalf("%s: no error", name)
				}
				if took > 800*time.Millisecond {
					t.Fatalf("%s: took %v (timeout 300ms)", name, took)
				}
				var se *stores.Error
				if !asStoreError(err, &se) || se.Server != addr {
					t.Fatalf("%s: not the store's error naming the server: %v", name, err)
				}
				if k := stores.KindOf(err); k != stores.Timeout && k != stores.Protocol {
					t.Fatalf("%s: kind %s: %v", name, k, err)
				}
			}
		})
	}
}

func asStoreError(err error, target **stores.Error) bool {
	e, ok := err.(*stores.Error)
	if ok {
		*target = e
	}
	return ok && strings.Contains(e.Error(), e.Backend)
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// mutedServer reads and never answers anything, not even the `mn` that larder-hostile's silent answers (which a
// store that ends every exchange with mn reads as a reply out of step).
func mutedServer(t *testing.T) string { return lyingRedis(t, "", false) }

// A server that never answers costs each operation its timeout, a total deadline, and no more.
func TestMemcachedMutedServerTimesOutEveryOperation(t *testing.T) {
	s := openURL(t, "memcached://"+mutedServer(t)+"?timeout=300ms&failures=100")
	for name, op := range everyOperation(t, s) {
		start := time.Now()
		err := op()
		took := time.Since(start)
		if k := stores.KindOf(err); k != stores.Timeout {
			t.Fatalf("%s: kind %q: %v", name, k, err)
		}
		if took < 250*time.Millisecond || took > 800*time.Millisecond {
			t.Fatalf("%s: took %v (timeout 300ms)", name, took)
		}
	}
}

func TestMemcachedHonoursCancellation(t *testing.T) {
	addr := mutedServer(t)
	s := openURL(t, "memcached://"+addr+"?timeout=5s&failures=1")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := s.Get(ctx, "k")
	if !errors.Is(err, context.Canceled) || time.Since(start) > time.Second {
		t.Fatalf("%v after %v", err, time.Since(start))
	}
	// A caller's cancellation is not a failure of the server: it is not ejected.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	if _, err := s.Get(ctx2, "k"); stores.KindOf(err) == stores.Unavailable {
		t.Fatalf("ejected after a cancellation: %v", err)
	}
}

// A counter's reply that lies about its length (negative, missing, past 24 digits, cut off) is a protocol error
// or a cut-off, never a panic (a negative length once reached make).
func TestMemcachedIncrRefusesLies(t *testing.T) {
	for _, reply := range []string{"VA -5\r\n12\r\n", "VA \r\n", "VA\r\n", "VA 99\r\n1\r\n", "VA 2\r\n1", "VA 2 t1\r\n1234\r\n"} {
		t.Run(strconv.Quote(reply), func(t *testing.T) {
			s := openURL(t, "memcached://"+lyingRedis(t, reply, true)+"?timeout=300ms&failures=100")
			_, _, err := s.Incr(context.Background(), "n", 1, 0, true)
			if k := stores.KindOf(err); k != stores.Protocol && k != stores.Unavailable {
				t.Fatalf("kind %s: %v", k, err)
			}
		})
	}
}
