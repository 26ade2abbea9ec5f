// What the memcached and Redis stores send on one connection for one exchange: the commands gathered in one
// buffer and sent in one write, and a large value (a set's data) sent from the caller's slice in the same
// writev, never copied into a buffer first; what follows the value (its CR LF, Redis's PXAT and NX) goes in a
// third buffer of the same writev.
package stores

import (
	"net"
	"strconv"
)

// largeValue is the size from which a value is sent from its own slice rather than copied.
const largeValue = 4 << 10

// keptWriteBuffer bounds the buffer a connection keeps between exchanges (a long multi-get may grow it more).
const keptWriteBuffer = 64 << 10

var crlf = []byte("\r\n")

type wireWriter struct {
	buf   []byte // what is being written: the head, or after a large value what follows it
	head  []byte // the bytes before a large value
	value []byte // a large value, sent between head and buf
	spare []byte // the buffer for what follows a large value, kept between exchanges
	vec   [3][]byte
}

func (w *wireWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	return len(p), nil
}

func (w *wireWriter) WriteString(s string) {
	w.buf = append(w.buf, s...)
}

// Int writes n in decimal.
func (w *wireWriter) Int(n int64) {
	w.buf = strconv.AppendInt(w.buf, n, 10)
}

// ValueLine writes a data block and its CR LF (at most one large block per exchange).
func (w *wireWriter) ValueLine(v []byte) {
	if len(v) < largeValue || w.value != nil {
		w.buf = append(append(w.buf, v...), crlf...)
		return
	}
	w.head, w.value = w.buf, v
	w.buf = append(w.spare[:0], crlf...)
}

// send writes everything gathered to c (one write, or one writev with a large value) and resets w.
func (w *wireWriter) send(c net.Conn) error {
	var err error
	if w.value == nil {
		_, err = c.Write(w.buf)
	} else {
		w.vec = [3][]byte{w.head, w.value, w.buf}
		bufs := net.Buffers(w.vec[:])
		_, err = bufs.WriteTo(c)
		w.spare = w.buf
		w.buf, w.head, w.vec, w.value = w.head, nil, [3][]byte{}, nil
	}
	if cap(w.buf) > keptWriteBuffer {
		w.buf = nil
	} else {
		w.buf = w.buf[:0]
	}
	if cap(w.spare) > keptWriteBuffer {
		w.spare = nil
	}
	return err
}
