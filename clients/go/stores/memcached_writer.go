// What the memcached store sends on one connection for one exchange: the command lines gathered in one buffer
// and sent in one write, and a large value (a set's data block) sent from the caller's slice in the same
// writev, never copied into a buffer first.
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

type mcWriter struct {
	buf   []byte
	value []byte // a large value, sent after buf and followed by CR LF
	vec   [3][]byte
}

func (w *mcWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	return len(p), nil
}

func (w *mcWriter) WriteString(s string) {
	w.buf = append(w.buf, s...)
}

// Int writes n in decimal.
func (w *mcWriter) Int(n int64) {
	w.buf = strconv.AppendInt(w.buf, n, 10)
}

// ValueLine writes a data block and its CR LF; it is the last thing written in the exchange.
func (w *mcWriter) ValueLine(v []byte) {
	if len(v) < largeValue {
		w.buf = append(append(w.buf, v...), crlf...)
		return
	}
	w.value = v
}

// send writes everything gathered to c (one write, or one writev with a large value) and resets w.
func (w *mcWriter) send(c net.Conn) error {
	var err error
	if w.value == nil {
		_, err = c.Write(w.buf)
	} else {
		w.vec = [3][]byte{w.buf, w.value, crlf}
		bufs := net.Buffers(w.vec[:])
		_, err = bufs.WriteTo(c)
		w.vec, w.value = [3][]byte{}, nil
	}
	if cap(w.buf) > keptWriteBuffer {
		w.buf = nil
	} else {
		w.buf = w.buf[:0]
	}
	return err
}
