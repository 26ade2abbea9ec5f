// One memcached server for the memcached store: a pool of larder's own connections (wire_conn.go) speaking the
// meta protocol, each operation under one total deadline (connect, write, every byte of the answer), every reply
// bounded (lines to 8 KiB, values to max_item) and checked against the replies its command can get. A connection
// that saw a timeout, an I/O error or a malformed reply is out of step and is closed, never reused.
package stores

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

type mcServer struct {
	addr    string
	written string // host as written in the URL, for the ring
	port    int
	weight  int
	conns   *connPool
	health  health
	opts    *remoteOptions
	maxItem int
}

func newMCServer(h HostPort, weight int, o *remoteOptions, maxItem int) *mcServer {
	s := &mcServer{addr: h.Address(11211), written: h.Written, port: h.Port, weight: weight, opts: o, maxItem: maxItem}
	s.conns = newConnPool(s.addr, o.pool, o.connectTimeout)
	if s.port == 0 {
		s.port = 11211
	}
	return s
}

func protoErr(format string, args ...any) error { return &protocolError{fmt.Sprintf(format, args...)} }

func (s *mcServer) close() { s.conns.close() }

// do runs one exchange on one connection under the operation's deadline: write, then read with fn. Every
// exchange ends with the meta no-op `mn`, and its reply must end with `MN` right after the replies its commands
// can get: a server that answers more than was asked (a second value after a get's, issue 32's wide reply) is
// out of step, its reply past the command's whole bound, and it is refused at the first line too many, not read
// to its end or left in the connection for the next caller.
func (s *mcServer) do(ctx context.Context, dl time.Time, write func(w *wireWriter), read func(c *wireConn) error) error {
	if !s.health.admits() {
		s.health.countError()
		return &Error{Kind: Unavailable, Backend: "memcached", Server: s.addr, Msg: "ejected after failures; retrying later"}
	}
	err, cancelled := s.conns.exchange(ctx, dl, func(w *wireWriter) {
		write(w)
		w.WriteString("mn\r\n")
	}, func(c *wireConn) error {
		err := read(c)
		if err != nil && answerOf(err) == nil {
			return err
		}
		if end := c.endOfReply(); end != nil {
			return end
		}
		return err
	})
	ans := answerOf(err)
	good := (err == nil || ans != nil) && !cancelled
	if cancelled {
		s.health.abandon()
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
		s.health.abandon()
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
func (c *wireConn) value(maxItem int, wantCas bool) ([]byte, uint64, error) {
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
	data, err := c.data(nil, int(n))
	if err != nil {
		return nil, 0, err
	}
	return data, cas, nil
}

// endOfReply reads the MN that ends an exchange's replies; anything else is a reply the commands cannot get.
func (c *wireConn) endOfReply() error {
	l, err := c.line()
	if err != nil {
		return err
	}
	if !bytes.Equal(l, []byte("MN")) {
		return protoErr("a reply past what was asked (%q where the replies end with MN)", truncateBytes(l))
	}
	return nil
}

// status reads a one-word reply and returns it if it is one of allowed.
func (c *wireConn) status(cmd string, allowed ...string) (string, error) {
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
