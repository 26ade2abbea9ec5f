// Where there is no getrusage or /proc, the benchmarks report no CPU time (cpu_linux.go says why they do).

//go:build !linux

package bench

import "time"

// Usage is zero here (cpu_linux.go has the real one).
func Usage() (user, sys time.Duration, faults int64) { return 0, 0, 0 }

func serverCPU() time.Duration { return 0 }
