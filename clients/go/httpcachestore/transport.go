// The way to use a shared Cache: an http.RoundTripper of httpcache over the Cache, with a layer below httpcache
// that stamps each response fetched for a request without Authorization with the Cache's random token (so Set
// may store it, shared.go) after removing any stamp the origin sent, and a layer above that removes the stamp
// before the caller sees the response.
package httpcachestore

import (
	"net/http"

	"github.com/gregjones/httpcache"
)

// Transport is httpcache over this cache, fetching through next (nil: http.DefaultTransport). Responses served
// from the cache carry X-From-Cache: 1.
func (h *Cache) Transport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return unstamping{&httpcache.Transport{Transport: stamping{next, h.token}, Cache: h, MarkCachedResponses: true}}
}

// Client is an http.Client over Transport(nil).
func (h *Cache) Client() *http.Client { return &http.Client{Transport: h.Transport(nil)} }

// stamping sits below httpcache: it marks the responses to requests without credentials.
type stamping struct {
	next  http.RoundTripper
	token string
}

func (s stamping) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.next.RoundTrip(req)
	if err != nil || resp == nil {
		return resp, err
	}
	if resp.Header == nil {
		resp.Header = http.Header{}
	}
	resp.Header.Del(stampHeader)
	if len(req.Header.Values("Authorization")) == 0 {
		resp.Header.Set(stampHeader, s.token)
	}
	return resp, nil
}

// unstamping sits above httpcache: the caller gets the response without the stamp (httpcache keeps its own copy
// of the headers, which it dumps into the cache once the body is read).
type unstamping struct{ cache *httpcache.Transport }

func (u unstamping) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := u.cache.RoundTrip(req)
	if err != nil || resp == nil || len(resp.Header.Values(stampHeader)) == 0 {
		return resp, err
	}
	out := *resp
	out.Header = resp.Header.Clone()
	out.Header.Del(stampHeader)
	return &out, nil
}
