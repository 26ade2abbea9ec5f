// What a shared cache may store and serve (RFC 9111 §3, §3.5; the front's own rules in spec/HTTP.md §1 agree):
// not a response that says no-store or private, not one that sets a cookie (unless the Cache's StoreSetCookie),
// and, of a response to a request that carried Authorization, only one that says public, s-maxage or
// must-revalidate. httpcache hands Set only the dumped response, so the request's credentials are known only from
// the stamp the package's Transport puts on responses to requests without them (transport.go); a response
// without the stamp (a bare httpcache.Transport, or a stamp forged by the origin) is taken to have answered a
// request with credentials.
package httpcachestore

import (
	"bufio"
	"bytes"
	"crypto/subtle"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// stampHeader carries the Transport's token on a response to a request without Authorization. It is removed
// before a response is stored and before the caller sees it.
const stampHeader = "X-Larder-Httpcache-Request"

// refusal says why a shared cache may not store (or, for a stored response, serve) a dumped response, or "".
func (h *Cache) refusal(dump []byte, stored bool) string {
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(dump)), nil)
	if err != nil {
		return "not a response"
	}
	directives := cacheControl(resp.Header)
	has := func(name string) bool { _, ok := directives[name]; return ok }
	switch {
	case has("no-store"):
		return "no-store"
	case has("private"):
		return "private"
	case len(resp.Header.Values("Set-Cookie")) > 0 && !h.StoreSetCookie:
		return "set-cookie"
	case stored:
		return "" // the request is not known any more: its response was checked when it was stored
	case !h.anonymous(resp.Header) && !has("public") && !has("s-maxage") && !has("must-revalidate"):
		return "authorization"
	}
	return ""
}

// sharedMaxAge is a dumped response's s-maxage, which a shared cache's freshness is (RFC 9111 §5.2.2.10) and
// httpcache, a private cache, ignores: a shared Cache keeps the response no longer than that.
func sharedMaxAge(dump []byte) (time.Duration, bool) {
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(dump)), nil)
	if err != nil {
		return 0, false
	}
	v, ok := cacheControl(resp.Header)["s-maxage"]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.Trim(v, `"`), 10, 64)
	if err != nil || n < 0 {
		return 0, true // unparseable: stale at once (RFC 9111 §4.2.1)
	}
	return time.Duration(min(n, 1<<31)) * time.Second, true
}

// anonymous reports whether this Cache's Transport stamped the response: its request carried no Authorization.
func (h *Cache) anonymous(header http.Header) bool {
	values := header.Values(stampHeader)
	return len(values) == 1 && subtle.ConstantTimeCompare([]byte(values[0]), []byte(h.token)) == 1
}

// cacheControl is the directives of every Cache-Control field: names lowercase, the first value of each.
func cacheControl(header http.Header) map[string]string {
	out := map[string]string{}
	for _, field := range header.Values("Cache-Control") {
		for _, part := range strings.Split(field, ",") {
			name, value, _ := strings.Cut(part, "=")
			if name = strings.ToLower(strings.TrimSpace(name)); name != "" {
				if _, seen := out[name]; !seen {
					out[name] = strings.TrimSpace(value)
				}
			}
		}
	}
	return out
}

// withoutStamp is the dumped response without the stamp's header lines, every other byte as it was.
func withoutStamp(dump []byte) []byte {
	end := bytes.Index(dump, []byte("\r\n\r\n"))
	if end < 0 || !bytes.Contains(bytes.ToLower(dump[:end]), []byte(strings.ToLower(stampHeader))) {
		return dump
	}
	out := make([]byte, 0, len(dump))
	head := dump[:end+2]
	for len(head) > 0 {
		i := bytes.Index(head, []byte("\r\n"))
		line := head[:i+2]
		head = head[i+2:]
		name, _, _ := bytes.Cut(line, []byte(":"))
		if !strings.EqualFold(strings.TrimSpace(string(name)), stampHeader) {
			out = append(out, line...)
		}
	}
	return append(out, dump[end+2:]...)
}
