// Package httpcachestore lets Go HTTP clients cache in a larder store: an implementation of
// github.com/gregjones/httpcache's Cache interface over a larder.Cache. httpcache hands over whole dumped
// responses keyed by URL; each is stored as a larder entry (serializer raw, so every language's inspect shows it)
// under the safe key of "httpcache:" + the URL, with an optional TTL bounding how long a store keeps it.
//
// httpcache itself is a private (single-user) cache: it stores `Cache-Control: private` responses, responses to
// requests that carried Authorization, and responses that set cookies. A larder store is shared, so the Cache New
// makes is a SHARED cache and stores only what RFC 9111 §3 lets a shared cache store (shared.go): never a private
// response, never one that sets a cookie (unless StoreSetCookie), and a response to a request with Authorization
// only when it says public, s-maxage or must-revalidate; and keeps a response no longer than its s-maxage, which
// httpcache does not read. httpcache's Set sees the dumped response, not the request,
// so which responses answered a request without credentials is told by the package's own Transport
// (transport.go); under a bare httpcache.Transport every response is taken to have answered one with credentials.
// NewPrivate makes the private kind, for one user's own namespace.
package httpcachestore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/gregjones/httpcache"

	larder "github.com/larder-cache/larder/clients/go"
	"github.com/larder-cache/larder/clients/go/format"
	"github.com/larder-cache/larder/clients/go/stores"
)

// Cache is an httpcache.Cache over a larder store.
type Cache struct {
	c *larder.Cache
	// TTL bounds how long the store keeps a response (0 = no bound; httpcache revalidates by itself).
	TTL time.Duration
	// Timeout bounds each store call (httpcache's interface has no context). Default 1 s.
	Timeout time.Duration
	// StoreSetCookie lets a shared cache store responses that set cookies (as the front's cache_set_cookie):
	// off by default, since one user's cookie would be handed to every other.
	StoreSetCookie bool

	private bool
	// token marks the responses this Cache's Transport fetched for requests without Authorization; random, so an
	// origin (or anyone else writing response headers) cannot forge it.
	token string
}

var _ httpcache.Cache = (*Cache)(nil)

// New makes a shared httpcache.Cache over store, its keys under the namespace "httpcache": it stores only what a
// shared cache may (RFC 9111 §3). Use it through c.Transport or c.Client, so that responses to requests without
// credentials can be stored.
func New(store stores.Store) *Cache {
	return newCache(store, "httpcache", false)
}

// NewPrivate makes a private cache for one user (owner, a name of the caller's choosing that no other user
// shares), under the namespace "httpcache-private:" + owner: it stores what httpcache stores, private responses,
// cookies and responses to requests with credentials included, and so must never be shared between users.
func NewPrivate(store stores.Store, owner string) *Cache {
	return newCache(store, "httpcache-private:"+owner, true)
}

func newCache(store stores.Store, namespace string, private bool) *Cache {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return &Cache{c: larder.New(store, larder.WithNamespace(namespace), larder.WithSerializer(format.Raw)),
		Timeout: time.Second, private: private, token: hex.EncodeToString(b[:])}
}

// Private reports whether the cache is a private (single-user) one.
func (h *Cache) Private() bool { return h.private }

func (h *Cache) ctx() (context.Context, context.CancelFunc) {
	t := h.Timeout
	if t == 0 {
		t = time.Second
	}
	return context.WithTimeout(context.Background(), t)
}

// Get returns the response stored under key (a store failure reads as a miss). A shared cache never returns a
// stored response that a shared cache may not serve (private, or setting a cookie), whoever wrote it.
func (h *Cache) Get(key string) ([]byte, bool) {
	ctx, cancel := h.ctx()
	defer cancel()
	v, ok := h.c.Get(ctx, key)
	if !ok {
		return nil, false
	}
	b, ok := v.([]byte)
	if !ok || (!h.private && h.refusal(b, true) != "") {
		return nil, false
	}
	return b, true
}

// Set stores a response (a store failure is dropped, as httpcache's interface cannot report it; Stats counts it).
// A shared cache that may not store the response deletes what the key held instead, so a copy the origin has
// stopped allowing is not served again.
func (h *Cache) Set(key string, response []byte) {
	ctx, cancel := h.ctx()
	defer cancel()
	if !h.private && h.refusal(response, false) != "" {
		_, _ = h.c.Delete(ctx, key)
		return
	}
	ttl := h.TTL
	if limit, ok := sharedMaxAge(response); ok && !h.private {
		if limit <= 0 {
			_, _ = h.c.Delete(ctx, key)
			return
		}
		if ttl <= 0 || limit < ttl {
			ttl = limit
		}
	}
	var opts []larder.EntryOption
	if ttl > 0 {
		opts = append(opts, larder.TTL(ttl))
	}
	_ = h.c.Set(ctx, key, withoutStamp(response), opts...)
}

// Delete removes the response stored under key.
func (h *Cache) Delete(key string) {
	ctx, cancel := h.ctx()
	defer cancel()
	_, _ = h.c.Delete(ctx, key)
}

// Larder is the underlying cache (stats, purges).
func (h *Cache) Larder() *larder.Cache { return h.c }
