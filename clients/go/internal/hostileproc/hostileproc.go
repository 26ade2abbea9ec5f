// Package hostileproc starts larder-hostile (crates/testkit), the hostile memcached/Redis server, as a child
// process: one starter for the conformance runner (hostile_replies.json) and the test suites (testservers.Hostile).
package hostileproc

import (
	"bufio"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Start runs `bin args…` (a protocol, a behaviour and its options) and returns the address it prints and a stop
// that closes its standard input, on which it exits (killed after 10 s, and with this process in any case).
func Start(bin string, args ...string) (string, func(), error) {
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("starting %s: %v", bin, err)
	}
	stop := func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) == "" {
		_ = cmd.Process.Kill()
		stop()
		return "", nil, fmt.Errorf("larder-hostile %s did not start: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(line), stop, nil
}
