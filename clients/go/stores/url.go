// Store URLs (spec/STORES.md §1): scheme://[user[:password]@]host[:port][,host[:port]…][/path][?options]. Each
// backend takes the options it knows; any left over is an error naming it and listing the known ones, so a
// typo never silently falls back to a default. Mirrors the Rust and Python parsers, messages included.
package stores

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// HostPort is one host of a URL's list; Host has no brackets for IPv6, Written keeps what the URL wrote.
type HostPort struct {
	Host    string
	Port    int // 0 when not given
	Written string
}

// Address is host:port with brackets around IPv6 and def when no port was given.
func (h HostPort) Address(def int) string {
	port := h.Port
	if port == 0 {
		port = def
	}
	if strings.Contains(h.Host, ":") {
		return fmt.Sprintf("[%s]:%d", h.Host, port)
	}
	return fmt.Sprintf("%s:%d", h.Host, port)
}

// URL is a parsed store URL; backends take their options, then call finish.
type URL struct {
	Scheme   string
	Username *string
	Password *string
	Hosts    []HostPort
	Path     string
	Shown    string
	options  [][2]string
	known    map[string]bool
}

func (u *URL) errorf(format string, args ...any) error {
	return &Error{Kind: BadURL, Msg: u.Shown + ": " + fmt.Sprintf(format, args...)}
}

// ParseURL parses a store URL.
func ParseURL(raw string) (*URL, error) {
	shown := Redact(raw)
	bad := func(format string, args ...any) error {
		return &Error{Kind: BadURL, Msg: shown + ": " + fmt.Sprintf(format, args...)}
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, bad("not a store URL: expected scheme://… (for example memcached://127.0.0.1:11211)")
	}
	scheme = strings.ToLower(scheme)
	if scheme == "" || strings.IndexFunc(scheme, func(r rune) bool {
		return !(r < 128 && (r == '+' || ('a' <= r && r <= 'z') || ('0' <= r && r <= '9')))
	}) >= 0 {
		return nil, bad("%q is not a URL scheme", scheme)
	}
	rest, query, _ := strings.Cut(rest, "?")
	if strings.Contains(rest, "#") || strings.Contains(query, "#") {
		return nil, bad("a store URL has no fragment (#)")
	}
	authority, path := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		authority, path = rest[:i], rest[i:]
	}
	u := &URL{Scheme: scheme, Shown: shown, known: map[string]bool{}}
	hostList := authority
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		userinfo := authority[:i]
		hostList = authority[i+1:]
		user, pw, hasPw := strings.Cut(userinfo, ":")
		du, err := decode(user)
		if err != nil {
			return nil, bad("%q is not UTF-8 once decoded", user)
		}
		if du != "" {
			u.Username = &du
		}
		if hasPw {
			dp, err := decode(pw)
			if err != nil {
				return nil, bad("password is not UTF-8 once decoded")
			}
			u.Password = &dp
		}
	}
	if hostList != "" {
		for _, part := range strings.Split(hostList, ",") {
			h, err := parseHost(part)
			if err != nil {
				return nil, bad("%s", err)
			}
			u.Hosts = append(u.Hosts, h)
		}
	}
	for _, pair := range strings.Split(query, "&") {
		if pair == "" {
			continue
		}
		n, v, _ := strings.Cut(pair, "=")
		name, err1 := decode(n)
		value, err2 := decode(v)
		if err1 != nil || err2 != nil {
			return nil, bad("option %q is not UTF-8 once decoded", n)
		}
		for _, o := range u.options {
			if o[0] == name {
				return nil, bad("option %q is given twice", name)
			}
		}
		u.options = append(u.options, [2]string{name, value})
	}
	p, err := decode(path)
	if err != nil {
		return nil, bad("path is not UTF-8 once decoded")
	}
	u.Path = p
	return u, nil
}

func decode(s string) (string, error) {
	d, err := url.PathUnescape(s)
	if err != nil {
		return "", err
	}
	if !utf8.ValidString(d) {
		return "", fmt.Errorf("not UTF-8")
	}
	return d, nil
}

func parseHost(part string) (HostPort, error) {
	invalid := fmt.Errorf("%q is not host[:port]", part)
	var host, portText string
	hasPort := false
	if strings.HasPrefix(part, "[") {
		h, after, ok := strings.Cut(part[1:], "]")
		if !ok || (after != "" && !strings.HasPrefix(after, ":")) {
			return HostPort{}, invalid
		}
		host = h
		if after != "" {
			portText, hasPort = after[1:], true
		}
	} else if i := strings.LastIndexByte(part, ':'); i >= 0 {
		host, portText, hasPort = part[:i], part[i+1:], true
		if strings.Contains(host, ":") {
			return HostPort{}, fmt.Errorf("%q: write an IPv6 address in brackets, [::1]:11211", part)
		}
	} else {
		host = part
	}
	if host == "" || strings.ContainsAny(host, " \t\r\n/?#@") {
		return HostPort{}, invalid
	}
	hp := HostPort{Host: host, Written: part}
	if hasPort {
		n, err := strconv.Atoi(portText)
		if err != nil || n < 1 || n > 65535 || strings.TrimLeft(portText, "0123456789") != "" {
			return HostPort{}, fmt.Errorf("%q: port must be 1-65535", part)
		}
		hp.Port = n
	}
	if i := strings.LastIndexByte(part, ':'); hasPort && i >= 0 {
		hp.Written = part[:i] // the host as written (brackets kept), for the ketama ring
	}
	return hp, nil
}

// Redact replaces a URL's password with ***.
func Redact(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	end := len(rest)
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		end = i
	}
	if i := strings.LastIndexByte(rest[:end], '@'); i >= 0 {
		userinfo := rest[:i]
		if user, _, hasPw := strings.Cut(userinfo, ":"); hasPw {
			return scheme + "://" + user + ":***@" + rest[i+1:]
		}
	}
	return raw
}

func (u *URL) take(name string) (string, bool) {
	u.known[name] = true
	for i, o := range u.options {
		if o[0] == name {
			u.options = append(u.options[:i], u.options[i+1:]...)
			return o[1], true
		}
	}
	return "", false
}

var durationRe = regexp.MustCompile(`^([0-9]{1,12})(ms|s|m|h)?$`)

// ParseDuration reads 250, 250ms, 2s, 1m or 1h (STORES.md §1).
func ParseDuration(text string) (time.Duration, error) {
	m := durationRe.FindStringSubmatch(text)
	if m == nil {
		return 0, fmt.Errorf("a number with ms, s, m or h")
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	unit := map[string]time.Duration{"": time.Millisecond, "ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour}[m[2]]
	return time.Duration(n) * unit, nil
}

var sizeRe = regexp.MustCompile(`^([0-9]*)(?:\.([0-9]*))?$`)

// ParseSize reads 1048576, 512K, 256M, 1.5G, 2GiB (binary multiples).
func ParseSize(text string) (int64, error) {
	t := strings.TrimSpace(text)
	if strings.HasPrefix(t, "-") {
		return 0, fmt.Errorf("%q: a size cannot be negative", text)
	}
	split := strings.IndexFunc(t, func(r rune) bool { return !(r == '.' || ('0' <= r && r <= '9')) })
	if split < 0 {
		split = len(t)
	}
	number, suffix := t[:split], strings.ToUpper(strings.TrimSpace(t[split:]))
	if strings.HasSuffix(suffix, "IB") {
		suffix = suffix[:len(suffix)-2]
	} else if strings.HasSuffix(suffix, "B") {
		suffix = suffix[:len(suffix)-1]
	}
	shift, ok := map[string]uint{"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[suffix]
	if !ok {
		return 0, fmt.Errorf("%q: unknown size suffix %q (use K, M, G or T)", text, suffix)
	}
	m := sizeRe.FindStringSubmatch(number)
	if m == nil || (m[1] == "" && m[2] == "") {
		return 0, fmt.Errorf("%q is not a size (examples: 1048576, 512K, 256M, 1.5G)", text)
	}
	whole, _ := strconv.ParseInt("0"+m[1], 10, 64)
	if len(m[1]) > 15 {
		return 0, fmt.Errorf("%q is too large", text)
	}
	size := whole << shift
	if m[2] != "" {
		digits := m[2][:min(len(m[2]), 15)]
		f, _ := strconv.ParseInt(digits, 10, 64)
		pow := int64(1)
		for range digits {
			pow *= 10
		}
		size += int64(float64(f) / float64(pow) * float64(int64(1)<<shift))
	}
	return size, nil
}

func (u *URL) duration(name string, def time.Duration) (time.Duration, error) {
	v, ok := u.take(name)
	if !ok {
		return def, nil
	}
	d, err := ParseDuration(v)
	if err != nil {
		return 0, u.errorf("option %s=%q is not a duration (%v)", name, v, err)
	}
	return d, nil
}

func (u *URL) size(name string, def int64) (int64, error) {
	v, ok := u.take(name)
	if !ok {
		return def, nil
	}
	s, err := ParseSize(v)
	if err != nil {
		return 0, u.errorf("option %s: %v", name, err)
	}
	return s, nil
}

func (u *URL) number(name string, def, lo, hi int) (int, error) {
	v, ok := u.take(name)
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi || strings.TrimLeft(v, "0123456789") != "" {
		return 0, u.errorf("option %s=%q must be a whole number from %d to %d", name, v, lo, hi)
	}
	return n, nil
}

func (u *URL) boolean(name string, def bool) (bool, error) {
	v, ok := u.take(name)
	if !ok {
		return def, nil
	}
	switch v {
	case "true", "1", "yes":
		return true, nil
	case "false", "0", "no":
		return false, nil
	}
	return false, u.errorf("option %s=%q must be true or false", name, v)
}

func (u *URL) finish() error {
	if len(u.options) == 0 {
		return nil
	}
	var unknown, known []string
	for _, o := range u.options {
		unknown = append(unknown, o[0])
	}
	for k := range u.known {
		known = append(known, k)
	}
	sort.Strings(known)
	list := strings.Join(known, ", ")
	if list == "" {
		list = "none"
	}
	plural := ""
	if len(unknown) > 1 {
		plural = "s"
	}
	return u.errorf("unknown option%s %s for %s:// (known: %s)", plural, strings.Join(unknown, ", "), u.Scheme, list)
}

// remoteOptions are the options every remote store takes (STORES.md §1).
type remoteOptions struct {
	prefix         string
	timeout        time.Duration
	connectTimeout time.Duration
	pool           int
	failures       int
	retryAfter     time.Duration
}

func (u *URL) remote(defPool int, defRetry time.Duration) (remoteOptions, error) {
	var o remoteOptions
	var err error
	o.prefix, _ = u.take("prefix")
	if err := CheckPrefix(o.prefix); err != nil {
		return o, u.errorf("option prefix: %v", err)
	}
	if o.timeout, err = u.duration("timeout", 250*time.Millisecond); err != nil {
		return o, err
	}
	if o.connectTimeout, err = u.duration("connect_timeout", 500*time.Millisecond); err != nil {
		return o, err
	}
	if o.pool, err = u.number("pool", defPool, 1, 1024); err != nil {
		return o, err
	}
	if o.failures, err = u.number("failures", 2, 1, 1000); err != nil {
		return o, err
	}
	if o.retryAfter, err = u.duration("retry_after", defRetry); err != nil {
		return o, err
	}
	return o, nil
}
