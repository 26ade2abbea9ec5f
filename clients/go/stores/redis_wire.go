// The Redis store's own connections to a standalone server, for GET, MGET and SET only (go-redis keeps scripts,
// DEL, SCAN and Cluster). Why: go-redis's MGET builds a string and an interface per value (306 allocations for
// 100 keys), so no layer over it can beat it; here a reply is read in the shape its command expects (one bulk
// string, or an array of exactly as many bulk strings as keys asked for), each length checked against max_value
// before anything is allocated for it, small values of an MGET read into one buffer and handed out as slices
// of it. AUTH and SELECT are each new connection's greeting; each call has one total deadline (wire_conn.go).
package stores

import (
	"bytes"
	"context"
	"strconv"
	"time"
)

type redisWire struct {
	conns    *connPool
	maxValue int64
}

func newRedisWire(addr string, o remoteOptions, user, pass string, db int, maxValue int64) *redisWire {
	w := &redisWire{conns: newConnPool(addr, o.pool, o.connectTimeout), maxValue: maxValue}
	var greeting wireWriter
	replies := 0
	if pass != "" || user != "" {
		if user != "" {
			arrayHead(&greeting, 3)
			bulkString(&greeting, "AUTH")
			bulkString(&greeting, user)
		} else {
			arrayHead(&greeting, 2)
			bulkString(&greeting, "AUTH")
		}
		bulkString(&greeting, pass)
		replies++
	}
	if db != 0 {
		arrayHead(&greeting, 2)
		bulkString(&greeting, "SELECT")
		bulkString(&greeting, strconv.Itoa(db))
		replies++
	}
	if replies > 0 {
		hello := greeting.buf
		w.conns.greet = func(c *wireConn) error {
			c.w.buf = append(c.w.buf, hello...)
			if err := c.w.send(c.c); err != nil {
				return err
			}
			for range replies {
				l, err := c.line()
				if err != nil {
					return err
				}
				if !bytes.Equal(l, []byte("+OK")) {
					return respUnexpected(l, "AUTH/SELECT")
				}
			}
			return nil
		}
	}
	return w
}

func arrayHead(w *wireWriter, n int) {
	w.buf = append(w.buf, '*')
	w.Int(int64(n))
	w.buf = append(w.buf, crlf...)
}

func bulkString(w *wireWriter, s string) {
	w.buf = append(w.buf, '$')
	w.Int(int64(len(s)))
	w.buf = append(append(append(w.buf, crlf...), s...), crlf...)
}

func bulkBytes(w *wireWriter, b []byte) {
	w.buf = append(w.buf, '$')
	w.Int(int64(len(b)))
	w.buf = append(w.buf, crlf...)
	w.ValueLine(b)
}

// respUnexpected turns a reply line that is not what the command gets into an answer error (a -ERR line: the
// connection stays in step) or a protocol error.
func respUnexpected(l []byte, cmd string) error {
	if len(l) > 0 && l[0] == '-' {
		return &answerError{string(l[1:])}
	}
	return protoErr("redis: unexpected reply to %s: %q", cmd, truncateBytes(l))
}

// bulkLength reads a bulk string's header: -1 for a nil, else its length, at most max.
func (w *redisWire) bulkLength(c *wireConn, cmd string) (int, error) {
	l, err := c.line()
	if err != nil {
		return 0, err
	}
	if len(l) == 0 || l[0] != '$' {
		return 0, respUnexpected(l, cmd)
	}
	if bytes.Equal(l, []byte("$-1")) {
		return -1, nil
	}
	n, ok := parseDigits(l[1:])
	if !ok {
		return 0, protoErr("redis: a bad length %q", truncateBytes(l))
	}
	if n > uint64(w.maxValue) {
		return 0, protoErr("redis: a value of %d bytes announced, more than max_value (%d)", n, w.maxValue)
	}
	return int(n), nil
}

func (w *redisWire) get(ctx context.Context, dl time.Time, stored string) ([]byte, error) {
	var v []byte
	err, cancelled := w.conns.exchange(ctx, dl, func(wr *wireWriter) {
		arrayHead(wr, 2)
		bulkString(wr, "GET")
		bulkString(wr, stored)
	}, func(c *wireConn) error {
		n, err := w.bulkLength(c, "GET")
		if err != nil || n < 0 {
			return err
		}
		v, err = c.data(nil, n)
		return err
	})
	if cancelled {
		return nil, ctx.Err()
	}
	return v, err
}

// mgetBatch bounds the keys of one MGET command (a long multi-get is several commands in one exchange).
const mgetBatch = 10000

// smallValuesBuffer bounds how much an MGET reserves up front for its small values (more grows as they come).
const smallValuesBuffer = 1 << 20

func (w *redisWire) mget(ctx context.Context, dl time.Time, stored []string) ([][]byte, error) {
	out := make([][]byte, len(stored))
	if len(stored) == 0 {
		return out, nil
	}
	spans := make([][2]int, len(stored)) // where each small value lies in `small`; -1 for a miss or a large one
	var small []byte
	err, cancelled := w.conns.exchange(ctx, dl, func(wr *wireWriter) {
		for start := 0; start < len(stored); start += mgetBatch {
			batch := stored[start:min(len(stored), start+mgetBatch)]
			arrayHead(wr, len(batch)+1)
			bulkString(wr, "MGET")
			for _, k := range batch {
				bulkString(wr, k)
			}
		}
	}, func(c *wireConn) error {
		for start := 0; start < len(stored); start += mgetBatch {
			want := min(len(stored), start+mgetBatch) - start
			l, err := c.line()
			if err != nil {
				return err
			}
			if len(l) == 0 || l[0] != '*' {
				return respUnexpected(l, "MGET")
			}
			if n, ok := parseDigits(l[1:]); !ok || n != uint64(want) {
				return protoErr("redis: MGET of %d keys answered %q", want, truncateBytes(l))
			}
			for i := start; i < start+want; i++ {
				n, err := w.bulkLength(c, "MGET")
				if err != nil {
					return err
				}
				spans[i] = [2]int{-1, -1}
				switch {
				case n < 0:
				case n >= largeValue:
					if out[i], err = c.data(nil, n); err != nil {
						return err
					}
				default:
					if small == nil {
						small = make([]byte, 0, min(smallValuesBuffer, max(n, 16)*(len(stored)-i)))
					}
					at := len(small)
					if small, err = c.data(small, n); err != nil {
						return err
					}
					spans[i] = [2]int{at, len(small)}
				}
			}
		}
		return nil
	})
	if cancelled {
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	for i, s := range spans {
		if s[0] >= 0 {
			out[i] = small[s[0]:s[1]:s[1]]
		}
	}
	return out, nil
}

// set writes SET key value [PXAT ms] [NX]; false when NX found the key.
func (w *redisWire) set(ctx context.Context, dl time.Time, stored string, value []byte, exp int64, nx bool) (bool, error) {
	ok := false
	err, cancelled := w.conns.exchange(ctx, dl, func(wr *wireWriter) {
		args := 3
		if exp != 0 {
			args += 2
		}
		if nx {
			args++
		}
		arrayHead(wr, args)
		bulkString(wr, "SET")
		bulkString(wr, stored)
		bulkBytes(wr, value)
		if exp != 0 {
			bulkString(wr, "PXAT")
			wr.buf = append(wr.buf, '$')
			wr.Int(int64(decimalLen(exp)))
			wr.buf = append(wr.buf, crlf...)
			wr.Int(exp)
			wr.buf = append(wr.buf, crlf...)
		}
		if nx {
			bulkString(wr, "NX")
		}
	}, func(c *wireConn) error {
		l, err := c.line()
		switch {
		case err != nil:
			return err
		case bytes.Equal(l, []byte("+OK")):
			ok = true
		case nx && bytes.Equal(l, []byte("$-1")):
		default:
			return respUnexpected(l, "SET")
		}
		return nil
	})
	if cancelled {
		return false, ctx.Err()
	}
	return ok, err
}

// decimalLen is the number of characters of n in decimal.
func decimalLen(n int64) int {
	l := 1
	if n < 0 {
		l++
		n = -n
	}
	for ; n >= 10; n /= 10 {
		l++
	}
	return l
}
