// The behaviour every store shares (STORES.md §2, §3), run against each backend on real servers: reads and
// writes, TTLs and an entry's own hard expiry, add, counters, delete_if, multi-get, purges, key refusal before
// anything is sent, and the size bound.
package stores_test

import (
	"bytes"
	"context"
	"fmt"
	"github.com/larder-cache/larder/clients/go/stores"
	"math/rand"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/larder-cache/larder/clients/go/conformance"
	"github.com/larder-cache/larder/clients/go/format"
	"github.com/larder-cache/larder/clients/go/internal/testenv"
)

func entry(t testing.TB, value any, ttl time.Duration, tags ...string) []byte {
	o := format.DefaultOptions()
	o.TTLMs = uint64(ttl.Milliseconds())
	o.Tags = tags
	b, err := format.Encode(value, o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// unique makes keys that no other test (or earlier run) uses.
func unique(t testing.TB) string {
	return fmt.Sprintf("t%d-%s:", rand.Int63(), strings.NewReplacer("/", "-", " ", "_").Replace(t.Name()))
}

func behave(t *testing.T, open func(t *testing.T) stores.Store, recorded bool) {
	ctx := context.Background()
	t.Run("get-set-delete", func(t *testing.T) {
		s, p := open(t), unique(t)
		if v, err := s.Get(ctx, p+"missing"); v != nil || err != nil {
			t.Fatalf("miss: %q %v", v, err)
		}
		e := entry(t, "hello", 0)
		if err := s.Set(ctx, p+"k", e, 0); err != nil {
			t.Fatal(err)
		}
		if v, err := s.Get(ctx, p+"k"); !bytes.Equal(v, e) || err != nil {
			t.Fatalf("get: %q %v", v, err)
		}
		if ok, err := s.Delete(ctx, p+"k"); !ok || err != nil {
			t.Fatalf("delete: %v %v", ok, err)
		}
		if ok, _ := s.Delete(ctx, p+"k"); ok {
			t.Fatal("deleted twice")
		}
		if v, _ := s.Get(ctx, p+"k"); v != nil {
			t.Fatal("still there")
		}
	})
	t.Run("multi", func(t *testing.T) {
		s, p := open(t), unique(t)
		var items []stores.Item
		var keys []string
		for i := range 30 {
			items = append(items, stores.Item{fmt.Sprintf("%sk%d", p, i), []byte(fmt.Sprintf("v%d", i))})
			keys = append(keys, fmt.Sprintf("%sk%d", p, i))
		}
		if err := s.SetMulti(ctx, items, time.Minute); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetMulti(ctx, append(keys, p+"none"))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 30 {
			if string(got[i]) != fmt.Sprintf("v%d", i) {
				t.Fatalf("%d: %q", i, got[i])
			}
		}
		if got[30] != nil {
			t.Fatal("a missing key was found")
		}
		if n, err := s.DeleteMulti(ctx, keys[:10]); n != 10 || err != nil {
			t.Fatalf("delete_many: %d %v", n, err)
		}
	})
	t.Run("expiry", func(t *testing.T) {
		s, p := open(t), unique(t)
		_ = s.Set(ctx, p+"ttl", []byte("x"), 1100*time.Millisecond)
		_ = s.Set(ctx, p+"entry", entry(t, "x", 1000*time.Millisecond), 0)
		_ = s.Set(ctx, p+"past", entry(t, "x", time.Millisecond), 0)
		time.Sleep(5 * time.Millisecond)
		if ok, _ := s.Add(ctx, p+"past2", entry(t, "x", time.Millisecond), 0); ok {
			// written 1 ms after creation it may still be fresh; nothing to check
			_ = ok
		}
		if v, _ := s.Get(ctx, p+"ttl"); v == nil {
			t.Fatal("ttl: gone early")
		}
		time.Sleep(2100 * time.Millisecond)
		for _, k := range []string{"ttl", "entry", "past"} {
			if v, _ := s.Get(ctx, p+k); v != nil {
				t.Errorf("%s: returned past its expiry", k)
			}
		}
	})
	t.Run("add", func(t *testing.T) {
		s, p := open(t), unique(t)
		if ok, err := s.Add(ctx, p+"a", []byte("1"), time.Minute); !ok || err != nil {
			t.Fatalf("add: %v %v", ok, err)
		}
		if ok, _ := s.Add(ctx, p+"a", []byte("2"), time.Minute); ok {
			t.Fatal("added twice")
		}
		if v, _ := s.Get(ctx, p+"a"); string(v) != "1" {
			t.Fatalf("%q", v)
		}
	})
	t.Run("counters", func(t *testing.T) {
		s, p := open(t), unique(t)
		if _, ok, err := s.Incr(ctx, p+"c", 5, 0, false); ok || err != nil {
			t.Fatalf("missing without create: %v %v", ok, err)
		}
		if n, ok, err := s.Incr(ctx, p+"c", 5, time.Minute, true); n != 5 || !ok || err != nil {
			t.Fatalf("create: %d %v %v", n, ok, err)
		}
		if n, _, _ := s.Incr(ctx, p+"c", 10, 0, true); n != 15 {
			t.Fatalf("incr: %d", n)
		}
		if n, _, _ := s.Incr(ctx, p+"c", -6, 0, true); n != 9 {
			t.Fatalf("decr: %d", n)
		}
		// memcached pads a shortened counter ("9 "): every reader accepts trailing spaces.
		if v, _ := s.Get(ctx, p+"c"); strings.TrimRight(string(v), " ") != "9" {
			t.Fatalf("stored counter %q", v)
		}
		_ = s.Set(ctx, p+"text", []byte("abc"), 0)
		if _, _, err := s.Incr(ctx, p+"text", 1, 0, true); stores.KindOf(err) != stores.NotACounter {
			t.Fatalf("not a counter: %v", err)
		}
		if v, _ := s.Get(ctx, p+"text"); string(v) != "abc" {
			t.Fatal("a failed incr changed the value")
		}
	})
	t.Run("delete-if", func(t *testing.T) {
		s, p := open(t), unique(t)
		_, _ = s.Add(ctx, p+"lock", []byte("token-a"), time.Minute)
		if ok, _ := s.DeleteIf(ctx, p+"lock", []byte("token-b")); ok {
			t.Fatal("deleted another holder's lock")
		}
		if ok, err := s.DeleteIf(ctx, p+"lock", []byte("token-a")); !ok || err != nil {
			t.Fatalf("%v %v", ok, err)
		}
	})
	t.Run("purge", func(t *testing.T) {
		s, p := open(t), unique(t)
		_ = s.Set(ctx, p+"a/1", entry(t, 1, time.Minute, "red"), 0)
		_ = s.Set(ctx, p+"a/2", entry(t, 2, time.Minute, "blue"), 0)
		_ = s.Set(ctx, p+"b/1", entry(t, 3, time.Minute, "red", "blue"), 0)
		// Records compare created_at with the purge time within purge_skew: wait past it (memcached).
		got, err := s.PurgeTag(ctx, "red")
		if err != nil {
			t.Fatal(err)
		}
		if recorded != got.Recorded || (!recorded && got.Count < 2) {
			t.Fatalf("purge_tag answered %+v", got)
		}
		for k, want := range map[string]bool{"a/1": false, "a/2": true, "b/1": false} {
			if v, _ := s.Get(ctx, p+k); (v != nil) != want {
				t.Errorf("after purge_tag, %s present=%v", k, v != nil)
			}
		}
		got, err = s.PurgePrefix(ctx, p+"a/")
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := s.Get(ctx, p+"a/2"); v != nil {
			t.Errorf("after purge_prefix a/2 is still there (%+v)", got)
		}
		_ = s.Set(ctx, p+"counter", []byte("5"), 0)
		if v, _ := s.Get(ctx, p+"counter"); string(v) != "5" {
			t.Errorf("a counter under a purged prefix is affected by records")
		}
	})
	t.Run("keys-refused-before-sending", func(t *testing.T) {
		s := open(t)
		data, err := os.ReadFile(testenv.Spec("vectors", "stores.json"))
		if err != nil {
			t.Fatal(err)
		}
		cases, err := conformance.StoreKeyCases(data, func(key string, refused bool) error {
			return checkKeyEverywhere(ctx, s, key, refused)
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			if err := c.Check(); err != nil {
				t.Errorf("%s: %v", c.Name, err)
			}
		}
	})
	t.Run("wire-bytes-are-the-checked-bytes", func(t *testing.T) {
		checkWireBytes(t, open(t), unique(t))
	})
	t.Run("too-large", func(t *testing.T) {
		s, p := open(t), unique(t)
		if s.MaxValue() > 64<<20 {
			t.Skipf("a %d-byte value is too much to allocate in a test", s.MaxValue())
		}
		big := make([]byte, s.MaxValue()+300)
		if err := s.Set(ctx, p+"big", big, 0); stores.KindOf(err) != stores.TooLarge {
			t.Fatalf("%v", err)
		}
	})
}

// checkKeyEverywhere runs one key through every operation: refused keys fail with invalid_key, accepted ones work.
func checkKeyEverywhere(ctx context.Context, s stores.Store, key string, refused bool) error {
	errs := []error{}
	_, err := s.Get(ctx, key)
	errs = append(errs, err)
	_, err = s.GetMulti(ctx, []string{key})
	errs = append(errs, err)
	errs = append(errs, s.Set(ctx, key, []byte("v"), time.Minute))
	errs = append(errs, s.SetMulti(ctx, []stores.Item{{key, []byte("v")}}, time.Minute))
	_, err = s.Add(ctx, key, []byte("v"), time.Minute)
	errs = append(errs, err)
	_, _, err = s.Incr(ctx, key+"", 1, time.Minute, true)
	if !refused && stores.KindOf(err) == stores.NotACounter {
		err = nil
	}
	errs = append(errs, err)
	_, err = s.DeleteIf(ctx, key, []byte("v"))
	errs = append(errs, err)
	_, err = s.Delete(ctx, key)
	errs = append(errs, err)
	_, err = s.DeleteMulti(ctx, []string{key})
	errs = append(errs, err)
	for i, err := range errs {
		if refused && stores.KindOf(err) != stores.InvalidKey {
			return fmt.Errorf("operation %d accepted a refused key: %v", i, err)
		}
		if !refused && err != nil {
			return fmt.Errorf("operation %d refused an accepted key: %v", i, err)
		}
	}
	return nil
}

func TestMemoryStore(t *testing.T) {
	t.Parallel()
	behave(t, func(t *testing.T) stores.Store {
		s, err := stores.Open(context.Background(), "memory://?capacity=64M")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, false)
}

func TestMemoryStoreIsBoundedByBytes(t *testing.T) {
	s := stores.NewMemory(1<<20, 0)
	ctx := context.Background()
	v := make([]byte, 1000)
	for i := range 5000 {
		_ = s.Set(ctx, fmt.Sprintf("k%d", i), v, 0)
	}
	st, _ := s.Stats(ctx)
	if st.Bytes > 1<<20 || st.Entries > 1100 {
		t.Fatalf("%+v past the 1 MiB capacity", st)
	}
	if got, _ := s.Get(ctx, "k4999"); got == nil {
		t.Fatal("the newest entry was evicted")
	}
}

func TestURLs(t *testing.T) {
	for url, want := range map[string]string{
		"memory://?capacity=1M&bogus=1":       "unknown option bogus",
		"memcached://h:1?timeout=2d":          "not a duration",
		"memcached://h:1?timeout=1&timeout=2": "given twice",
		"memcached://h:99999":                 "port must be 1-65535",
		"memcached://::1:11211":               "brackets",
		"redis://u:secret@h:1/0?bogus=1":      "u:***@h:1",
		"nothing":                             "not a store URL",
		"gopher://x":                          "unknown store scheme",
		"memcached://h:1?weights=1,2":         "one weight per host",
		"memcached://h:1?prefix=a%20b":        "prefix",
	} {
		_, err := stores.Open(context.Background(), url)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: %v (want %q)", url, err, want)
		}
	}
	for text, want := range map[string]time.Duration{"250": 250 * time.Millisecond, "2s": 2 * time.Second, "1m": time.Minute, "1h": time.Hour, "5ms": 5 * time.Millisecond} {
		if d, err := stores.ParseDuration(text); err != nil || d != want {
			t.Errorf("%s: %v %v", text, d, err)
		}
	}
	for _, bad := range []string{"1.5s", "-1s", "1min", "1d", " 1s", "1s ", "1234567890123s"} {
		if _, err := stores.ParseDuration(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	for text, want := range map[string]int64{"512K": 512 << 10, "256M": 256 << 20, "10G": 10 << 30, "2GiB": 2 << 30, "1.5G": 3 << 29, "100b": 100} {
		if n, err := stores.ParseSize(text); err != nil || n != want {
			t.Errorf("%s: %v %v", text, n, err)
		}
	}
}
