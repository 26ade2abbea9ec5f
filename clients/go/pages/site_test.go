// The site a page is keyed on (spec/HTTP.md §2; issue 32 finding 7): a request that reaches the app directly
// with X-Forwarded-Host: evil.example, Host: victim.example/admin, Host: evil@victim.example, a port that is not
// the site's, or an absolute-form target, must not write a page the front then serves for victim.example. A
// trusted proxy's forwarded host and scheme are believed, as the front believes them.
package pages_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/larder-cache/larder/clients/go/format"
	"github.com/larder-cache/larder/clients/go/pages"
	"github.com/larder-cache/larder/clients/go/stores"
)

// reflecting renders a page that names the host the app believes it serves, as apps building absolute links do.
func reflecting(w http.ResponseWriter, r *http.Request) {
	pages.FrontHeaders(w.Header(), time.Minute)
	host := r.Host
	if fwd := r.Header.Get("X-Forwarded-Host"); fwd != "" {
		host = fwd
	}
	fmt.Fprintf(w, `<a href="//%s/login">log in</a>`, host)
}

// storedPages lists what a memory store holds: key -> body.
func storedPages(t *testing.T, s stores.Store, keys ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range keys {
		raw, err := s.Get(context.Background(), k)
		if err != nil || raw == nil {
			continue
		}
		e, err := format.Decode(raw, format.DefaultMaxSize)
		if err != nil || e.Kind != format.KindResponse {
			t.Fatalf("%s: not a page: %v", k, err)
		}
		out[k] = string(e.Response.Body)
	}
	return out
}

func TestPagesAreKeyedOnlyOnATrustedSite(t *testing.T) {
	trusted, err := pages.ParseTrustedProxies("10.0.0.0/8", "192.0.2.7")
	if err != nil {
		t.Fatal(err)
	}
	// Every key a page of these requests could have gone under, to see where each one went.
	candidates := []string{"GET:http://victim.example/p", "GET:https://victim.example/p", "GET:http://evil.example/p",
		"GET:https://evil.example/p", "GET:http://victim.example/admin/p", "GET:http://evil@victim.example/p",
		"GET:http://victim.example:8080/p", "GET:http://shop.example/p", "GET:http://victim.example:99999/p",
		"GET:http://victim.example%2fadmin/p"}
	cases := []struct {
		name    string
		site    string
		peer    string
		host    string
		headers map[string]string
		key     string // "" = not stored, reason host
		body    string
	}{
		{"X-Forwarded-Host from anyone is ignored", "", "203.0.113.9:5000", "victim.example",
			map[string]string{"X-Forwarded-Host": "evil.example"}, "GET:http://victim.example/p", "//victim.example/login"},
		{"Forwarded and X-Forwarded-Proto from anyone are ignored", "", "203.0.113.9:5000", "victim.example",
			map[string]string{"Forwarded": "host=evil.example;proto=https", "X-Forwarded-Proto": "https"}, "GET:http://victim.example/p", "//victim.example/login"},
		{"a trusted proxy names the host", "", "10.1.2.3:5000", "internal:8080",
			map[string]string{"X-Forwarded-Host": "evil.example"}, "GET:http://evil.example/p", "//evil.example/login"},
		{"a trusted proxy names the scheme", "", "192.0.2.7:5000", "victim.example",
			map[string]string{"X-Forwarded-Proto": "https"}, "GET:https://victim.example/p", "//victim.example/login"},
		{"an IPv4-mapped trusted peer", "", "[::ffff:10.0.0.1]:5000", "internal",
			map[string]string{"Forwarded": `for=1.2.3.4;host="evil.example";proto=https`}, "GET:https://evil.example/p", ""},
		{"a trusted proxy whose fields disagree", "", "10.1.2.3:5000", "victim.example",
			map[string]string{"X-Forwarded-Host": "a.example", "Forwarded": "host=b.example"}, "", ""},
		{"a trusted proxy's protocol that is neither http nor https", "", "10.1.2.3:5000", "victim.example",
			map[string]string{"X-Forwarded-Proto": "gopher"}, "", ""},
		{"a trusted proxy's host with a path", "", "10.1.2.3:5000", "victim.example",
			map[string]string{"X-Forwarded-Host": "victim.example/admin"}, "", ""},
		{"Host with a path", "", "203.0.113.9:5000", "victim.example/admin", nil, "", ""},
		{"Host with userinfo", "", "203.0.113.9:5000", "evil@victim.example", nil, "", ""},
		{"Host with a percent-escape", "", "203.0.113.9:5000", "victim.example%2fadmin", nil, "", ""},
		{"Host with a port past 65535", "", "203.0.113.9:5000", "victim.example:99999", nil, "", ""},
		{"Host with an empty port", "", "203.0.113.9:5000", "victim.example:", nil, "", ""},
		{"an empty Host", "", "203.0.113.9:5000", "", nil, "", ""},
		{"a port that is not the site's", "victim.example", "203.0.113.9:5000", "victim.example:8080", nil, "", ""},
		{"another site", "shop.example", "203.0.113.9:5000", "victim.example", nil, "", ""},
		{"the site, in another case, with the default port", "victim.example", "203.0.113.9:5000", "VICTIM.example:80", nil,
			"GET:http://victim.example/p", "//VICTIM.example:80/login"},
		{"a trusted proxy naming another site", "shop.example", "10.1.2.3:5000", "shop.example",
			map[string]string{"X-Forwarded-Host": "evil.example"}, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			store := stores.NewMemory(1<<20, 0)
			pc := pages.New(store)
			pc.Site, pc.TrustedProxies = c.site, trusted
			if err := pc.Validate(); err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest(http.MethodGet, "/p", nil)
			req.Host, req.RemoteAddr = c.host, c.peer
			for k, v := range c.headers {
				req.Header.Set(k, v)
			}
			pc.Middleware(http.HandlerFunc(reflecting)).ServeHTTP(httptest.NewRecorder(), req)
			got := storedPages(t, store, candidates...)
			if c.key == "" {
				if len(got) != 0 || pc.Stats().NotStored["host"] != 1 || pc.Key(req) != "" {
					t.Fatalf("stored %v (stats %+v, Key %q), want nothing stored for reason host", got, pc.Stats(), pc.Key(req))
				}
				return
			}
			if len(got) != 1 || got[c.key] == "" {
				t.Fatalf("stored %v, want one page under %s", got, c.key)
			}
			if c.body != "" && !strings.Contains(got[c.key], c.body) {
				t.Fatalf("the page under %s reads %q: the handler rendered for another site", c.key, got[c.key])
			}
			if k := pc.Key(req); k != c.key {
				t.Fatalf("Key says %q", k)
			}
		})
	}
}

// Through a real net/http server: an absolute-form target names its own authority, and net/http drops the Host
// field, so the two cannot be compared: not stored.
func TestAnAbsoluteFormTargetIsNotStored(t *testing.T) {
	store := stores.NewMemory(1<<20, 0)
	pc := pages.New(store)
	server := httptest.NewServer(pc.Middleware(http.HandlerFunc(reflecting)))
	defer server.Close()
	for _, target := range []string{"http://evil.example/p", "http://victim.example/p"} {
		conn, err := net.Dial("tcp", server.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: victim.example\r\nConnection: close\r\n\r\n", target)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		conn.Close()
	}
	if got := storedPages(t, store, "GET:http://victim.example/p", "GET:http://evil.example/p"); len(got) != 0 {
		t.Fatalf("stored %v", got)
	}
	if pc.Stats().NotStored["host"] != 2 {
		t.Fatalf("stats %+v", pc.Stats())
	}
}

func TestPageCacheConfiguration(t *testing.T) {
	for _, site := range []string{"shop.example/x", "user@shop.example", "shop.example:", "shop.example:70000", "[::1", " shop.example"} {
		pc := pages.New(stores.NewMemory(1<<20, 0))
		pc.Site = site
		if pc.Validate() == nil {
			t.Errorf("site %q accepted", site)
		}
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		if _, err := pc.Save(context.Background(), req, 200, http.Header{"Cache-Control": {"max-age=60"}}, nil, time.Now().UnixMilli()); err == nil {
			t.Errorf("site %q: Save stored under a bad site", site)
		}
	}
	for _, site := range []string{"shop.example", "shop.example:8443", "[::1]:8080", "127.0.0.1"} {
		pc := pages.New(stores.NewMemory(1<<20, 0))
		pc.Site = site
		if err := pc.Validate(); err != nil {
			t.Errorf("site %q: %v", site, err)
		}
	}
	if _, err := pages.ParseTrustedProxies("proxy.example"); err == nil {
		t.Error("a host name accepted as a trusted proxy")
	}
	if _, err := pages.ParseTrustedProxies("10.0.0.0/33"); err == nil {
		t.Error("a bad network accepted")
	}
	got, err := pages.ParseTrustedProxies("10.0.0.0/8", "::1", "::ffff:192.0.2.7")
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("192.0.2.7/32")}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%v %v", got, err)
	}
}
