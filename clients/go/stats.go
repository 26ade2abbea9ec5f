// Cache statistics: what a program or a metrics endpoint reads to see how the cache behaves.
package larder

import (
	"context"
	"sync/atomic"
)

type statCounters struct {
	hits, misses, staleServed, loads, coalescedWaits, coalescedAcross, storeErrors, corrupt atomic.Int64
	outageKept, outageServed                                                                atomic.Int64
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
	// OutageKept counts values kept in the outage memory after their write to the store failed, OutageServed
	// the reads the store failed that the outage memory answered; OutageEntries and OutageBytes are what it
	// holds now (STORES.md §3, "When the store fails").
	OutageKept    int64
	OutageServed  int64
	OutageEntries int64
	OutageBytes   int64
}

// Stats returns a snapshot of the counters.
func (c *Cache) Stats() Stats {
	s := &c.shared.stats
	st := Stats{Hits: s.hits.Load(), Misses: s.misses.Load(), StaleServed: s.staleServed.Load(), Loads: s.loads.Load(),
		CoalescedWaits: s.coalescedWaits.Load(), CoalescedAcrossProcesses: s.coalescedAcross.Load(),
		StoreErrors: s.storeErrors.Load(), CorruptEntries: s.corrupt.Load(), OutageKept: s.outageKept.Load(),
		OutageServed: s.outageServed.Load()}
	if c.shared.outage != nil {
		if m, err := c.shared.outage.Stats(context.Background()); err == nil {
			st.OutageEntries, st.OutageBytes = m.Entries, m.Bytes
		}
	}
	return st
}
