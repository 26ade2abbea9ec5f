// A server's health (STORES.md §1, "Failure and recovery"): ejected after `failures` failures, refused at once
// for `retry_after`, then probation with one probe at a time.
package stores

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const testRetryAfter = 80 * time.Millisecond

// ejected is a health whose server has just been ejected after two failures.
func ejected(t *testing.T) *health {
	t.Helper()
	h := &health{}
	if !h.admits() || h.record(false, 2, testRetryAfter) {
		t.Fatal("the first failure ejected the server")
	}
	if !h.admits() || !h.record(false, 2, testRetryAfter) {
		t.Fatal("the second failure did not eject the server")
	}
	if h.admits() || h.inService() {
		t.Fatal("an ejected server admits requests")
	}
	return h
}

func TestHealthProbationIsOneProbeAtATime(t *testing.T) {
	h := ejected(t)
	time.Sleep(testRetryAfter + 10*time.Millisecond)
	if !h.inService() {
		t.Fatal("past retry_after the server is not back on probation")
	}
	// Many requests arrive at once: exactly one is the probe, every other one is refused at once.
	var admitted atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if h.admits() {
				admitted.Add(1)
			}
		}()
	}
	wg.Wait()
	if admitted.Load() != 1 {
		t.Fatalf("%d requests admitted on probation, want the one probe", admitted.Load())
	}
	if !h.inService() {
		t.Fatal("a server on probation left the ring")
	}
	// The probe fails: ejected again at once (one failure), for another retry_after.
	if !h.record(false, 2, testRetryAfter) {
		t.Fatal("a failed probe did not eject the server again")
	}
	if h.admits() {
		t.Fatal("admitted right after the probe failed")
	}
	time.Sleep(testRetryAfter + 10*time.Millisecond)
	if !h.admits() {
		t.Fatal("no probe after the second retry_after")
	}
	if h.admits() {
		t.Fatal("a second request admitted while the probe is out")
	}
	// The probe succeeds: every request is admitted again.
	h.record(true, 2, testRetryAfter)
	for range 5 {
		if !h.admits() {
			t.Fatal("refused after a good probe")
		}
	}
	if h.troubled.Load() {
		t.Fatal("a healthy server is still marked troubled (the fast path would take the lock)")
	}
}

func TestHealthAProbeThatNeverReportsIsReplaced(t *testing.T) {
	h := ejected(t)
	time.Sleep(testRetryAfter + 10*time.Millisecond)
	if !h.admits() || h.admits() {
		t.Fatal("not exactly one probe")
	}
	// Its caller gave up: the next request probes at once.
	h.abandon()
	if !h.admits() || h.admits() {
		t.Fatal("after an abandoned probe, not exactly one new probe")
	}
	// This one never reports at all: after retry_after it is taken as lost.
	time.Sleep(testRetryAfter + 10*time.Millisecond)
	if !h.admits() {
		t.Fatal("a lost probe blocks the server for good")
	}
}
