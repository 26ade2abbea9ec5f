// A guard between go-redis and the socket: it follows the commands go-redis writes and the RESP stream the server
// sends back, and breaks the connection when a reply breaks larder's bounds (STORES.md §2, "Replies are hostile
// too", "Whole reply"): a line past 8 KiB, a bulk string past max_value, nesting past 8, and, for the reply as a
// whole, more bytes or more array elements (nested ones counted too) than the command it answers can
// legitimately get. A counter's script gets one integer, so a reply of 1,000 arrays of 64 MiB strings to it is
// refused at its first line; a SCAN page gets the COUNT asked for plus a little; a GET one value. go-redis
// would otherwise allocate whatever a length claims; with the guard a hostile reply costs at most the bound of
// the command it answers, and the read fails with a protocol error that counts as a failure of the server.
// (larder's own GET, MGET and SET connections read each reply in its command's shape: redis_wire.go.)
package stores

import (
	"bytes"
	"fmt"
	"net"
	"sync"
)

// maxRedisDepth bounds nesting (larder's commands need 3).
const maxRedisDepth = 8

// replyAllowance is the fixed allowance for a reply's framing and for a command whose reply holds no value (a
// status, an integer, an error line): STORES.md §2 allows at most 64 KiB.
const replyAllowance = 64 << 10

// redisScanCount is the COUNT of larder's SCAN and SSCAN pages.
const redisScanCount = 1000

// replyBound is what one whole reply may hold: bytes on the wire (framing included), array elements (the
// elements of nested arrays counted too; a map's pairs count twice), and the longest one bulk string.
type replyBound struct{ bytes, elements, bulk int64 }

// scanReplyBytes bounds a SCAN or SSCAN page. larder's keys are at most 250 bytes (a page of 1,000 is about
// 270 KB); the rest is room for keys other programs wrote under the pattern, each at most a line's length.
const scanReplyBytes = 4 << 20

// boundFor is the bound of the reply to a command, by its name (and first argument), lowercase.
func (g *respGuard) boundFor(name, sub string) replyBound {
	switch name {
	case "get": // one value (a Cluster's GET; a standalone server's goes over redis_wire.go)
		return replyBound{g.maxBulk + replyAllowance, 0, g.maxBulk}
	case "scan", "sscan": // [cursor, [up to COUNT keys, and Redis may return a little more]]
		return replyBound{scanReplyBytes, 1024 + redisScanCount, maxLine}
	case "hello": // the server's properties, its modules listed
		return replyBound{replyAllowance, 1024, maxLine}
	case "cluster": // CLUSTER SLOTS: at most one range per slot of the 16,384
		if sub == "slots" {
			return replyBound{4 << 20, 1024 + 16384, maxLine}
		}
	}
	// SET, DEL, the scripts (each answers one integer or nil), SCRIPT LOAD, FLUSHDB, DBSIZE, AUTH, SELECT, PING,
	// CLIENT…: a status, an integer, a short bulk string or an error line; never an array.
	return replyBound{replyAllowance, 0, replyAllowance}
}

type respGuard struct {
	net.Conn
	maxBulk int64

	mu     sync.Mutex
	err    error
	out    cmdScanner   // follows the commands written
	expect []replyBound // the bound of each reply still to come, in the order the commands were written

	// reply parser state
	state    int // 0 = type byte, 1 = line, 2 = bulk body
	typ      byte
	line     []byte
	bulk     int64   // bytes of bulk body (+2) still to pass
	pending  []int64 // per open array: elements still expected
	inReply  bool
	cur      replyBound // the bound of the reply being read
	bytes    int64      // bytes of it read so far
	elements int64      // elements it announced so far
}

func (g *respGuard) Write(p []byte) (int, error) {
	g.mu.Lock()
	g.out.feed(p, func(name, sub string) { g.expect = append(g.expect, g.boundFor(name, sub)) })
	g.mu.Unlock()
	return g.Conn.Write(p)
}

func (g *respGuard) Read(p []byte) (int, error) {
	g.mu.Lock()
	err := g.err
	g.mu.Unlock()
	if err != nil {
		return 0, err
	}
	n, err := g.Conn.Read(p)
	if n > 0 {
		g.mu.Lock()
		perr := g.feed(p[:n])
		if perr != nil {
			g.err = perr
		}
		g.mu.Unlock()
		if perr != nil {
			g.Conn.Close()
			return 0, perr
		}
	}
	return n, err
}

func (g *respGuard) fail(format string, args ...any) error {
	return &protocolError{fmt.Sprintf(format, args...)}
}

// take counts n more bytes of the reply against its bound.
func (g *respGuard) take(n int64) error {
	g.bytes += n
	if g.bytes > g.cur.bytes {
		return g.fail("redis: a reply of more than %d bytes, more than its command gets", g.cur.bytes)
	}
	return nil
}

func (g *respGuard) feed(b []byte) error {
	for len(b) > 0 {
		if !g.inReply {
			if g.out.broken {
				return g.fail("redis: could not follow the commands written, so no reply can be bounded")
			}
			if len(g.expect) == 0 {
				return g.fail("redis: a reply to no command")
			}
			g.cur, g.expect = g.expect[0], g.expect[1:]
			g.inReply, g.bytes, g.elements = true, 0, 0
		}
		switch g.state {
		case 0:
			g.typ = b[0]
			switch g.typ {
			case '+', '-', ':', '$', '*', '_', ',', '#', '(', '=', '!', '%', '~', '>', '|':
			default:
				return g.fail("redis: a reply starting with byte 0x%02x", g.typ)
			}
			if err := g.take(1); err != nil {
				return err
			}
			g.state, g.line = 1, g.line[:0]
			b = b[1:]
		case 1:
			i := bytes.IndexByte(b, '\n')
			end := i + 1
			if i < 0 {
				end = len(b)
			}
			g.line = append(g.line, b[:end]...)
			if len(g.line) > maxLine+2 {
				return g.fail("redis: a reply line longer than %d bytes", maxLine)
			}
			if err := g.take(int64(end)); err != nil {
				return err
			}
			b = b[end:]
			if i < 0 {
				return nil
			}
			g.line = g.line[:len(g.line)-1] // the LF
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
		if n > g.cur.bulk {
			return g.fail("redis: a string of %d bytes announced, more than its command gets (%d)", n, g.cur.bulk)
		}
		// The whole body is counted now, before any of it is read.
		if err := g.take(n + 2); err != nil {
			return err
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
		if g.elements += n; g.elements > g.cur.elements {
			return g.fail("redis: a reply of more than %d elements, more than its command gets", g.cur.elements)
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

// element notes that one complete element ended, closing the arrays it completes; the reply ends with its
// outermost element.
func (g *respGuard) element() {
	for len(g.pending) > 0 {
		g.pending[len(g.pending)-1]--
		if g.pending[len(g.pending)-1] > 0 {
			return
		}
		g.pending = g.pending[:len(g.pending)-1]
	}
	g.inReply = false
}

// cmdScanner follows the commands go-redis writes (RESP arrays of bulk strings) and reports each one's name and
// first argument, lowercase, once it is written whole. Anything else written marks it broken, and the guard then
// refuses every reply (it could not tell which bound applies).
type cmdScanner struct {
	state  int // 0 = the array's line, 1 = an argument's length line, 2 = an argument's bytes
	line   []byte
	args   int64 // arguments of the command being written
	arg    int64 // index of the argument being read
	argLen int64 // its length
	pos    int64 // bytes of it (and its CR LF) passed
	name   []byte
	sub    []byte
	broken bool
}

// cmdWordLen bounds how much of a command's name and first argument is kept.
const cmdWordLen = 16

func (s *cmdScanner) feed(p []byte, emit func(name, sub string)) {
	for len(p) > 0 && !s.broken {
		switch s.state {
		case 0, 1:
			i := bytes.IndexByte(p, '\n')
			end := i + 1
			if i < 0 {
				end = len(p)
			}
			s.line = append(s.line, p[:end]...)
			p = p[end:]
			if len(s.line) > 24 {
				s.broken = true
				return
			}
			if i < 0 {
				return
			}
			l := s.line
			s.line = s.line[:0]
			want := byte('*')
			if s.state == 1 {
				want = '$'
			}
			n, ok := int64(0), len(l) >= 4 && l[0] == want && l[len(l)-2] == '\r'
			if ok {
				var d uint64
				d, ok = parseDigits(l[1 : len(l)-2])
				n = int64(d)
			}
			if !ok || (s.state == 0 && n < 1) {
				s.broken = true
				return
			}
			if s.state == 0 {
				s.args, s.arg, s.name, s.sub, s.state = n, 0, s.name[:0], s.sub[:0], 1
			} else {
				s.argLen, s.pos, s.state = n, 0, 2
			}
		case 2:
			take := min(int64(len(p)), s.argLen+2-s.pos)
			if s.arg < 2 {
				word := &s.name
				if s.arg == 1 {
					word = &s.sub
				}
				for _, c := range p[:take] {
					if s.pos < s.argLen && len(*word) < cmdWordLen {
						if 'A' <= c && c <= 'Z' {
							c += 'a' - 'A'
						}
						*word = append(*word, c)
					}
					s.pos++
				}
			} else {
				s.pos += take
			}
			p = p[take:]
			if s.pos == s.argLen+2 {
				s.arg++
				s.state = 1
				if s.arg == s.args {
					emit(string(s.name), string(s.sub))
					s.state = 0
				}
			}
		}
	}
}
