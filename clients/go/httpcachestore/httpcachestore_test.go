// httpcache's own conformance test (github.com/gregjones/httpcache/test) on larder stores, a Go HTTP client that
// caches through a shared store, and the shared cache's rules (RFC 9111 §3, issue 32 finding 3): Bob, with his
// own token and his own Transport over the same store, never gets Alice's private account page or her cookie.
package httpcachestore

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gregjones/httpcache"
	"github.com/gregjones/httpcache/test"

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

func open(t *testing.T, url string) stores.Store {
	s, err := stores.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// httpcache's test stores arbitrary bytes, which only a private cache keeps: a shared one stores responses it
// may share.
func TestHttpcacheConformance(t *testing.T) {
	for name, url := range map[string]string{
		"memory":    "memory://",
		"memcached": "memcached://" + testservers.Memcached(t, "httpcache"),
		"redis":     testservers.Redis(t, "httpcache"),
		"sqlite":    "sqlite://" + filepath.Join(t.TempDir(), "c.db"),
		"file":      "file://" + t.TempDir(),
	} {
		t.Run(name, func(t *testing.T) {
			s := open(t, url)
			_ = s.Clear(context.Background())
			test.Cache(t, NewPrivate(s, "conformance"))
		})
	}
}

// fetch GETs url through client as the bearer of token ("" for none) and returns the body and whether it came
// from the cache; the body is read whole, which is when httpcache stores a response.
func fetch(t *testing.T, client *http.Client, url, token string) (string, bool, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body), resp.Header.Get("X-From-Cache") == "1", resp.Header
}

func TestAGoHTTPClientCachesInTheSharedStore(t *testing.T) {
	var hits atomic.Int32
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Cache-Control", "max-age=60")
		fmt.Fprint(w, "hello")
	}))
	defer origin.Close()
	store := open(t, "memcached://"+testservers.Memcached(t, "httpcache"))
	// Two clients, as two processes would be: the second is served from what the first stored.
	url := origin.URL + fmt.Sprintf("/x%d", time.Now().UnixNano())
	for range 2 {
		if body, _, _ := fetch(t, New(store).Client(), url, ""); body != "hello" {
			t.Fatalf("body %q", body)
		}
	}
	if hits.Load() != 1 {
		t.Fatalf("the origin was asked %d times", hits.Load())
	}
}

// The attack: Alice's account page (private, with her session cookie) fetched through one Transport, then
// Bob's request for the same URL with his own token through another, both on one shared store. Bob must get his
// own page from the origin, with the package's Transport and with a bare httpcache.Transport alike.
func TestBobNeverGetsAlicesPrivatePage(t *testing.T) {
	for _, header := range []string{"private, max-age=60", "max-age=60"} {
		for transport, client := range map[string]func(c *Cache) *http.Client{
			"package":   func(c *Cache) *http.Client { return c.Client() },
			"httpcache": func(c *Cache) *http.Client { return httpcache.NewTransport(c).Client() },
		} {
			t.Run(transport+" "+header, func(t *testing.T) {
				origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					user := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
					w.Header().Set("Cache-Control", header)
					w.Header().Set("Set-Cookie", "session="+user+"-secret")
					fmt.Fprintf(w, "%s's account", user)
				}))
				defer origin.Close()
				store := open(t, "memcached://"+testservers.Memcached(t, "httpcache"))
				url := origin.URL + fmt.Sprintf("/account/%d", time.Now().UnixNano())
				alice, bob := client(New(store)), client(New(store))
				if body, _, _ := fetch(t, alice, url, "alice"); body != "alice's account" {
					t.Fatalf("alice got %q", body)
				}
				body, cached, h := fetch(t, bob, url, "bob")
				if body != "bob's account" || cached || strings.Contains(h.Get("Set-Cookie"), "alice") {
					t.Fatalf("bob got %q (from the cache: %v, cookie %q)", body, cached, h.Get("Set-Cookie"))
				}
			})
		}
	}
}

// Which responses a shared cache stores: a second client, anonymous, asks for the same URL and is served from the
// cache only when the first response was storable.
func TestASharedCacheStoresOnlyWhatRFC9111Allows(t *testing.T) {
	cases := []struct {
		name      string
		token     string
		header    map[string]string
		setCookie bool // the Cache's StoreSetCookie
		bare      bool // a bare httpcache.Transport, which cannot tell an anonymous request
		stored    bool
	}{
		{"anonymous, max-age", "", map[string]string{"Cache-Control": "max-age=60"}, false, false, true},
		{"anonymous, max-age, bare httpcache transport", "", map[string]string{"Cache-Control": "max-age=60"}, false, true, false},
		{"anonymous, public, bare httpcache transport", "", map[string]string{"Cache-Control": "public, max-age=60"}, false, true, true},
		{"authorization, max-age", "alice", map[string]string{"Cache-Control": "max-age=60"}, false, false, false},
		{"authorization, public", "alice", map[string]string{"Cache-Control": "public, max-age=60"}, false, false, true},
		{"authorization, s-maxage", "alice", map[string]string{"Cache-Control": "max-age=60, s-maxage=60"}, false, false, true},
		{"anonymous, s-maxage=0", "", map[string]string{"Cache-Control": "max-age=60, s-maxage=0"}, false, false, false},
		{"authorization, must-revalidate", "alice", map[string]string{"Cache-Control": "max-age=60, must-revalidate"}, false, false, true},
		{"authorization, a stamp the origin forged", "alice", map[string]string{"Cache-Control": "max-age=60", stampHeader: "anything"}, false, false, false},
		{"anonymous, private", "", map[string]string{"Cache-Control": "max-age=60, Private"}, false, false, false},
		{"anonymous, private with fields", "", map[string]string{"Cache-Control": `max-age=60, private="x-user"`}, false, false, false},
		{"anonymous, set-cookie", "", map[string]string{"Cache-Control": "max-age=60", "Set-Cookie": "a=1"}, false, false, false},
		{"anonymous, set-cookie allowed", "", map[string]string{"Cache-Control": "max-age=60", "Set-Cookie": "a=1"}, true, false, true},
		{"authorization, public, set-cookie", "alice", map[string]string{"Cache-Control": "public, max-age=60", "Set-Cookie": "a=1"}, false, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range c.header {
					w.Header().Set(k, v)
				}
				fmt.Fprint(w, "page")
			}))
			defer origin.Close()
			store := open(t, "memory://")
			client := func() *http.Client {
				cache := New(store)
				cache.StoreSetCookie = c.setCookie
				if c.bare {
					return httpcache.NewTransport(cache).Client()
				}
				return cache.Client()
			}
			_, _, h := fetch(t, client(), origin.URL+"/p", c.token)
			if v := h.Get(stampHeader); v != "" && !c.bare {
				t.Errorf("the caller saw the stamp %q", v)
			}
			_, cached, _ := fetch(t, client(), origin.URL+"/p", "")
			if cached != c.stored {
				t.Errorf("served from the cache: %v, want %v", cached, c.stored)
			}
		})
	}
}

// A shared cache does not serve a stored private response, whoever wrote it (an older client, another program).
func TestASharedCacheServesNoPrivateEntry(t *testing.T) {
	store := open(t, "memory://")
	writer := larder.New(store, larder.WithNamespace("httpcache"), larder.WithSerializer(format.Raw))
	dump := "HTTP/1.1 200 OK\r\nCache-Control: private, max-age=600\r\nContent-Length: 5\r\n\r\nalice"
	if err := writer.Set(context.Background(), "http://example.test/account", []byte(dump)); err != nil {
		t.Fatal(err)
	}
	if v, ok := New(store).Get("http://example.test/account"); ok {
		t.Fatalf("served %q", v)
	}
	if v, ok := NewPrivate(store, "x").Get("http://example.test/account"); ok {
		t.Fatalf("another namespace's entry: %q", v)
	}
}

// A private cache is httpcache's own kind: it keeps private responses, for its one user.
func TestAPrivateCacheKeepsPrivateResponses(t *testing.T) {
	var hits atomic.Int32
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Cache-Control", "private, max-age=60")
		w.Header().Set("Set-Cookie", "session=alice")
		fmt.Fprint(w, "alice's account")
	}))
	defer origin.Close()
	store := open(t, "memory://")
	cache := NewPrivate(store, "alice")
	for range 2 {
		fetch(t, cache.Client(), origin.URL+"/account", "alice")
	}
	if hits.Load() != 1 || !cache.Private() {
		t.Fatalf("the origin was asked %d times", hits.Load())
	}
}

// A shared cache's freshness is s-maxage (RFC 9111 §5.2.2.10), which httpcache does not read: the store keeps the
// response no longer than that, even when max-age says longer.
func TestASharedCacheKeepsAResponseNoLongerThanItsSMaxage(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=600, s-maxage=1")
		fmt.Fprint(w, "page")
	}))
	defer origin.Close()
	store := open(t, "memory://")
	cache := New(store)
	fetch(t, cache.Client(), origin.URL+"/p", "")
	if _, cached, _ := fetch(t, cache.Client(), origin.URL+"/p", ""); !cached {
		t.Fatal("not stored")
	}
	time.Sleep(2500 * time.Millisecond)
	if _, ok := cache.Get(origin.URL + "/p"); ok {
		t.Fatal("kept past its s-maxage")
	}
}
