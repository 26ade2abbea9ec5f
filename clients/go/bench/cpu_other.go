// Where there is no getrusage or /proc, the benchmarks report no CPU time (cpu_linux.go says why they do).

//go:build !linux

package bench

import "time"

func processCPU() time.Duration { return 0 }
func serverCPU() time.Duration  { return 0 }
func processFaults() int64      { return 0 }
