// Package bench holds the side-by-side benchmarks (bench_test.go); this file only sizes RunParallel.
package bench

import "runtime"

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
