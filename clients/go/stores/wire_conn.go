// Connections of larder's own, shared by the memcached store and the Redis store's standalone GET/MGET/SET: a
// bounded pool per server, one total deadline per exchange (the wait for a connection, the dial and greeting,
// the write and every byte of the reply), a cancelled context cutting an exchange short, and the bounded reply
// line both protocols read. A connection that saw a timeout, an I/O error or a malformed reply is out of step
// and is closed, never reused; an error *answer* leaves it in step.
package stores

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"time"
)

// maxLine bounds a status line or any line that is not a value.
const maxLine = 8 << 10

type wireConn struct {
	c net.Conn
	r *wireReader
	w wireWriter
}

// connPool holds at most `size` open connections to one server.
type connPool struct {
	addr           string
	connectTimeout time.Duration
	idle           chan *wireConn
	slots          chan struct{}
	// greet, when set, runs on each new connection before its first use (Redis's AUTH and SELECT).
	greet func(c *wireConn) error
}

func newConnPool(addr string, size int, connectTimeout time.Duration) *connPool {
	return &connPool{addr: addr, connectTimeout: connectTimeout, idle: make(chan *wireConn, size),
		slots: make(chan struct{}, size)}
}

// deadline is the earlier of the context's deadline and now + timeout.
func deadline(ctx context.Context, timeout time.Duration) time.Time {
	d := time.Now().Add(timeout)
	if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
		return cd
	}
	return d
}

func (p *connPool) acquire(ctx context.Context, dl time.Time) (*wireConn, error) {
	select {
	case c := <-p.idle:
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
	case c := <-p.idle:
		return c, nil
	case p.slots <- struct{}{}:
	case <-t.C:
		return nil, os.ErrDeadlineExceeded
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	dialDl := time.Now().Add(p.connectTimeout)
	if dl.Before(dialDl) {
		dialDl = dl
	}
	d := net.Dialer{Deadline: dialDl}
	nc, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		<-p.slots
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	c := &wireConn{c: nc, r: newWireReader(nc)}
	if p.greet != nil {
		_ = nc.SetDeadline(dl)
		if err := p.greet(c); err != nil {
			p.release(c, false)
			return nil, err
		}
	}
	return c, nil
}

func (p *connPool) release(c *wireConn, good bool) {
	if good {
		select {
		case p.idle <- c:
			return
		default:
		}
	}
	c.c.Close()
	<-p.slots
}

func (p *connPool) close() {
	for {
		select {
		case c := <-p.idle:
			c.c.Close()
			<-p.slots
		default:
			return
		}
	}
}

// exchange runs one exchange on one connection under the deadline dl: write, then read with fn. cancelled
// reports that ctx was cancelled during it (the caller's error is then ctx.Err()).
func (p *connPool) exchange(ctx context.Context, dl time.Time, write func(w *wireWriter), read func(c *wireConn) error) (err error, cancelled bool) {
	c, err := p.acquire(ctx, dl)
	if err != nil {
		return err, false
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
	cancelled = !stop() && errors.Is(ctx.Err(), context.Canceled)
	p.release(c, (err == nil || answerOf(err) != nil) && !cancelled)
	return err, cancelled
}

// protocolError marks a reply that breaks a bound or does not parse.
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return e.msg }

// answerError is an error *answer* from the server (memcached's CLIENT_ERROR, SERVER_ERROR; a Redis -ERR): the
// connection stays good and it is not a failure of the server.
type answerError struct{ line string }

func (e *answerError) Error() string { return e.line }

// answerOf finds the answer error in err's chain, or nil (errors.As would put a variable on the heap for every
// call, answer or not).
func answerOf(err error) *answerError {
	for ; err != nil; err = errors.Unwrap(err) {
		if a, ok := err.(*answerError); ok {
			return a
		}
	}
	return nil
}

// line reads one reply line (without CR LF), refusing one longer than maxLine. The slice is valid until the
// next read on the connection.
func (c *wireConn) line() ([]byte, error) { return c.r.line() }

// data reads a data block of n bytes (already checked against the bound) and the CR LF after it, appended to
// dst. A large value read alone (dst nil) gets a slice of exactly its size, read straight into (wire_reader.go).
func (c *wireConn) data(dst []byte, n int) ([]byte, error) {
	start := len(dst)
	if dst == nil {
		dst = make([]byte, n) // never nil: an empty value is not a miss
	} else {
		// within dst's capacity nothing is zeroed again before the read overwrites it (an MGET's buffer of small
		// values is made, and so zeroed, once: appending make's zeros cleared each value a second time)
		dst = slices.Grow(dst, n)[:start+n]
	}
	if err := c.r.readFull(dst[start:]); err != nil {
		return nil, err
	}
	if err := c.r.crlf(); err != nil {
		return nil, err
	}
	return dst, nil
}
