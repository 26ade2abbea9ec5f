// One memcached server for the memcached store: a small pool of TCP connections speaking the meta protocol,
// each operation under one total deadline (connect, write, every byte of the answer), every reply bounded
// (lines to 8 KiB, values to max_item) and checked against the replies its command can get. A connection that
// saw a timeout, an I/O error or a malformed reply is out of step and is closed, never reused.
package stores

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// maxLine bounds a status line or any line that is not a value.
const maxLine = 8 << 10

type mcConn struct {
	c net.Conn
	r *bufio.Reader
	w mcWriter
}

type mcServer struct {
	addr    string
	written string // host as written in the URL, for the ring
	port    int
	weight  int
	pool    chan *mcConn
	slots   chan struct{} // bounds open connections to `pool`
	health  health
	opts    *remoteOptions
	maxItem int
}

func newMCServer(h HostPort, weight int, o *remoteOptions, maxItem int) *mcServer {
	s := &mcServer{addr: h.Address(11211), written: h.Written, port: h.Port, weight: weight,
		pool: make(chan *mcConn, o.pool), slots: make(chan struct{}, o.pool), opts: o, maxItem: maxItem}
	if s.port == 0 {
		s.port = 11211
	}
	return s
}

// errProtocol marks a reply that breaks a bound or does not parse.
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return e.msg }

func protoErr(format string, args ...any) error { return &protocolError{fmt.Sprintf(format, args...)} }

// answerError is an error *answer* from the server (CLIENT_ERROR, SERVER_ERROR): the connection stays good and
// it is not a failure of the server.
type answerError struct{ line string }

func (e *answerError) Error() string { return e.line }

// deadline is the earlier of the context's deadline and now + timeout.
func deadline(ctx context.Context, timeout time.Duration) time.Time {
	d := time.Now().Add(timeout)
	if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
		return cd
	}
	return d
}

func (s *mcServer) acquire(ctx context.Context, dl time.Time) (*mcConn, error) {
	select {
	case c := <-s.pool:
		return c, nil
	default:
	}
	wait := time.Until(dl)
	if wait <= 0 {
		return nil, os.ErrDeadlineExceeded
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case c := <-s.pool:
		return c, nil
	case s.slots <- struct{}{}:
	case <-t.C:
		return nil, os.ErrDeadlineExceeded
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	dialDl := time.Now().Add(s.opts.connectTimeout)
	if dl.Before(dialDl) {
		dialDl = dl
	}
	d := net.Dialer{Deadline: dialDl}
	nc, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		<-s.slots
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	return &mcConn{c: nc, r: bufio.NewReaderSize(nc, 16<<10)}, nil
}

func (s *mcServer) release(c *mcConn, good bool) {
	if good {
		select {
		case s.pool <- c:
			return
		default:
		}
	}
	c.c.Close()
	<-s.slots
}

func (s *mcServer) close() {
	for {
		select {
		case c := <-s.pool:
			c.c.Close()
		default:
			return
		}
	}
}

// do runs one exchange on one connection under the operation's deadline: write, then read with fn.
func (s *mcServer) do(ctx context.Context, dl time.Time, write func(w *mcWriter), read func(c *mcConn) error) error {
	if !s.health.admits() {
		s.health.countError()
		return &Error{Kind: Unavailable, Backend: "memcached", Server: s.addr, Msg: "ejected after failures; retrying later"}
	}
	c, err := s.acquire(ctx, dl)
	if err != nil {
		return s.failed(err)
	}
	_ = c.c.SetDeadline(dl)
	// A cancelled context cuts the exchange short too: the connection's deadline moves to now. A context that
	// can never be cancelled needs no watcher.
	stop := func() bool { return true }
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() { _ = c.c.SetDeadline(time.Now()) })
	}
	write(&c.w)
	err = c.w.send(c.c)
	if err == nil {
		err = read(c)
	}
	cancelled := !stop() && errors.Is(ctx.Err(), context.Canceled)
	var ans *answerError
	good := (err == nil || errors.As(err, &ans)) && !cancelled
	s.release(c, good)
	if cancelled {
		return ctx.Err()
	}
	if good {
		s.health.record(true, s.opts.failures, s.opts.retryAfter)
		if ans != nil {
			return &Error{Kind: Other, Backend: "memcached", Server: s.addr, Err: ans}
		}
		return nil
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	return s.failed(err)
}

// failed records a failure and turns err into the store's error.
func (s *mcServer) failed(err error) error {
	s.health.record(false, s.opts.failures, s.opts.retryAfter)
	kind := Unavailable
	var pe *protocolError
	switch {
	case errors.As(err, &pe):
		kind = Protocol
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		kind = Timeout
	}
	return &Error{Kind: kind, Backend: "memcached", Server: s.addr, Err: err}
}

// line reads one reply line (without CR LF), refusing one longer than maxLine. The slice is valid until the
// next read on the connection.
func (c *mcConn) line() ([]byte, error) {
	frag, err := c.r.ReadSlice('\n')
	if err == nil {
		if len(frag) > maxLine+2 {
			return nil, protoErr("a reply line longer than %d bytes", maxLine)
		}
		if len(frag) < 2 || frag[len(frag)-2] != '\r' {
			return nil, protoErr("a reply line not ended by CR LF")
		}
		return frag[:len(frag)-2], nil
	}
	buf := append([]byte(nil), frag...)
	for {
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(buf) > maxLine {
				return nil, protoErr("a reply line longer than %d bytes", maxLine)
			}
		} else if errors.Is(err, io.EOF) {
			return nil, io.ErrUnexpectedEOF
		} else if err != nil {
			return nil, err
		}
		frag, err = c.r.ReadSlice('\n')
		buf = append(buf, frag...)
		if err == nil {
			break
		}
	}
	if len(buf) > maxLine+2 {
		return nil, protoErr("a reply line longer than %d bytes", maxLine)
	}
	if len(buf) < 2 || buf[len(buf)-2] != '\r' {
		return nil, protoErr("a reply line not ended by CR LF")
	}
	return buf[:len(buf)-2], nil
}

// errorLine turns CLIENT_ERROR/SERVER_ERROR/ERROR lines into an answer error, and anything else unexpected into
// a protocol error.
func errorLine(l []byte, cmd string) error {
	if bytes.HasPrefix(l, []byte("CLIENT_ERROR")) || bytes.HasPrefix(l, []byte("SERVER_ERROR")) || bytes.Equal(l, []byte("ERROR")) {
		return &answerError{string(l)}
	}
	return protoErr("unexpected reply to %s: %q", cmd, truncateBytes(l))
}

func truncateBytes(b []byte) string {
	if len(b) > 60 {
		return string(b[:60]) + "…"
	}
	return string(b)
}

// value reads the answer to `mg <key> v [c]`: nil for EN, else the value (and the cas when asked).
func (c *mcConn) value(maxItem int, wantCas bool) ([]byte, uint64, error) {
	l, err := c.line()
	if err != nil {
		return nil, 0, err
	}
	if bytes.Equal(l, []byte("EN")) {
		return nil, 0, nil
	}
	if !bytes.HasPrefix(l, []byte("VA ")) {
		return nil, 0, errorLine(l, "mg")
	}
	rest := l[3:]
	lenText, flags, _ := bytes.Cut(rest, []byte(" "))
	n, ok := parseDigits(lenText)
	if !ok {
		return nil, 0, protoErr("VA with a bad length %q", truncateBytes(lenText))
	}
	if n > uint64(maxItem) {
		return nil, 0, protoErr("a value of %d bytes announced, more than max_item (%d)", n, maxItem)
	}
	var cas uint64
	if wantCas {
		for _, f := range bytes.Fields(flags) {
			if f[0] == 'c' {
				if cas, ok = parseDigits(f[1:]); !ok {
					return nil, 0, protoErr("bad cas %q", truncateBytes(f))
				}
			}
		}
	}
	// Exactly n bytes are allocated (a 64 KiB value is 8 pages, not 9), read straight in past bufio's buffer.
	data := make([]byte, n)
	if _, err := io.ReadFull(c.r, data); err != nil {
		return nil, 0, err
	}
	end, err := c.r.Peek(2)
	if errors.Is(err, io.EOF) {
		return nil, 0, io.ErrUnexpectedEOF
	} else if err != nil {
		return nil, 0, err
	}
	if end[0] != '\r' || end[1] != '\n' {
		return nil, 0, protoErr("a value not followed by CR LF")
	}
	_, _ = c.r.Discard(2)
	return data, cas, nil
}

// status reads a one-word reply and returns it if it is one of allowed.
func (c *mcConn) status(cmd string, allowed ...string) (string, error) {
	l, err := c.line()
	if err != nil {
		return "", err
	}
	for _, a := range allowed {
		if string(l) == a {
			return a, nil
		}
	}
	return "", errorLine(l, cmd)
}

// parseDigits reads a decimal of at most 19 digits.
func parseDigits(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}
