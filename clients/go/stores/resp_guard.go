// A guard between go-redis and the socket: it follows the RESP stream a server sends and breaks the connection
// when a reply breaks larder's bounds (STORES.md §2): a line past 8 KiB, a bulk string past max_value, an array
// claiming more elements than any larder command can get, or nesting past 8. go-redis would otherwise allocate
// whatever a length claims; with the guard a hostile reply costs at most one bound, and the read fails with a
// protocol error that counts as a failure of the server.
package stores

import (
	"bytes"
	"fmt"
	"net"
)

// maxRedisElements bounds one array reply: MGET batches and SCAN pages stay below it.
const maxRedisElements = 200_000

// maxRedisDepth bounds nesting (larder's commands need 3).
const maxRedisDepth = 8

type respGuard struct {
	net.Conn
	maxBulk int64
	err     error

	// parser state
	state   int // 0 = type byte, 1 = line, 2 = bulk body
	typ     byte
	line    []byte
	bulk    int64   // bytes of bulk body (+2) still to pass
	pending []int64 // per open array: elements still expected
}

func (g *respGuard) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	n, err := g.Conn.Read(p)
	if n > 0 {
		if perr := g.feed(p[:n]); perr != nil {
			g.err = perr
			g.Conn.Close()
			return 0, perr
		}
	}
	return n, err
}

func (g *respGuard) fail(format string, args ...any) error {
	return &protocolError{fmt.Sprintf(format, args...)}
}

func (g *respGuard) feed(b []byte) error {
	for len(b) > 0 {
		switch g.state {
		case 0:
			g.typ = b[0]
			switch g.typ {
			case '+', '-', ':', '$', '*', '_', ',', '#', '(', '=', '!', '%', '~', '>', '|':
			default:
				return g.fail("redis: a reply starting with byte 0x%02x", g.typ)
			}
			g.state, g.line = 1, g.line[:0]
			b = b[1:]
		case 1:
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				i = len(b)
			}
			g.line = append(g.line, b[:i]...)
			if len(g.line) > maxLine {
				return g.fail("redis: a reply line longer than %d bytes", maxLine)
			}
			if i == len(b) {
				return nil
			}
			b = b[i+1:]
			if err := g.endLine(); err != nil {
				return err
			}
		case 2:
			take := min(int64(len(b)), g.bulk)
			g.bulk -= take
			b = b[take:]
			if g.bulk == 0 {
				g.state = 0
				g.element()
			}
		}
	}
	return nil
}

func (g *respGuard) number() (int64, error) {
	l := g.line
	if len(l) == 0 || l[len(l)-1] != '\r' {
		return 0, g.fail("redis: a line not ended by CR LF")
	}
	l = l[:len(l)-1]
	neg := len(l) > 0 && l[0] == '-'
	if neg {
		l = l[1:]
	}
	if len(l) == 0 || len(l) > 18 {
		return 0, g.fail("redis: a bad length")
	}
	var n int64
	for _, c := range l {
		if c < '0' || c > '9' {
			return 0, g.fail("redis: a bad length")
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, nil
}

func (g *respGuard) endLine() error {
	switch g.typ {
	case '$', '=', '!':
		n, err := g.number()
		if err != nil {
			return err
		}
		if n < 0 {
			g.state = 0
			g.element()
			return nil
		}
		if n > g.maxBulk {
			return g.fail("redis: a value of %d bytes announced, more than max_value (%d)", n, g.maxBulk)
		}
		g.state, g.bulk = 2, n+2
		return nil
	case '*', '~', '>', '%', '|':
		n, err := g.number()
		if err != nil {
			return err
		}
		if g.typ == '%' || g.typ == '|' {
			n *= 2
		}
		g.state = 0
		if n <= 0 {
			g.element()
			return nil
		}
		if n > maxRedisElements {
			return g.fail("redis: an array of %d elements, more than any larder command gets", n)
		}
		if len(g.pending) >= maxRedisDepth {
			return g.fail("redis: a reply nested more than %d deep", maxRedisDepth)
		}
		g.pending = append(g.pending, n)
		return nil
	}
	g.state = 0
	g.element()
	return nil
}

// element notes that one complete element ended, closing the arrays it completes.
func (g *respGuard) element() {
	for len(g.pending) > 0 {
		g.pending[len(g.pending)-1]--
		if g.pending[len(g.pending)-1] > 0 {
			return
		}
		g.pending = g.pending[:len(g.pending)-1]
	}
}
