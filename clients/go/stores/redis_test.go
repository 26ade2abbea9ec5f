// The Redis store against a real redis-server and a real three-node Cluster: the shared behaviour, the spec's
// scripts as loaded by the server, and hostile replies cut off within the timeout and the size bound.
package stores_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/larder-cache/larder/clients/go/internal/testservers"
	"github.com/larder-cache/larder/clients/go/stores"
	"github.com/larder-cache/larder/clients/go/stores/redisscripts"
)

func TestRedisStore(t *testing.T) {
	t.Parallel()
	url := testservers.Redis(t, "a")
	behave(t, func(t *testing.T) stores.Store { return openURL(t, url) }, false)
}

func TestRedisClusterStore(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a cluster takes seconds to form")
	}
	url := testservers.RedisCluster(t)
	behave(t, func(t *testing.T) stores.Store { return openURL(t, url) }, false)
}

func TestRedisRunsTheSpecScriptsByTheirSHA(t *testing.T) {
	url := testservers.Redis(t, "scripts")
	s := openURL(t, url)
	ctx := context.Background()
	_ = s.Set(ctx, "tagged", entry(t, 1, time.Minute, "x"), 0)
	_, _, _ = s.Incr(ctx, "n", 1, 0, true)
	_, _ = s.DeleteIf(ctx, "n", []byte("1"))
	port := strings.TrimSuffix(strings.TrimPrefix(url, "redis://127.0.0.1:"), "/0")
	for _, src := range []string{redisscripts.DeleteIf, redisscripts.Incr, redisscripts.Tag} {
		sum := sha1.Sum([]byte(src))
		out, err := exec.Command("redis-cli", "-p", port, "SCRIPT", "EXISTS", hex.EncodeToString(sum[:])).Output()
		if err != nil || strings.TrimSpace(string(out)) != "1" {
			t.Errorf("script %s… not loaded by its SHA: %q %v", src[:30], out, err)
		}
	}
}

func TestRedisHostileReplies(t *testing.T) {
	for _, behaviour := range []string{"drip", "huge", "nested", "endless-line", "garbage", "silent"} {
		t.Run(behaviour, func(t *testing.T) {
			addr, stop := testservers.Hostile(t, "redis", behaviour)
			defer stop()
			s := openURL(t, "redis://"+addr+"/0?timeout=300ms&failures=100")
			for name, op := range everyOperation(t, s) {
				start := time.Now()
				err := op()
				took := time.Since(start)
				if err == nil {
					t.Fatalf("%s: no error", name)
				}
				if took > 900*time.Millisecond {
					t.Fatalf("%s: took %v (timeout 300ms)", name, took)
				}
				if k := stores.KindOf(err); k != stores.Timeout && k != stores.Protocol && k != stores.Unavailable {
					t.Fatalf("%s: kind %q: %v", name, k, err)
				}
			}
		})
	}
}

// One total deadline per operation, also while it waits for the pool's only connection, held by another call on
// a server that never answers: the holder ends by the store's timeout, and callers with a shorter deadline of
// their own end by theirs, as timeouts.
func TestRedisDeadlineCoversThePoolWait(t *testing.T) {
	addr, stop := testservers.Hostile(t, "redis", "silent")
	defer stop()
	s := openURL(t, "redis://"+addr+"/0?timeout=600ms&pool=1&failures=100")
	type result struct {
		took  time.Duration
		err   error
		limit time.Duration
	}
	results := make(chan result, 3)
	call := func(ctx context.Context, limit time.Duration) {
		start := time.Now()
		_, err := s.Get(ctx, "k")
		results <- result{time.Since(start), err, limit}
	}
	go call(context.Background(), 1200*time.Millisecond)
	time.Sleep(50 * time.Millisecond) // the holder has the connection
	for i := 0; i < 2; i++ {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			call(ctx, 400*time.Millisecond)
		}()
	}
	for i := 0; i < 3; i++ {
		r := <-results
		if r.took > r.limit {
			t.Errorf("an operation took %v (allowed %v)", r.took, r.limit)
		}
		if stores.KindOf(r.err) != stores.Timeout {
			t.Errorf("kind %q, not a timeout: %v", stores.KindOf(r.err), r.err)
		}
	}
}
