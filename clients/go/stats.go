// Cache statistics: what a program or a metrics endpoint reads to see how the cache behaves.
package larder

import "sync/atomic"

type statCounters struct {
	hits, misses, staleServed, loads, coalescedWaits, coalescedAcross, storeErrors, corrupt atomic.Int64
}

// Stats are the counters since the cache was made (shared by its namespaced copies).
type Stats struct {
	Hits                     int64
	Misses                   int64
	StaleServed              int64
	Loads                    int64
	CoalescedWaits           int64
	CoalescedAcrossProcesses int64
	StoreErrors              int64
	CorruptEntries           int64
}

// Stats returns a snapshot of the counters.
func (c *Cache) Stats() Stats {
	s := &c.shared.stats
	return Stats{s.hits.Load(), s.misses.Load(), s.staleServed.Load(), s.loads.Load(), s.coalescedWaits.Load(),
		s.coalescedAcross.Load(), s.storeErrors.Load(), s.corrupt.Load()}
}
