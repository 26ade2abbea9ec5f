// Package httpcachestore lets Go HTTP clients cache in a shared larder store: an implementation of
// github.com/gregjones/httpcache's Cache interface over a larder.Cache. httpcache hands over whole dumped
// responses keyed by URL; each is stored as a larder entry (serializer raw, so every language's inspect shows it)
// under the safe key of "httpcache:" + the URL, with an optional TTL bounding how long a store keeps it.
package httpcachestore

import (
	"context"
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
}

var _ httpcache.Cache = (*Cache)(nil)

// New makes an httpcache.Cache over store, its keys under the namespace "httpcache".
func New(store stores.Store) *Cache {
	return &Cache{c: larder.New(store, larder.WithNamespace("httpcache"), larder.WithSerializer(format.Raw)), Timeout: time.Second}
}

func (h *Cache) ctx() (context.Context, context.CancelFunc) {
	t := h.Timeout
	if t == 0 {
		t = time.Second
	}
	return context.WithTimeout(context.Background(), t)
}

// Get returns the response stored under key (a store failure reads as a miss).
func (h *Cache) Get(key string) ([]byte, bool) {
	ctx, cancel := h.ctx()
	defer cancel()
	v, ok := h.c.Get(ctx, key)
	if !ok {
		return nil, false
	}
	b, ok := v.([]byte)
	return b, ok
}

// Set stores a response (a store failure is dropped, as httpcache's interface cannot report it; Stats counts it).
func (h *Cache) Set(key string, response []byte) {
	ctx, cancel := h.ctx()
	defer cancel()
	var opts []larder.EntryOption
	if h.TTL > 0 {
		opts = append(opts, larder.TTL(h.TTL))
	}
	_ = h.c.Set(ctx, key, response, opts...)
}

// Delete removes the response stored under key.
func (h *Cache) Delete(key string) {
	ctx, cancel := h.ctx()
	defer cancel()
	_, _ = h.c.Delete(ctx, key)
}

// Larder is the underlying cache (stats, purges).
func (h *Cache) Larder() *larder.Cache { return h.c }
