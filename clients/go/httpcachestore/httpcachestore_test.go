// httpcache's own conformance test (github.com/gregjones/httpcache/test) on larder stores, and a Go HTTP client
// that revalidates through a shared store.
package httpcachestore

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/gregjones/httpcache"
	"github.com/gregjones/httpcache/test"

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
			test.Cache(t, New(s))
		})
	}
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
	for range 2 {
		client := httpcache.NewTransport(New(store)).Client()
		resp, err := client.Get(origin.URL + "/x")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(resp.Body) // httpcache stores a response once its body is read
		resp.Body.Close()
	}
	if hits.Load() != 1 {
		t.Fatalf("the origin was asked %d times", hits.Load())
	}
}
