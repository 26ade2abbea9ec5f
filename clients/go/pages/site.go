// Which site a page is for (spec/HTTP.md §2; issue 32 finding 7): a request that reaches the app directly carries
// whatever its sender wrote, so the scheme and authority a page is keyed on come only from what can be trusted:
// the configured Site, the forwarding fields of a peer in TrustedProxies (as `larder serve --trusted-proxies`
// believes them), or a Host that is a plain authority. Anything else is not stored, with the reason "host": a
// Host with a path, userinfo, a bad port or a stray byte, a Host that is not the Site, forwarded fields that
// disagree, an absolute-form target (net/http drops the Host field of such a request, so the target's authority
// cannot be checked against it). The middleware also removes the forwarding fields an untrusted peer sent before
// the handler runs, so what the app renders and the site the page is keyed on agree.
package pages

import (
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// ParseTrustedProxies reads addresses (10.0.0.7, ::1) and networks (10.0.0.0/8, fd00::/8) for TrustedProxies.
func ParseTrustedProxies(list ...string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, entry := range list {
		entry = strings.TrimSpace(entry)
		if p, err := netip.ParsePrefix(entry); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(entry)
		if err != nil {
			return nil, fmt.Errorf("pages: trusted proxy %q is not an IP address or a network such as 10.0.0.0/8", entry)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// Validate checks the configuration: Site, when set, must be a plain authority, and Scheme, when set, http or
// https. Call it when the app starts; a Cache that fails it stores nothing (Save returns the error).
func (c *Cache) Validate() error {
	if c.Site != "" && !validAuthority(c.Site) {
		return fmt.Errorf("pages: Site %q is not a plain host[:port] (such as shop.example or shop.example:8443)", c.Site)
	}
	if s := strings.ToLower(c.Scheme); s != "" && s != "http" && s != "https" {
		return fmt.Errorf("pages: Scheme %q is neither http nor https", c.Scheme)
	}
	return nil
}

// validAuthority is what `larder serve` accepts as a Host (spec/HTTP.md §2 step 3): a DNS-style name (ASCII
// letters, digits, -, ., _, ~), an IPv4 address or a bracketed IPv6 literal, then optionally : and a port of 1 to
// 5 digits no larger than 65535. No userinfo, path, query, fragment, percent-escape, space or other byte.
func validAuthority(text string) bool {
	host, port, hasPort := text, "", false
	if rest, ok := strings.CutPrefix(text, "["); ok {
		literal, after, closed := strings.Cut(rest, "]")
		if !closed || literal == "" || strings.Trim(literal, "0123456789abcdefABCDEF:.") != "" {
			return false
		}
		if after != "" {
			if port, hasPort = strings.CutPrefix(after, ":"); !hasPort {
				return false
			}
		}
		host = "[]"
	} else if i := strings.LastIndexByte(text, ':'); i >= 0 {
		host, port, hasPort = text[:i], text[i+1:], true
	}
	if host != "[]" {
		if host == "" {
			return false
		}
		for i := 0; i < len(host); i++ {
			c := host[i]
			if !(('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~') {
				return false
			}
		}
	}
	if hasPort {
		if len(port) < 1 || len(port) > 5 || strings.Trim(port, "0123456789") != "" {
			return false
		}
		if n, err := strconv.Atoi(port); err != nil || n > 65535 {
			return false
		}
	}
	return true
}

// normalizeAuthority is spec/FORMAT.md §5.3 step 3 for a plain authority: ASCII lowercase, and the port removed
// when it is the scheme's default.
func normalizeAuthority(scheme, authority string) string {
	a := strings.ToLower(authority)
	switch {
	case scheme == "http" && strings.HasSuffix(a, ":80"):
		return a[:len(a)-3]
	case scheme == "https" && strings.HasSuffix(a, ":443"):
		return a[:len(a)-4]
	}
	return a
}

// trusted reports whether the request came from a peer in TrustedProxies (an IPv4-mapped IPv6 address counts as
// the IPv4 address).
func (c *Cache) trusted(r *http.Request) bool {
	if len(c.TrustedProxies) == 0 {
		return false
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	addr := ap.Addr().Unmap()
	for _, p := range c.TrustedProxies {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// claimed reads a trusted proxy's claims as the front does: the first element of X-Forwarded-Proto and of
// X-Forwarded-Host, and the proto and host of Forwarded's first element; where both speak they must agree, and
// the protocol must be http or https.
func claimed(h http.Header) (proto, host string, ok bool) {
	first := func(name string) string {
		values := h.Values(name)
		if len(values) == 0 {
			return ""
		}
		v, _, _ := strings.Cut(values[0], ",")
		return strings.TrimSpace(v)
	}
	proto, host = first("X-Forwarded-Proto"), first("X-Forwarded-Host")
	if values := h.Values("Forwarded"); len(values) > 0 {
		element, _, _ := strings.Cut(values[0], ",")
		for _, pair := range strings.Split(element, ";") {
			name, value, found := strings.Cut(pair, "=")
			if !found {
				continue
			}
			value = strings.Trim(strings.TrimSpace(value), `"`)
			var slot *string
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "proto":
				slot = &proto
			case "host":
				slot = &host
			default:
				continue
			}
			if *slot != "" && !strings.EqualFold(*slot, value) {
				return "", "", false
			}
			*slot = value
		}
	}
	proto = strings.ToLower(proto)
	if proto != "" && proto != "http" && proto != "https" {
		return "", "", false
	}
	return proto, host, true
}

// site is the scheme and authority r's page is keyed on (spec/HTTP.md §2), or ok=false: not stored ("host").
func (c *Cache) site(r *http.Request) (scheme, authority string, ok bool) {
	var proto, host string
	if c.trusted(r) {
		if proto, host, ok = claimed(r.Header); !ok {
			return "", "", false
		}
	}
	switch {
	case c.Scheme != "":
		scheme = strings.ToLower(c.Scheme)
	case proto != "":
		scheme = proto
	case r.TLS != nil:
		scheme = "https"
	default:
		scheme = "http"
	}
	if absoluteForm(r) {
		return "", "", false
	}
	if host == "" {
		host = r.Host
	}
	if !validAuthority(host) {
		return "", "", false
	}
	authority = normalizeAuthority(scheme, host)
	if c.Site != "" {
		if !validAuthority(c.Site) || authority != normalizeAuthority(scheme, c.Site) {
			return "", "", false
		}
	}
	return scheme, authority, true
}

// absoluteForm reports a request whose target named its own authority (GET http://a.example/x HTTP/1.1).
func absoluteForm(r *http.Request) bool {
	return r.RequestURI != "" && !strings.HasPrefix(r.RequestURI, "/") && r.RequestURI != "*"
}

// pathAndQuery is the request's target as the key takes it.
func pathAndQuery(r *http.Request) string {
	if r.RequestURI != "" {
		return r.RequestURI
	}
	return r.URL.RequestURI()
}

// forwardingFields name the request's scheme, host, port or path as some proxy saw them; an app that reflects one
// (an absolute link, a redirect) renders a page for a site the key does not name. Only a trusted peer's reach the
// handler (the client-address fields, X-Forwarded-For and the like, are left alone: they name no site).
var forwardingFields = []string{"Forwarded", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-Port",
	"X-Forwarded-Prefix", "X-Forwarded-Scheme", "X-Forwarded-Server", "X-Forwarded-Ssl", "X-Original-Host",
	"X-Host", "Front-End-Https", "X-Original-Url", "X-Rewrite-Url"}

// withoutUntrustedForwarding is r without the forwarding fields, unless its peer is trusted.
func (c *Cache) withoutUntrustedForwarding(r *http.Request) *http.Request {
	if c.trusted(r) {
		return r
	}
	var out *http.Request
	for _, name := range forwardingFields {
		if _, present := r.Header[name]; !present {
			continue
		}
		if out == nil {
			out = r.Clone(r.Context())
		}
		out.Header.Del(name)
	}
	if out == nil {
		return r
	}
	return out
}
