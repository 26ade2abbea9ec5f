// Package keys derives the keys every larder language derives identically (FORMAT.md §5), so an entry written
// by one is found by another: safe keys, namespaces, HTTP request keys, Vary variants and alternate codings.
// Lengths and comparisons are over UTF-8 bytes; case changes are ASCII-only; nothing is percent-decoded.
package keys

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// MaxKeyLen is memcached's key length limit.
const MaxKeyLen = 250

// hashedPrefixLen is the longest readable prefix kept in a hashed key.
const hashedPrefixLen = 180

// DefaultDrop lists the query parameters dropped from HTTP keys unless told otherwise.
var DefaultDrop = []string{"utm_*", "gclid", "fbclid", "msclkid"}

// Codings are the content codings an alternate may be kept in (FORMAT.md §5.5).
var Codings = []string{"identity", "gzip", "br", "zstd"}

// IsSafe reports whether memcached accepts key as it is: at most 250 bytes, no byte 0x00-0x20 or 0x7F.
func IsSafe(key string) bool {
	if len(key) > MaxKeyLen {
		return false
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c <= 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// SafeKey is key unchanged if memcached accepts it, else its readable prefix, "#", and the SHA-256 of the key.
func SafeKey(key string) string {
	if IsSafe(key) {
		return key
	}
	n := 0
	for n < len(key) && n < hashedPrefixLen && key[n] >= 0x21 && key[n] <= 0x7e {
		n++
	}
	sum := sha256.Sum256([]byte(key))
	return key[:n] + "#" + hex.EncodeToString(sum[:])
}

// NamespacedKey is "namespace:key" (key alone when namespace is empty), made safe.
func NamespacedKey(namespace, key string) string {
	if namespace == "" {
		return SafeKey(key)
	}
	return SafeKey(namespace + ":" + key)
}

// HTTPKey is the key of a request from its parts as a server sees them (FORMAT.md §5.3). drop nil means
// DefaultDrop; an empty non-nil slice drops nothing.
func HTTPKey(method, scheme, authority, pathAndQuery, namespace string, drop []string) string {
	if drop == nil {
		drop = DefaultDrop
	}
	scheme = asciiLower(scheme)
	var b strings.Builder
	b.WriteString(asciiUpper(method))
	b.WriteByte(':')
	b.WriteString(scheme)
	b.WriteString("://")
	b.WriteString(normalizeAuthority(scheme, authority))
	if i := strings.IndexByte(pathAndQuery, '#'); i >= 0 {
		pathAndQuery = pathAndQuery[:i]
	}
	path, query, _ := strings.Cut(pathAndQuery, "?")
	if path == "" {
		path = "/"
	}
	b.WriteString(path)
	var parts []string
	for _, part := range strings.Split(query, "&") {
		if part != "" && !dropped(paramName(part), drop) {
			parts = append(parts, part)
		}
	}
	sort.SliceStable(parts, func(i, j int) bool { return paramName(parts[i]) < paramName(parts[j]) })
	if len(parts) > 0 {
		b.WriteByte('?')
		b.WriteString(strings.Join(parts, "&"))
	}
	return NamespacedKey(namespace, b.String())
}

// ErrNotAbsolute is returned for a URL without "://".
var ErrNotAbsolute = errors.New("not an absolute URL (no \"://\")")

// URLKey is the key of a request given as a URL text, scheme://authority/path?query.
func URLKey(method, url, namespace string, drop []string) (string, error) {
	scheme, rest, ok := strings.Cut(url, "://")
	if !ok {
		return "", fmt.Errorf("%w: %q", ErrNotAbsolute, url)
	}
	end := len(rest)
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		end = i
	}
	return HTTPKey(method, scheme, rest[:end], rest[end:], namespace, drop), nil
}

func paramName(part string) string {
	name, _, _ := strings.Cut(part, "=")
	return name
}

func dropped(name string, patterns []string) bool {
	for _, p := range patterns {
		if strings.HasSuffix(p, "*") {
			if strings.HasPrefix(name, p[:len(p)-1]) {
				return true
			}
		} else if name == p {
			return true
		}
	}
	return false
}

func normalizeAuthority(scheme, authority string) string {
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		authority = authority[i+1:]
	}
	host := asciiLower(authority)
	if strings.HasSuffix(host, ":") {
		return host[:len(host)-1]
	}
	switch {
	case scheme == "http" && strings.HasSuffix(host, ":80"):
		return host[:len(host)-3]
	case scheme == "https" && strings.HasSuffix(host, ":443"):
		return host[:len(host)-4]
	}
	return host
}

func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 32
				}
			}
			return string(b)
		}
	}
	return s
}

func asciiUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}

// AsciiLower lowercases ASCII letters only (header names, schemes).
func AsciiLower(s string) string { return asciiLower(s) }
