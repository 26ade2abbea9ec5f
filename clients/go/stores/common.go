// What every store computes alike (STORES.md §2, §3): expiry from a TTL and an entry's own hard expiry,
// memcached exptimes, counters as ASCII decimal, and a remote server's health (failures, ejection, probation).
package stores

import (
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/larder-cache/larder/clients/go/format"
)

// nowMs is the wall clock in ms.
func nowMs() int64 { return time.Now().UnixMilli() }

// ttlMs is a TTL in whole ms, rounded up.
func ttlMs(ttl time.Duration) int64 {
	return int64((ttl + time.Millisecond - 1) / time.Millisecond)
}

// expiresAt is the moment (ms) past which value must not be returned: the earlier of now+ttl and the entry's
// hard expiry; 0 = never.
func expiresAt(value []byte, ttl time.Duration, now int64) int64 {
	var fromTTL int64
	if ttl > 0 {
		fromTTL = now + ttlMs(ttl)
	}
	var hard int64
	if format.LooksLikeEntry(value) {
		if h, err := format.ReadHeader(value); err == nil {
			if he, ok := h.HardExpiry(); ok {
				hard = int64(min(he, math.MaxInt64))
			}
		}
	}
	switch {
	case fromTTL == 0:
		return hard
	case hard == 0:
		return fromTTL
	}
	return min(fromTTL, hard)
}

// entryTags are a value's tags when it is an entry.
func entryTags(value []byte) []string {
	if !format.LooksLikeEntry(value) {
		return nil
	}
	h, err := format.ReadHeader(value)
	if err != nil {
		return nil
	}
	return h.Tags
}

const thirtyDays = 30 * 24 * 3600

// memcachedExptime: 0 = never; relative seconds up to 30 days, a Unix time beyond; -1 when already past.
func memcachedExptime(expires, now int64) int64 {
	if expires == 0 {
		return 0
	}
	if expires <= now {
		return -1
	}
	rel := (expires - now + 999) / 1000
	if rel <= thirtyDays {
		return rel
	}
	return (expires + 999) / 1000
}

// parseCounter reads a counter: an optional '-' and digits within signed 64 bits, trailing spaces allowed.
func parseCounter(v []byte) (int64, bool) {
	end := len(v)
	for end > 0 && v[end-1] == ' ' {
		end--
	}
	s := string(v[:end])
	if s == "" || len(s) > 21 {
		return 0, false
	}
	body := s
	if body[0] == '-' {
		body = body[1:]
	}
	if body == "" {
		return 0, false
	}
	for i := 0; i < len(body); i++ {
		if body[i] < '0' || body[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// saturatingAdd adds within signed 64 bits.
func saturatingAdd(a, b int64) int64 {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return s
}

// health tracks one remote server (STORES.md §1, "Failure and recovery"). A healthy server (no failure since the
// last success, not ejected, not on probation) is read and kept without the lock: every request asks, and a
// shared mutex taken two or three times per request was a cost under many goroutines.
//
// Probation is one probe at a time: once `retry_after` has passed, the first request admitted is the probe, and
// while it is out every other request for the server is refused at once, as while ejected. The probe's outcome
// puts the server back or ejects it again; a probe that never reports (its caller gave up) is taken as lost after
// `retry_after`, and the next request probes instead.
type health struct {
	troubled     atomic.Bool // !(consecutive == 0 && !probation && ejectedUntil == 0), written under mu
	mu           sync.Mutex
	consecutive  int
	ejectedUntil int64
	probation    bool
	probeUntil   int64 // while the probe is out: when it is taken as lost (ms); 0 = no probe out
	retryAfterMs int64
	errors       int64
}

// settle recomputes troubled; mu is held.
func (h *health) settle() {
	h.troubled.Store(h.consecutive != 0 || h.probation || h.ejectedUntil != 0)
}

// record notes one request's outcome; true when this failure ejects the server.
func (h *health) record(ok bool, failures int, retryAfter time.Duration) bool {
	if ok && !h.troubled.Load() {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	defer h.settle()
	h.retryAfterMs = retryAfter.Milliseconds()
	if ok {
		h.consecutive, h.probation, h.probeUntil = 0, false, 0
		return false
	}
	h.errors++
	h.consecutive++
	if h.consecutive >= failures || h.probation {
		h.ejectedUntil = nowMs() + h.retryAfterMs
		h.consecutive, h.probation, h.probeUntil = 0, false, 0
		return true
	}
	return false
}

// due moves an ejected server whose `retry_after` has passed to probation; mu is held.
func (h *health) due(now int64) {
	if h.ejectedUntil != 0 && h.ejectedUntil <= now {
		h.ejectedUntil, h.probation, h.probeUntil = 0, true, 0
		h.settle()
	}
}

// admits reports whether a request may go to the server now: not while it is ejected, and on probation only as
// the one probe (this request becomes it). A request admitted must report its outcome (record), or abandon.
func (h *health) admits() bool {
	if !h.troubled.Load() {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := nowMs()
	h.due(now)
	if h.ejectedUntil != 0 {
		return false
	}
	if !h.probation {
		return true
	}
	if h.probeUntil != 0 && now < h.probeUntil {
		return false // the probe is out
	}
	h.probeUntil = now + max(h.retryAfterMs, 1)
	return true
}

// inService reports whether the server is not ejected (on probation counts as in service), without admitting a
// request: memcached's ring keeps a server on probation, whose requests other than the probe fail at once.
func (h *health) inService() bool {
	if !h.troubled.Load() {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.due(nowMs())
	return h.ejectedUntil == 0
}

// abandon is the outcome of an admitted request whose caller gave up before the server answered (its context
// was cancelled): no failure and no success; on probation the probe is released so the next request probes.
func (h *health) abandon() {
	if !h.troubled.Load() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.probation {
		h.probeUntil = 0
	}
}

func (h *health) countError() {
	h.mu.Lock()
	h.errors++
	h.mu.Unlock()
}

func (h *health) errorCount() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.errors
}

func checkKeys(keys []string) error {
	for _, k := range keys {
		if err := CheckKey(k); err != nil {
			return err
		}
	}
	return nil
}

func itoa(n int) string     { return strconv.Itoa(n) }
func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
