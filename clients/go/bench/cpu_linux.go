// CPU time per operation, for the benchmarks' counted work on a shared machine: the benchmark process's own
// (getrusage, every thread, the runtime's included) and that of the servers it started (its child processes,
// from /proc), so that a cell's two sides compare on the work they cause, not only on wall time; and the
// process's minor page faults (memory the Go runtime gave back to the system and touches again).

//go:build linux

package bench

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Usage is this process's user and system CPU time and minor page faults so far (getrusage: every thread, the
// runtime's included). The benchmarks and bench/oneside both read it here.
func Usage() (user, sys time.Duration, faults int64) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano()), ru.Minflt
}

// serverCPU is the user and system time so far of this process's children (the servers), in clock ticks of
// 10 ms: a run of a few hundred ms reads it within a few per cent.
func serverCPU() time.Duration {
	var ticks int64
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		children, _ := os.ReadFile("/proc/self/task/" + task.Name() + "/children")
		for _, pid := range strings.Fields(string(children)) {
			stat, err := os.ReadFile("/proc/" + pid + "/stat")
			if err != nil {
				continue
			}
			// fields after the command's closing parenthesis: state is the first, utime the 12th, stime the 13th
			end := strings.LastIndexByte(string(stat), ')')
			if end < 0 {
				continue
			}
			f := strings.Fields(string(stat[end+1:]))
			if len(f) < 13 {
				continue
			}
			u, _ := strconv.ParseInt(f[11], 10, 64)
			s, _ := strconv.ParseInt(f[12], 10, 64)
			ticks += u + s
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}
