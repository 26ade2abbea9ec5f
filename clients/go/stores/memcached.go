// The memcached store (STORES.md §4): larder's own meta-protocol client, because the common Go client speaks
// the text protocol, picks servers by CRC32 rather than the spec's ketama ring, and has no ejection. Keys go to
// servers by ketama (package ring); an ejected server's keys move to the others; multi-gets are pipelined per
// server; purges are records that every reader checks (§4.4).
package stores

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/larder-cache/larder/clients/go/format"
	"github.com/larder-cache/larder/clients/go/ring"
)

// Memcached is the memcached store.
type Memcached struct {
	servers     []*mcServer
	opts        remoteOptions
	maxItem     int
	prefixPurge bool
	skew        int64
	retention   int64

	mu        sync.Mutex
	ringMask  []uint64 // the admitted servers the ring was built for, one bit each
	ring      *ring.Ring
	ringSpecs []ring.Server
}

func openMemcached(u *URL) (Store, error) {
	hosts := u.Hosts
	if len(hosts) == 0 {
		return nil, u.errorf("memcached:// needs at least one host")
	}
	if u.Path != "" && u.Path != "/" {
		return nil, u.errorf("memcached:// takes no path")
	}
	o, err := u.remote(2, 5*time.Second)
	if err != nil {
		return nil, err
	}
	weights := make([]int, len(hosts))
	for i := range weights {
		weights[i] = 1
	}
	if w, ok := u.take("weights"); ok {
		parts := strings.Split(w, ",")
		if len(parts) != len(hosts) {
			return nil, u.errorf("option weights=%q: one weight per host (%d hosts)", w, len(hosts))
		}
		for i, p := range parts {
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 || n > 1000 {
				return nil, u.errorf("option weights=%q: each weight is a whole number from 1 to 1000", w)
			}
			weights[i] = n
		}
	}
	maxItem, err := u.size("max_item", 1<<20)
	if err != nil {
		return nil, err
	}
	prefixPurge, err := u.boolean("prefix_purge", true)
	if err != nil {
		return nil, err
	}
	skew, err := u.duration("purge_skew", time.Second)
	if err != nil {
		return nil, err
	}
	retention, err := u.duration("purge_retention", 30*24*time.Hour)
	if err != nil {
		return nil, err
	}
	if err := u.finish(); err != nil {
		return nil, err
	}
	m := &Memcached{opts: o, maxItem: int(maxItem), prefixPurge: prefixPurge, skew: skew.Milliseconds(),
		retention: retention.Milliseconds()}
	for i, h := range hosts {
		m.servers = append(m.servers, newMCServer(h, weights[i], &m.opts, m.maxItem))
		m.ringSpecs = append(m.ringSpecs, ring.Server{Host: m.servers[i].written, Port: m.servers[i].port, Weight: weights[i]})
	}
	return m, nil
}

func (m *Memcached) Backend() string { return "memcached" }

// MaxValue is max_item less memcached's 50-byte item overhead and the longest key.
func (m *Memcached) MaxValue() int { return m.maxItem - 50 - 250 }

func (m *Memcached) Close() error {
	for _, s := range m.servers {
		s.close()
	}
	return nil
}

// pick returns the server for a stored key under the current ring (ejected servers left out), or nil when
// every server is ejected. One server needs no hashing; the ring is rebuilt only when the set of admitted
// servers changes, and found without allocating while it does not.
func (m *Memcached) pick(stored string) *mcServer {
	if len(m.servers) == 1 {
		if m.servers[0].health.inService() {
			return m.servers[0]
		}
		return nil
	}
	var admitted [4]uint64
	mask := admitted[:0]
	if n := (len(m.servers) + 63) / 64; n > len(admitted) {
		mask = make([]uint64, 0, n)
	}
	mask = mask[:(len(m.servers)+63)/64]
	for i, s := range m.servers {
		if s.health.inService() {
			mask[i/64] |= 1 << (i % 64)
		}
	}
	m.mu.Lock()
	if m.ring == nil || !slices.Equal(m.ringMask, mask) {
		ejected := map[int]bool{}
		for i := range m.servers {
			if mask[i/64]&(1<<(i%64)) == 0 {
				ejected[i] = true
			}
		}
		m.ring, m.ringMask = ring.Build(m.ringSpecs, ejected), slices.Clone(mask)
	}
	r := m.ring
	m.mu.Unlock()
	i := r.Pick(stored)
	if i < 0 {
		return nil
	}
	return m.servers[i]
}

// errEveryServerEjected marks a request refused because no server is on the ring.
var errEveryServerEjected = errors.New("every server is ejected after failures")

func (m *Memcached) allEjected() error {
	return &Error{Kind: Unavailable, Backend: "memcached", Err: errEveryServerEjected}
}

// onServer runs fn on the key's server, and once more on its new server when this failure ejected it.
func (m *Memcached) onServer(ctx context.Context, stored string, fn func(s *mcServer, dl time.Time) error) error {
	dl := deadline(ctx, m.opts.timeout)
	s := m.pick(stored)
	if s == nil {
		return m.allEjected()
	}
	err := fn(s, dl)
	if !ejectedBy(ctx, err, s) {
		return err
	}
	if again := m.pick(stored); again != nil && again != s {
		return fn(again, deadline(ctx, m.opts.timeout))
	}
	return err
}

// ejectedBy reports whether err is a failure of s that left it ejected (§4.3): the request is then retried once
// on its keys' new servers. Answers are not failures of the server, and a caller whose context is done gets no
// retry (it would only charge a failure to the next server).
func ejectedBy(ctx context.Context, err error, s *mcServer) bool {
	return err != nil && ctx.Err() == nil && KindOf(err) != Other && !errors.Is(err, context.Canceled) &&
		!s.health.inService()
}

func (m *Memcached) stored(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", keyError("memcached", err)
	}
	return StoredKey(m.opts.prefix, key), nil
}

// rawGetMulti fetches stored keys, grouped by server, pipelined, servers in parallel. When a server's failure
// ejects it mid-call, its keys are grouped again on the rebuilt ring and retried once, each on its own new
// server (STORES.md §4.3); the other servers' replies stand.
func (m *Memcached) rawGetMulti(ctx context.Context, stored []string) ([][]byte, error) {
	out := make([][]byte, len(stored))
	all := make([]int, len(stored))
	for i := range all {
		all[i] = i
	}
	retry, ejecting, err := m.getGroups(ctx, stored, all, out, true)
	if err != nil {
		return nil, err
	}
	if len(retry) > 0 {
		if _, _, err := m.getGroups(ctx, stored, retry, out, false); err != nil {
			if errors.Is(err, errEveryServerEjected) {
				return nil, ejecting // no server left for a retry: the failure itself is the answer
			}
			return nil, err
		}
	}
	return out, nil
}

// getGroups reads stored[i] for i in idx into out[i], one pipelined batch per server under one deadline. With
// mayRetry, the indexes of a batch whose failure ejected its server are returned for a retry (with one such
// failure) instead of an error.
func (m *Memcached) getGroups(ctx context.Context, stored []string, idx []int, out [][]byte, mayRetry bool) ([]int, error, error) {
	// One server for every key (the common case) needs no map and no goroutine.
	var only *mcServer
	var groups map[*mcServer][]int
	for n, i := range idx {
		s := m.pick(stored[i])
		if s == nil {
			return nil, nil, m.allEjected()
		}
		if groups == nil {
			if n == 0 || s == only {
				only = s
				continue
			}
			groups = map[*mcServer][]int{only: slices.Clone(idx[:n])}
		}
		groups[s] = append(groups[s], i)
	}
	dl := deadline(ctx, m.opts.timeout)
	run := func(s *mcServer, idx []int) error {
		return s.do(ctx, dl, func(w *wireWriter) {
			for _, i := range idx {
				writeMg(w, stored[i])
			}
		}, func(c *wireConn) error {
			for _, i := range idx {
				v, _, err := c.value(s.maxItem, false)
				if err != nil {
					return err
				}
				out[i] = v
			}
			return nil
		})
	}
	var mu sync.Mutex
	var first, ejecting error
	var retry []int
	outcome := func(s *mcServer, idx []int, err error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
		case mayRetry && ejectedBy(ctx, err, s):
			retry, ejecting = append(retry, idx...), err
		case first == nil:
			first = err
		}
	}
	if groups == nil {
		if only != nil {
			outcome(only, idx, run(only, idx))
		}
		return retry, ejecting, first
	}
	var wg sync.WaitGroup
	for s, idx := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outcome(s, idx, run(s, idx))
		}()
	}
	wg.Wait()
	return retry, ejecting, first
}

// writeMg asks for one stored key's value.
func writeMg(w *wireWriter, stored string) {
	w.WriteString("mg ")
	w.WriteString(stored)
	w.WriteString(" v\r\n")
}

// Get reads one key: one mg on its server, and the tag records only when the value is an entry with tags. With
// prefix_purge the prefix list comes in the same round trip, as in GetMulti.
func (m *Memcached) Get(ctx context.Context, key string) ([]byte, error) {
	if m.prefixPurge {
		vs, err := m.GetMulti(ctx, []string{key})
		if err != nil {
			return nil, err
		}
		return vs[0], nil
	}
	stored, err := m.stored(key)
	if err != nil {
		return nil, err
	}
	var v []byte
	err = m.onServer(ctx, stored, func(s *mcServer, dl time.Time) error {
		return s.do(ctx, dl, func(w *wireWriter) { writeMg(w, stored) }, func(c *wireConn) error {
			var err error
			v, _, err = c.value(s.maxItem, false)
			return err
		})
	})
	if err != nil || !format.LooksLikeEntry(v) {
		return v, err
	}
	vals := [][]byte{v}
	if err := m.hidePurged(ctx, []string{key}, vals, nil); err != nil {
		return nil, err
	}
	return vals[0], nil
}

// GetMulti reads the keys and, in the same round trip, the prefix list; entries hidden by a purge record are
// misses (§4.4).
func (m *Memcached) GetMulti(ctx context.Context, keys []string) ([][]byte, error) {
	stored := make([]string, 0, len(keys)+1)
	for _, k := range keys {
		s, err := m.stored(k)
		if err != nil {
			return nil, err
		}
		stored = append(stored, s)
	}
	if m.prefixPurge {
		stored = append(stored, InternalKey(m.opts.prefix, "prefixes", ""))
	}
	vals, err := m.rawGetMulti(ctx, stored)
	if err != nil {
		return nil, err
	}
	var prefixes []purgeLine
	if m.prefixPurge {
		prefixes = parsePurgeLines(vals[len(keys)])
		vals = vals[:len(keys)]
	}
	if err := m.hidePurged(ctx, keys, vals, prefixes); err != nil {
		return nil, err
	}
	return vals, nil
}

// hidePurged turns into misses the entries among vals (the values of keys) that a prefix line or, read in one
// more round trip, a tag record purged. Values that are not entries (counters, locks) are never affected.
func (m *Memcached) hidePurged(ctx context.Context, keys []string, vals [][]byte, prefixes []purgeLine) error {
	var created []int64
	var entryTagsOf [][]string
	var tagKeys map[string]int
	var tagList []string
	for i, v := range vals {
		if !format.LooksLikeEntry(v) {
			continue
		}
		h, err := format.ReadHeader(v)
		if err != nil {
			continue
		}
		if purgedByPrefix(keys[i], int64(h.CreatedAt), prefixes, m.skew) {
			vals[i] = nil
			continue
		}
		if len(h.Tags) == 0 {
			continue
		}
		if created == nil {
			created, entryTagsOf, tagKeys = make([]int64, len(vals)), make([][]string, len(vals)), map[string]int{}
		}
		created[i], entryTagsOf[i] = int64(h.CreatedAt), h.Tags
		for _, t := range h.Tags {
			if _, ok := tagKeys[t]; !ok {
				tagKeys[t] = len(tagList)
				tagList = append(tagList, InternalKey(m.opts.prefix, "tag", t))
			}
		}
	}
	if len(tagList) == 0 {
		return nil
	}
	records, err := m.rawGetMulti(ctx, tagList)
	if err != nil {
		return err
	}
	for i, tags := range entryTagsOf {
		for _, t := range tags {
			if r := records[tagKeys[t]]; r != nil {
				if at, ok := parseCounter(r); ok && created[i] <= at+m.skew {
					vals[i] = nil
					break
				}
			}
		}
	}
	return nil
}

type purgeLine struct {
	at     int64
	prefix string
}

func parsePurgeLines(v []byte) []purgeLine {
	var out []purgeLine
	for _, l := range strings.Split(string(v), "\n") {
		ms, p, ok := strings.Cut(l, " ")
		if !ok {
			continue
		}
		if at, err := strconv.ParseInt(ms, 10, 64); err == nil {
			out = append(out, purgeLine{at, p})
		}
	}
	return out
}

func purgedByPrefix(key string, created int64, lines []purgeLine, skew int64) bool {
	for _, l := range lines {
		if strings.HasPrefix(key, l.prefix) && created <= l.at+skew {
			return true
		}
	}
	return false
}

func (m *Memcached) tooLarge(key string, value []byte, stored string) error {
	if limit := m.maxItem - 50 - len(stored); len(value) > limit {
		return &Error{Kind: TooLarge, Backend: "memcached", Msg: fmt.Sprintf("value of %d bytes for key %s exceeds the %d-byte limit", len(value), key, limit)}
	}
	return nil
}

// store runs ms (add: ME) with the expiry of STORES.md §2; a write already past its expiry is md.
func (m *Memcached) store(ctx context.Context, key string, value []byte, ttl time.Duration, add bool) (bool, error) {
	stored, err := m.stored(key)
	if err != nil {
		return false, err
	}
	if err := m.tooLarge(key, value, stored); err != nil {
		return false, err
	}
	now := nowMs()
	exptime := memcachedExptime(expiresAt(value, ttl, now), now)
	var ok bool
	err = m.onServer(ctx, stored, func(s *mcServer, dl time.Time) error {
		if exptime < 0 {
			ok = false
			if add {
				return nil
			}
			return s.do(ctx, dl, func(w *wireWriter) { fmt.Fprintf(w, "md %s\r\n", stored) },
				func(c *wireConn) error { _, err := c.status("md", "HD", "NF"); return err })
		}
		return s.do(ctx, dl, func(w *wireWriter) {
			w.WriteString("ms ")
			w.WriteString(stored)
			w.WriteString(" ")
			w.Int(int64(len(value)))
			w.WriteString(" T")
			w.Int(exptime)
			w.WriteString(" F0")
			if add {
				w.WriteString(" ME")
			}
			w.WriteString("\r\n")
			w.ValueLine(value)
		}, func(c *wireConn) error {
			st, err := c.status("ms", "HD", "NS")
			ok = st == "HD"
			return err
		})
	})
	return ok, err
}

func (m *Memcached) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	_, err := m.store(ctx, key, value, ttl, false)
	return err
}

func (m *Memcached) SetMulti(ctx context.Context, items []Item, ttl time.Duration) error {
	for _, it := range items {
		if err := m.Set(ctx, it.Key, it.Value, ttl); err != nil {
			return err
		}
	}
	return nil
}

func (m *Memcached) Add(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	return m.store(ctx, key, value, ttl, true)
}

func (m *Memcached) Incr(ctx context.Context, key string, delta int64, ttl time.Duration, create bool) (int64, bool, error) {
	stored, err := m.stored(key)
	if err != nil {
		return 0, false, err
	}
	mode, abs := "I", uint64(delta)
	if delta < 0 {
		mode, abs = "D", uint64(-delta)
	}
	var result int64
	found := false
	err = m.onServer(ctx, stored, func(s *mcServer, dl time.Time) error {
		return s.do(ctx, dl, func(w *wireWriter) {
			fmt.Fprintf(w, "ma %s D%d M%s v", stored, abs, mode)
			if create {
				initial := max(delta, 0)
				exptime := max(memcachedExptime(expiresAt(nil, ttl, nowMs()), nowMs()), 0)
				fmt.Fprintf(w, " N%d J%d", exptime, initial)
			}
			w.WriteString("\r\n")
		}, func(c *wireConn) error {
			l, err := c.line()
			if err != nil {
				return err
			}
			switch {
			case bytes.Equal(l, []byte("NF")):
				return nil
			case bytes.HasPrefix(l, []byte("CLIENT_ERROR")) && bytes.Contains(l, []byte("non-numeric")):
				return errNotCounter
			case !bytes.HasPrefix(l, []byte("VA ")):
				return errorLine(l, "ma")
			}
			lenText, _, _ := bytes.Cut(l[3:], []byte(" "))
			n, ok := parseDigits(lenText)
			if !ok || n > 24 {
				return protoErr("ma: a counter of %q bytes", truncateBytes(l))
			}
			data, err := c.data(nil, int(n))
			if err != nil {
				return err
			}
			u, err := strconv.ParseUint(string(bytes.TrimRight(data, " ")), 10, 64)
			if err != nil {
				return protoErr("ma: not a number")
			}
			result, found = int64(min(u, 1<<63-1)), true
			return nil
		})
	})
	if errors.Is(err, errNotCounter) {
		return 0, false, &Error{Kind: NotACounter, Backend: "memcached", Msg: "key " + key + " holds a value that is not a counter"}
	}
	return result, found, err
}

var errNotCounter = &answerError{"not a counter"}

func (m *Memcached) DeleteIf(ctx context.Context, key string, expected []byte) (bool, error) {
	stored, err := m.stored(key)
	if err != nil {
		return false, err
	}
	deleted := false
	err = m.onServer(ctx, stored, func(s *mcServer, dl time.Time) error {
		var cas uint64
		var v []byte
		err := s.do(ctx, dl, func(w *wireWriter) { fmt.Fprintf(w, "mg %s v c\r\n", stored) }, func(c *wireConn) error {
			var err error
			v, cas, err = c.value(s.maxItem, true)
			return err
		})
		if err != nil || v == nil || !bytes.Equal(v, expected) {
			return err
		}
		return s.do(ctx, dl, func(w *wireWriter) { fmt.Fprintf(w, "md %s C%d\r\n", stored, cas) }, func(c *wireConn) error {
			st, err := c.status("md", "HD", "NF", "EX")
			deleted = st == "HD"
			return err
		})
	})
	return deleted, err
}

func (m *Memcached) Delete(ctx context.Context, key string) (bool, error) {
	stored, err := m.stored(key)
	if err != nil {
		return false, err
	}
	deleted := false
	err = m.onServer(ctx, stored, func(s *mcServer, dl time.Time) error {
		return s.do(ctx, dl, func(w *wireWriter) { fmt.Fprintf(w, "md %s\r\n", stored) }, func(c *wireConn) error {
			st, err := c.status("md", "HD", "NF")
			deleted = st == "HD"
			return err
		})
	})
	return deleted, err
}

func (m *Memcached) DeleteMulti(ctx context.Context, keys []string) (int, error) {
	n := 0
	for _, k := range keys {
		ok, err := m.Delete(ctx, k)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// PurgeTag writes the tag's record: the ms of this purge, never expiring.
func (m *Memcached) PurgeTag(ctx context.Context, tag string) (Purged, error) {
	rec := InternalKey(m.opts.prefix, "tag", tag)
	now := []byte(strconv.FormatInt(nowMs(), 10))
	err := m.onServer(ctx, rec, func(s *mcServer, dl time.Time) error {
		return s.do(ctx, dl, func(w *wireWriter) {
			fmt.Fprintf(w, "ms %s %d T0 F0\r\n%s\r\n", rec, len(now), now)
		}, func(c *wireConn) error { _, err := c.status("ms", "HD"); return err })
	})
	return Purged{Recorded: err == nil}, err
}

// PurgePrefix adds a line to the prefix list by read-modify-write with CAS, retried until it succeeds.
func (m *Memcached) PurgePrefix(ctx context.Context, prefix string) (Purged, error) {
	if err := CheckPrefix(prefix); err != nil {
		return Purged{}, keyError("memcached", err)
	}
	if !m.prefixPurge {
		return Purged{}, &Error{Kind: Unsupported, Backend: "memcached", Msg: "purge by prefix needs prefix_purge=true"}
	}
	list := InternalKey(m.opts.prefix, "prefixes", "")
	for attempt := 0; attempt < 100; attempt++ {
		var cur []byte
		var cas uint64
		err := m.onServer(ctx, list, func(s *mcServer, dl time.Time) error {
			return s.do(ctx, dl, func(w *wireWriter) { fmt.Fprintf(w, "mg %s v c\r\n", list) }, func(c *wireConn) error {
				var err error
				cur, cas, err = c.value(s.maxItem, true)
				return err
			})
		})
		if err != nil {
			return Purged{}, err
		}
		now := nowMs()
		lines := parsePurgeLines(cur)
		kept := []purgeLine{}
		for _, l := range lines {
			if l.at >= now-m.retention {
				kept = append(kept, l)
			}
		}
		kept = append(kept, purgeLine{now, prefix})
		if len(kept) > 1000 {
			kept = kept[len(kept)-1000:]
		}
		var b bytes.Buffer
		for _, l := range kept {
			fmt.Fprintf(&b, "%d %s\n", l.at, l.prefix)
		}
		ok := false
		err = m.onServer(ctx, list, func(s *mcServer, dl time.Time) error {
			return s.do(ctx, dl, func(w *wireWriter) {
				if cur == nil {
					fmt.Fprintf(w, "ms %s %d T0 F0 ME\r\n", list, b.Len())
				} else {
					fmt.Fprintf(w, "ms %s %d T0 F0 C%d\r\n", list, b.Len(), cas)
				}
				w.Write(b.Bytes())
				w.WriteString("\r\n")
			}, func(c *wireConn) error {
				st, err := c.status("ms", "HD", "NS", "EX", "NF")
				ok = st == "HD"
				return err
			})
		})
		if err != nil {
			return Purged{}, err
		}
		if ok {
			return Purged{Recorded: true}, nil
		}
	}
	return Purged{}, &Error{Kind: Other, Backend: "memcached", Msg: "the prefix list kept changing: 100 attempts"}
}

func (m *Memcached) Clear(ctx context.Context) error {
	if m.opts.prefix != "" {
		_, err := m.PurgePrefix(ctx, "")
		return err
	}
	for _, s := range m.servers {
		err := s.do(ctx, deadline(ctx, m.opts.timeout), func(w *wireWriter) { w.WriteString("flush_all\r\n") },
			func(c *wireConn) error { _, err := c.status("flush_all", "OK"); return err })
		if err != nil {
			return err
		}
	}
	return nil
}

func (m *Memcached) Stats(ctx context.Context) (Stats, error) {
	st := Stats{ServerErrors: map[string]int64{}}
	for _, s := range m.servers {
		st.ServerErrors[s.addr] = s.health.errorCount()
		err := s.do(ctx, deadline(ctx, m.opts.timeout), func(w *wireWriter) { w.WriteString("stats\r\n") }, func(c *wireConn) error {
			// The whole reply is bounded (STORES.md §2): memcached's stats are about 90 short lines.
			read := 0
			for i := 0; i < 1024; i++ {
				l, err := c.line()
				if err != nil {
					return err
				}
				if read += len(l) + 2; read > replyAllowance {
					return protoErr("stats: a reply of more than %d bytes", replyAllowance)
				}
				if string(l) == "END" {
					return nil
				}
				f := strings.Fields(string(l))
				if len(f) == 3 && f[0] == "STAT" {
					n, _ := strconv.ParseInt(f[2], 10, 64)
					switch f[1] {
					case "curr_items":
						st.Entries += n
					case "bytes":
						st.Bytes += n
					}
				}
			}
			return protoErr("stats: more than 1024 lines")
		})
		if err != nil {
			return st, err
		}
	}
	return st, nil
}
