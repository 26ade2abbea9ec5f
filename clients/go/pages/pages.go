// Package pages writes the pages a Go app renders into the shared store, under exactly the key `larder serve
// --store URL` looks them up under, so the front answers later requests without the app: the model of the
// Python client's larder.pages. Which responses: the ones the front's own storage rules (spec/HTTP.md §1,
// package httprules) would store; a handler opts in with FrontHeaders (Surrogate-Control, honoured by larder
// and never passed on). What: the entry the front would have made (end-to-end headers, the body's coding, Age
// and Date, freshness and stale window from the rules, tags from Surrogate-Key and Cache-Tag). A response that
// varies goes under a variant key behind a marker (FORMAT.md §5.4). Under which site: only one that can be
// trusted (site.go, spec/HTTP.md §2). A failed store write is counted, never returned to the client: the app's
// response goes out whatever the store does.
package pages

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/larder-cache/larder/clients/go/format"
	"github.com/larder-cache/larder/clients/go/httprules"
	"github.com/larder-cache/larder/clients/go/keys"
	"github.com/larder-cache/larder/clients/go/stores"
)

// DefaultMaxBody is `larder serve`'s --max-body: larger bodies are not stored.
const DefaultMaxBody = 8 << 20

// hopByHop are never stored (RFC 9110 §7.6.1), nor the fields Connection names.
var hopByHop = map[string]bool{"connection": true, "keep-alive": true, "proxy-connection": true,
	"proxy-authenticate": true, "proxy-authentication-info": true, "proxy-authorization": true, "te": true,
	"trailer": true, "transfer-encoding": true, "upgrade": true}

// consumed steer larder and are neither passed on nor stored.
var consumed = map[string]bool{"surrogate-control": true, "surrogate-key": true, "cache-tag": true}

// Cache writes rendered responses into a shared store for the front.
type Cache struct {
	Store stores.Store
	// Namespace and Drop are the front's --namespace and --drop-query-params (nil: the default list).
	Namespace string
	Drop      []string
	// Scheme keys every request when set ("http" or "https"); empty: a trusted proxy's X-Forwarded-Proto or
	// Forwarded proto, else https when the app's server terminates TLS itself, else http (spec/HTTP.md §2 step 5;
	// the front keys http unless a trusted proxy before it says https).
	Scheme string
	// Site is the authority the app serves ("shop.example", "shop.example:8443"): every page is keyed on it, and a
	// request whose Host (or trusted forwarded host) is another authority is not stored (reason "host"). Empty:
	// the request's Host, when it is a plain authority (spec/HTTP.md §2).
	Site string
	// TrustedProxies are the peers (ParseTrustedProxies) whose X-Forwarded-Host, X-Forwarded-Proto and Forwarded
	// are believed, as `larder serve --trusted-proxies`: typically the front's own address, when the front has a
	// trusted proxy of its own. From any other peer those fields are ignored, and the middleware removes them
	// before the handler runs. Empty by default.
	TrustedProxies []netip.Prefix
	// Rules are the front's caching settings (httprules.DefaultRules() = larder serve's defaults).
	Rules   httprules.Rules
	MaxBody int
	// Timeout bounds the store writes made after a response (default 1 s).
	Timeout time.Duration

	mu    sync.Mutex
	stats Stats
}

// Stats: pages stored, responses not stored by reason, failed writes.
type Stats struct {
	Stored    int
	NotStored map[string]int
	Errors    int
}

// New makes a page cache over store with the front's defaults.
func New(store stores.Store) *Cache {
	return &Cache{Store: store, Rules: httprules.DefaultRules(), MaxBody: DefaultMaxBody, Timeout: time.Second}
}

// Stats returns a copy of the counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.NotStored = map[string]int{}
	for k, v := range c.stats.NotStored {
		s.NotStored[k] = v
	}
	return s
}

func (c *Cache) count(stored bool, notStored string, failed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stats.NotStored == nil {
		c.stats.NotStored = map[string]int{}
	}
	switch {
	case stored:
		c.stats.Stored++
	case notStored != "":
		c.stats.NotStored[notStored]++
	case failed:
		c.stats.Errors++
	}
}

// FrontHeaders opts a response in to the front for ttl, tagged tags: Surrogate-Control (honoured by larder, never
// passed on) and Surrogate-Key. Call before writing the header.
func FrontHeaders(h http.Header, ttl time.Duration, tags ...string) {
	h.Set("Surrogate-Control", "max-age="+strconv.FormatInt(int64(ttl/time.Second), 10))
	if len(tags) > 0 {
		h.Set("Surrogate-Key", strings.Join(tags, " "))
	}
}

// Key is the key the front looks a request up under (FORMAT.md §5.3); for a varying page, its marker's. It is ""
// for a request whose site cannot be trusted (spec/HTTP.md §2), which no page is stored for.
func (c *Cache) Key(r *http.Request) string {
	if c.Validate() != nil {
		return ""
	}
	scheme, authority, ok := c.site(r)
	if !ok {
		return ""
	}
	return keys.HTTPKey("GET", scheme, authority, pathAndQuery(r), c.Namespace, c.Drop)
}

// requestLines are a request's header lines (per name, values in the order received).
func requestLines(h http.Header) []httprules.Line {
	names := make([]string, 0, len(h))
	for n := range h {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []httprules.Line
	for _, n := range names {
		for _, v := range h[n] {
			out = append(out, httprules.Line{Name: strings.ToLower(n), Value: v})
		}
	}
	return out
}

func headerLines(lines []httprules.Line) []keys.HeaderLine {
	out := make([]keys.HeaderLine, len(lines))
	for i, l := range lines {
		out[i] = keys.HeaderLine{Name: l.Name, Value: l.Value}
	}
	return out
}

// Save stores a rendered response if the front's rules allow it; it returns the key it went under, or "" when
// it was not stored (Stats says why).
func (c *Cache) Save(ctx context.Context, r *http.Request, status int, header http.Header, body []byte, requestTimeMs int64) (string, error) {
	if c.Store == nil {
		return "", fmt.Errorf("pages: no store")
	}
	if err := c.Validate(); err != nil {
		c.count(false, "", true)
		return "", err
	}
	if _, _, ok := c.site(r); !ok {
		c.count(false, "host", false)
		return "", nil
	}
	now := time.Now().UnixMilli()
	req := requestLines(r.Header)
	resp := requestLines(header)
	d := httprules.Storage(c.Rules, r.Method, req, status, resp, requestTimeMs, now)
	if !d.Stored {
		c.count(false, d.Reason, false)
		return "", nil
	}
	maxBody := c.MaxBody
	if maxBody == 0 {
		maxBody = DefaultMaxBody
	}
	if len(body) > maxBody {
		c.count(false, "too-large", false)
		return "", nil
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	key, err := c.write(ctx, r, req, status, resp, body, d, now)
	if err != nil {
		c.count(false, "", true)
		return "", err
	}
	c.count(true, "", false)
	return key, nil
}

type meta struct{ created, expires, stale uint64 }

func (m meta) hard() uint64 {
	h, ok := format.HardExpiry(m.expires, m.stale)
	if !ok {
		return ^uint64(0)
	}
	return h
}

func (c *Cache) write(ctx context.Context, r *http.Request, req []httprules.Line, status int, resp []httprules.Line, body []byte, d httprules.Decision, now int64) (string, error) {
	response, tags := prepare(status, resp, body, d, now)
	m := meta{uint64(now), uint64(max(now+d.FreshMs, 1)), uint64(d.KeepStaleMs)}
	o := format.DefaultOptions()
	o.Compressor = format.None
	o.CreatedAt, o.ExpiresAt, o.StaleMs, o.Tags = &m.created, m.expires, m.stale, tags
	entry, err := format.EncodeResponse(response, o)
	if err != nil {
		return "", err
	}
	base := c.Key(r)
	if len(d.Vary) == 0 {
		return base, c.Store.Set(ctx, base, entry, 0)
	}
	var generation string
	markerMeta := m
	if old, oldMeta, ok := c.marker(ctx, base); ok && strings.Join(old.Vary, "\n") == strings.Join(d.Vary, "\n") && old.Generation != nil {
		generation = *old.Generation
		if oldMeta.hard() > m.hard() {
			markerMeta = oldMeta
		}
	} else {
		var b [8]byte
		_, _ = rand.Read(b[:])
		generation = hex.EncodeToString(b[:])
	}
	vary := make([]any, len(d.Vary))
	for i, n := range d.Vary {
		vary[i] = n
	}
	mo := format.DefaultOptions()
	mo.Compressor = format.None
	mo.CreatedAt, mo.ExpiresAt, mo.StaleMs = &markerMeta.created, markerMeta.expires, markerMeta.stale
	markerBytes, err := format.Encode(format.NewMap("vary", vary, "generation", generation), mo)
	if err != nil {
		return "", err
	}
	key := keys.VariantKey(base, keys.Marker{Vary: d.Vary, Generation: &generation}, headerLines(req))
	if err := c.Store.Set(ctx, key, entry, 0); err != nil {
		return "", err
	}
	return key, c.Store.Set(ctx, base, markerBytes, 0)
}

// marker reads the Vary marker a base key holds.
func (c *Cache) marker(ctx context.Context, base string) (keys.Marker, meta, bool) {
	raw, err := c.Store.Get(ctx, base)
	if err != nil || raw == nil {
		return keys.Marker{}, meta{}, false
	}
	e, err := format.Decode(raw, format.DefaultMaxSize)
	if err != nil {
		return keys.Marker{}, meta{}, false
	}
	mk, ok := MarkerOf(e)
	return mk, meta{e.CreatedAt, e.ExpiresAt, e.StaleMs}, ok
}

// MarkerOf reads a Vary marker entry (a msgpack map {"vary": [names], "generation"?: G}).
func MarkerOf(e *format.Entry) (keys.Marker, bool) {
	m, ok := e.Value.(*format.Map)
	if e.Kind != format.KindValue || !ok {
		return keys.Marker{}, false
	}
	v, _ := m.Get("vary")
	list, ok := v.([]any)
	if !ok {
		return keys.Marker{}, false
	}
	var mk keys.Marker
	for _, n := range list {
		s, ok := n.(string)
		if !ok {
			return keys.Marker{}, false
		}
		mk.Vary = append(mk.Vary, s)
	}
	if g, found := m.Get("generation"); found {
		s, ok := g.(string)
		if !ok {
			return keys.Marker{}, false
		}
		mk.Generation = &s
	}
	return mk, true
}

// Find returns the stored response the front would find for r (fresh or stale), and its key.
func (c *Cache) Find(ctx context.Context, r *http.Request) (string, *format.Entry, error) {
	base := c.Key(r)
	if base == "" {
		return "", nil, nil
	}
	raw, err := c.Store.Get(ctx, base)
	if err != nil || raw == nil {
		return "", nil, err
	}
	e, err := format.Decode(raw, format.DefaultMaxSize)
	if err != nil {
		return "", nil, nil
	}
	if e.Kind == format.KindResponse {
		return base, e, nil
	}
	mk, ok := MarkerOf(e)
	if !ok {
		return "", nil, nil
	}
	key := keys.VariantKey(base, mk, headerLines(requestLines(r.Header)))
	raw, err = c.Store.Get(ctx, key)
	if err != nil || raw == nil {
		return "", nil, err
	}
	v, err := format.Decode(raw, format.DefaultMaxSize)
	if err != nil || v.Kind != format.KindResponse {
		return "", nil, nil
	}
	return key, v, nil
}

// PurgeURL removes the page for GET url (its response or marker, and its alternate codings): under Scheme when
// one is set, else under both http and https (which the page was keyed on depends on who forwarded it).
func (c *Cache) PurgeURL(ctx context.Context, url string) (int, error) {
	_, rest, ok := strings.Cut(url, "://")
	if !ok {
		_, err := keys.URLKey("GET", url, c.Namespace, c.Drop)
		return 0, err
	}
	schemes := []string{"http", "https"}
	if c.Scheme != "" {
		schemes = []string{strings.ToLower(c.Scheme)}
	}
	var all []string
	for _, scheme := range schemes {
		base, err := keys.URLKey("GET", scheme+"://"+rest, c.Namespace, c.Drop)
		if err != nil {
			return 0, err
		}
		all = append(all, keys.URLKeys(base)...)
	}
	return c.Store.DeleteMulti(ctx, all)
}

// PurgeTag removes every page tagged tag (Surrogate-Key, Cache-Tag), for every front reading the store.
func (c *Cache) PurgeTag(ctx context.Context, tag string) (stores.Purged, error) {
	return c.Store.PurgeTag(ctx, tag)
}

// prepare is the response as the front stores it (stored.rs prepare), and its tags.
func prepare(status int, lines []httprules.Line, body []byte, d httprules.Decision, now int64) (*format.Response, []string) {
	named := map[string]bool{}
	for _, l := range lines {
		if l.Name == "connection" {
			for _, o := range strings.Split(l.Value, ",") {
				named[strings.ToLower(strings.TrimSpace(o))] = true
			}
		}
	}
	tagSet := map[string]bool{}
	var kept []httprules.Line
	for _, l := range lines {
		if hopByHop[l.Name] || named[l.Name] {
			continue
		}
		switch l.Name {
		case "surrogate-key":
			for _, t := range strings.Fields(l.Value) {
				tagSet[t] = true
			}
		case "cache-tag":
			for _, t := range strings.Split(l.Value, ",") {
				if t = strings.TrimSpace(t); t != "" {
					tagSet[t] = true
				}
			}
		}
		if consumed[l.Name] || l.Name == "content-length" || l.Name == "age" {
			continue
		}
		kept = append(kept, l)
	}
	encoding := "identity"
	var codings []string
	for _, l := range kept {
		if l.Name == "content-encoding" {
			codings = append(codings, l.Value)
		}
	}
	if len(codings) == 1 {
		if c := strings.ToLower(strings.TrimSpace(codings[0])); c == "identity" || c == "gzip" || c == "br" || c == "zstd" {
			encoding = c
			out := kept[:0]
			for _, l := range kept {
				if l.Name != "content-encoding" {
					out = append(out, l)
				}
			}
			kept = out
		}
	}
	kept = append(kept, httprules.Line{Name: "age", Value: strconv.FormatInt(d.InitialAgeMs/1000, 10)})
	hasDate := false
	for _, l := range kept {
		hasDate = hasDate || l.Name == "date"
	}
	if !hasDate {
		kept = append(kept, httprules.Line{Name: "date", Value: httprules.FormatHTTPDate(now)})
	}
	r := &format.Response{Status: status, Body: body, ContentEncoding: encoding}
	for _, l := range kept {
		r.Headers = append(r.Headers, format.Field{Name: []byte(l.Name), Value: []byte(l.Value)})
	}
	tags := make([]string, 0, len(tagSet))
	for t := range tagSet {
		tags = append(tags, t)
	}
	sort.Strings(tags)
	return r, tags
}
