// The outage memory (STORES.md §3, "When the store fails", rules 2 and 4): a bounded memory store (the client's
// own stores.Memory) holding only what was written while the store failed. A write the store fails is kept there
// with the expiry the store would have given it (the entry's own, stale window included); a read the store fails
// is answered from it; deletes and purges apply to it; the first good answer from the store once no failure has
// been seen for a second (quietFor) empties it, and nothing in it is written back (other processes may have written
// newer values, and a purge sent meanwhile may have been lost). "Once no failure for a second": with several
// servers (a memcached pool losing one, a Redis Cluster failing a master over) the others answer while one fails,
// and their answers must not drop what the failing one's keys need. While the store answers, the only cost is one
// atomic load per answer (failing).
package larder

import (
	"context"
	"time"

	"github.com/larder-cache/larder/clients/go/stores"
)

// quietFor is how long no failure must have been seen before a good answer empties the outage memory (rule 4).
const quietFor = time.Second

// clockBase anchors monoNow: time.Since reads the monotonic clock, so a wall clock step changes nothing.
var clockBase = time.Now()

// monoNow is the monotonic time since clockBase, in nanoseconds.
func monoNow() int64 { return int64(time.Since(clockBase)) }

// failedNow records a failure: the time of the last one (before the flag, so that a good answer seeing the flag
// also sees this time), then the failing flag.
func (c *Cache) failedNow() {
	c.shared.lastFailure.Store(monoNow())
	c.shared.failing.Store(true)
}

// isFailure reports whether err is a failure of the store's server (STORES.md §1): it could not be reached or
// was refused at once while ejected (unavailable), did not answer in time, or answered with a broken or malformed
// reply. An answer (invalid_key, too_large, not_a_counter, a server's error reply) is not one, nor a caller's
// own cancelled context.
func isFailure(err error) bool {
	switch stores.KindOf(err) {
	case stores.Unavailable, stores.Timeout, stores.Protocol:
		return true
	}
	return false
}

// answered notes a good answer from the store: once no failure has been seen for quietFor after one, it empties
// the outage memory (rule 4). While healthy (failing off) that is one atomic load.
func (c *Cache) answered() {
	if !c.shared.failing.Load() {
		return
	}
	if time.Duration(monoNow()-c.shared.lastFailure.Load()) < quietFor {
		return
	}
	if c.shared.failing.CompareAndSwap(true, false) {
		_ = c.shared.outage.Clear(context.Background())
	}
}

// failed notes a store error; true when it is a failure and the outage memory is on (then a read is answered
// from it).
func (c *Cache) failed(err error) bool {
	if c.shared.outage == nil || !isFailure(err) {
		return false
	}
	c.failedNow()
	return true
}

// keep reports whether a write that returned err is kept in the outage memory (the caller records the failure's
// time before keeping it, so that a good answer meanwhile does not empty it, then sets failing with failedNow, so
// that a value kept is always followed by the flag a good answer clears).
func (c *Cache) keep(err error) bool {
	return c.shared.outage != nil && isFailure(err)
}

// observe notes the outcome of a store call that writes nothing to keep (a delete, a purge, a counter, a lock).
func (c *Cache) observe(err error) {
	if err == nil {
		c.answered()
		return
	}
	c.failed(err)
}

// wrote notes the outcome of writing data under storeKey: a failure keeps it in the outage memory.
func (c *Cache) wrote(err error, storeKey string, data []byte) {
	if err == nil {
		c.answered()
		return
	}
	if c.keep(err) {
		c.shared.lastFailure.Store(monoNow())
		if c.shared.outage.Set(context.Background(), storeKey, data, 0) == nil {
			c.shared.stats.outageKept.Add(1)
		}
		c.failedNow()
	}
}

// fromOutage is what the outage memory holds under storeKey (nil: nothing).
func (c *Cache) fromOutage(storeKey string) []byte {
	v, _ := c.shared.outage.Get(context.Background(), storeKey)
	if v != nil {
		c.shared.stats.outageServed.Add(1)
	}
	return v
}

// peekOutage is the fresh value the outage memory holds under storeKey, if any.
func (c *Cache) peekOutage(storeKey string, version *string) (any, bool) {
	if c.shared.outage == nil {
		return nil, false
	}
	raw, _ := c.shared.outage.Get(context.Background(), storeKey)
	if raw == nil {
		return nil, false
	}
	v, verdict := c.decode(raw, version)
	if verdict != fresh {
		return nil, false
	}
	c.shared.stats.outageServed.Add(1)
	return v, true
}
