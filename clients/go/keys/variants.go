// Vary variants and alternate codings (FORMAT.md §5.4, §5.5): the helpers every language offers with the same
// names (selecting_values, variant_key, alternate_key, url_keys), so a page cache in Go computes exactly the
// key the front computes.
package keys

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// HeaderLine is one request header line: a name and the value's bytes as received.
type HeaderLine struct {
	Name  string
	Value string
}

// Marker is what a base key holds for a varying response: the Vary names and, from current writers, a
// generation (nil for an older writer's marker).
type Marker struct {
	Vary       []string
	Generation *string
}

// SelectingValues is, per name in order, "name:" and the elements of every line of that header (split on ",",
// trimmed of spaces and tabs, joined with ","), then "\n"; or name + "\x00absent\n" when the request lacks it.
// Values that are not UTF-8 enter with each invalid sequence replaced by U+FFFD.
func SelectingValues(names []string, request []HeaderLine) string {
	var b strings.Builder
	for _, name := range names {
		wanted := asciiLower(name)
		var elements []string
		found := false
		for _, h := range request {
			if asciiLower(h.Name) != wanted {
				continue
			}
			found = true
			for _, e := range strings.Split(Lossy(h.Value), ",") {
				elements = append(elements, strings.Trim(e, " \t"))
			}
		}
		b.WriteString(name)
		if !found {
			b.WriteString("\x00absent\n")
			continue
		}
		b.WriteByte(':')
		b.WriteString(strings.Join(elements, ","))
		b.WriteByte('\n')
	}
	return b.String()
}

// VariantKey is the key of the variant of baseKey that a request selects under marker.
func VariantKey(baseKey string, marker Marker, request []HeaderLine) string {
	sel := SelectingValues(marker.Vary, request)
	if marker.Generation == nil {
		return SafeKey(baseKey + "\n" + sel)
	}
	return SafeKey(baseKey + "\n\x00generation:" + *marker.Generation + "\n" + sel)
}

// AlternateKey is the key a response stored under entryKey is kept under in another coding.
func AlternateKey(entryKey, coding string) (string, error) {
	for _, c := range Codings {
		if c == coding {
			return SafeKey(entryKey + "\n\x00coding:" + coding), nil
		}
	}
	return "", fmt.Errorf("coding is one of identity, gzip, br, zstd, not %q", coding)
}

// URLKeys is baseKey and its four alternates: what a URL purge removes.
func URLKeys(baseKey string) []string {
	out := []string{baseKey}
	for _, c := range Codings {
		k, _ := AlternateKey(baseKey, c)
		out = append(out, k)
	}
	return out
}

// Lossy reads s as UTF-8, replacing each maximal invalid subsequence with U+FFFD, as Rust's
// String::from_utf8_lossy, Python's errors="replace" and Ruby's scrub do (Go's own conversions replace each
// byte, which differs for a cut-short sequence).
func Lossy(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r != utf8.RuneError || size > 1 {
			b.WriteString(s[i : i+size])
			i += size
			continue
		}
		b.WriteRune(utf8.RuneError)
		i += invalidLen(s[i:])
	}
	return b.String()
}

// invalidLen is the length of the maximal prefix of s that starts a valid UTF-8 sequence but does not finish
// one (at least 1).
func invalidLen(s string) int {
	c := s[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(s); k++ {
		b := s[n]
		if k == 0 {
			if b < lo || b > hi {
				return n
			}
		} else if b < 0x80 || b > 0xBF {
			return n
		}
		n++
	}
	return n
}
