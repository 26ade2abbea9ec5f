// Package faultsproc starts larder-faults (crates/testkit), the fault proxy put between a client and a real
// memcached, Redis or PostgreSQL, and drives it through its standard input: one starter for the conformance
// runner (outage.json) and the test suites (testservers.Faults).
package faultsproc

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Proxy is one larder-faults process.
type Proxy struct {
	Addr string // 127.0.0.1:PORT, where clients connect
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
}

// Start runs `bin upstream` and returns the proxy once it has printed its address.
func Start(bin, upstream string) (*Proxy, error) {
	cmd := exec.Command(bin, upstream)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %v", bin, err)
	}
	p := &Proxy{cmd: cmd, in: in, out: bufio.NewReader(stdout)}
	line, err := p.line()
	if err != nil || line == "" {
		p.Stop()
		return nil, fmt.Errorf("larder-faults %s did not start: %v", upstream, err)
	}
	p.Addr = line
	return p, nil
}

// line is the next line larder-faults prints, within 5 s.
func (p *Proxy) line() (string, error) {
	type result struct {
		line string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		l, err := p.out.ReadString('\n')
		done <- result{strings.TrimSpace(l), err}
	}()
	select {
	case r := <-done:
		return r.line, r.err
	case <-time.After(5 * time.Second):
		return "", fmt.Errorf("larder-faults printed nothing for 5 s")
	}
}

// Command sends one command line (`freeze`, `pass`, `cut 40`…) and waits for its `ok`.
func (p *Proxy) Command(c string) error {
	if _, err := io.WriteString(p.in, c+"\n"); err != nil {
		return fmt.Errorf("larder-faults %q: %v", c, err)
	}
	answer, err := p.line()
	if err != nil {
		return fmt.Errorf("larder-faults %q: %v", c, err)
	}
	if answer != "ok" && !strings.HasPrefix(answer, "ok ") {
		return fmt.Errorf("larder-faults %q answered %q", c, answer)
	}
	return nil
}

// Stop closes its standard input, on which it exits (killed after 5 s).
func (p *Proxy) Stop() {
	_ = p.in.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}
