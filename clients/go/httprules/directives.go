// Cache directives as larder reads them (spec/HTTP.md §1.4): Cache-Control (a response's or a request's),
// Surrogate-Control (W3C Edge Architecture) and targeted fields such as CDN-Cache-Control (RFC 9213).
package httprules

import "strings"

// MaxDeltaSeconds is the largest delta-seconds value (RFC 9111 §1.2.2); anything larger counts as this.
const MaxDeltaSeconds = 1 << 31

// Directives are the cache directives larder acts on; a number is nil when absent (an invalid one is 0).
type Directives struct {
	NoStore, NoCache, Private, Public, MustRevalidate, ProxyRevalidate, MustUnderstand bool
	MaxAge, SMaxage, StaleWhileRevalidate, StaleIfError                                *int64
}

func isFlag(name string) bool {
	switch name {
	case "no-store", "no-cache", "private", "public", "must-revalidate", "proxy-revalidate", "must-understand":
		return true
	}
	return false
}

func isNumber(name string) bool {
	switch name {
	case "max-age", "s-maxage", "stale-while-revalidate", "stale-if-error":
		return true
	}
	return false
}

func (d *Directives) setFlag(name string) {
	switch name {
	case "no-store":
		d.NoStore = true
	case "no-cache":
		d.NoCache = true
	case "private":
		d.Private = true
	case "public":
		d.Public = true
	case "must-revalidate":
		d.MustRevalidate = true
	case "proxy-revalidate":
		d.ProxyRevalidate = true
	case "must-understand":
		d.MustUnderstand = true
	}
}

func (d *Directives) setNumber(name string, v int64) {
	p := &v
	switch name {
	case "max-age":
		d.MaxAge = p
	case "s-maxage":
		d.SMaxage = p
	case "stale-while-revalidate":
		d.StaleWhileRevalidate = p
	case "stale-if-error":
		d.StaleIfError = p
	}
}

func (d *Directives) apply(name string, argument *string) {
	if isFlag(name) {
		d.setFlag(name)
	} else if isNumber(name) {
		var v int64
		if argument != nil {
			if s, ok := deltaSeconds(*argument); ok {
				v = s
			}
		}
		d.setNumber(name, v)
	}
}

// deltaSeconds reads one or more ASCII digits, past 2^31 counting as 2^31.
func deltaSeconds(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	var v int64
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return 0, false
		}
		if v < MaxDeltaSeconds {
			v = v*10 + int64(s[i]-'0')
		}
	}
	return min(v, MaxDeltaSeconds), true
}

// ParseCacheControl reads every line of a Cache-Control field; the first occurrence of a directive wins.
func ParseCacheControl(lines []string) Directives {
	var d Directives
	seen := map[string]bool{}
	for _, line := range lines {
		for _, element := range elements(line) {
			name, arg, ok := directive(element)
			if ok && !seen[name] {
				seen[name] = true
				d.apply(name, arg)
			}
		}
	}
	return d
}

// parseSurrogateControl reads Surrogate-Control; ok is false when it holds no directive larder acts on.
func parseSurrogateControl(lines []string) (Directives, bool) {
	var d Directives
	seen := map[string]bool{}
	actedOn := false
	for _, line := range lines {
		for _, element := range elements(line) {
			if hasUnquotedSemicolon(element) {
				continue
			}
			name, arg, ok := directive(element)
			if !ok || seen[name] {
				continue
			}
			seen[name] = true
			if isFlag(name) || isNumber(name) {
				actedOn = true
			}
			if name == "max-age" && arg != nil {
				if n, m, found := strings.Cut(*arg, "+"); found && allDigits(n) && allDigits(m) {
					arg = &n
				}
			}
			d.apply(name, arg)
		}
	}
	return d, actedOn
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// parseTargeted reads a targeted field; ok is false when it is absent, empty or invalid.
func parseTargeted(lines []string) (Directives, bool) {
	var d Directives
	if len(lines) == 0 {
		return d, false
	}
	keys, values, err := parseDictionary(strings.Join(lines, ", "))
	if err != nil || len(keys) == 0 {
		return d, false
	}
	for _, key := range keys {
		value := values[key]
		switch {
		case isNumber(key):
			v, ok := value.(int64)
			if !ok || v < 0 {
				return d, false
			}
			d.setNumber(key, min(v, MaxDeltaSeconds))
		case isFlag(key) || key == "immutable":
			_, isString := value.(string)
			listAllowed := (key == "no-cache" || key == "private") && isString
			if b, ok := value.(bool); !(ok && b) && !listAllowed {
				return d, false
			}
			d.setFlag(key)
		}
	}
	return d, true
}

// elements splits one line of a comma-separated list; commas in quoted strings do not split.
func elements(line string) []string {
	var out []string
	start := 0
	emit := func(e string) {
		if t := strings.Trim(e, " \t"); t != "" {
			out = append(out, t)
		}
	}
	eachUnquoted(line, ',', func(i int) bool {
		emit(line[start:i])
		start = i + 1
		return true
	})
	emit(line[start:])
	return out
}

// eachUnquoted calls at with the index of every sep byte of s outside a quoted string (RFC 9110 §5.6.4: a
// backslash escapes the next byte inside quotes), until at returns false.
func eachUnquoted(s string, sep byte, at func(i int) bool) {
	quoted, escaped := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quoted:
			if escaped {
				escaped = false
			} else if c == '\\' {
				escaped = true
			} else if c == '"' {
				quoted = false
			}
		case c == '"':
			quoted = true
		case c == sep:
			if !at(i) {
				return
			}
		}
	}
}

func directive(element string) (string, *string, bool) {
	name, arg, equals := strings.Cut(element, "=")
	if name == "" || strings.ContainsAny(name, " \t") {
		return "", nil, false
	}
	name = lower(name)
	if !equals {
		return name, nil, true
	}
	u := unquote(arg)
	return name, &u, true
}

func unquote(arg string) string {
	if len(arg) < 2 || arg[0] != '"' || arg[len(arg)-1] != '"' {
		return arg
	}
	inner := arg[1 : len(arg)-1]
	var b strings.Builder
	for i := 0; i < len(inner); i++ {
		if inner[i] == '\\' {
			i++
			if i < len(inner) {
				b.WriteByte(inner[i])
			}
			continue
		}
		b.WriteByte(inner[i])
	}
	return b.String()
}

func hasUnquotedSemicolon(element string) bool {
	found := false
	eachUnquoted(element, ';', func(int) bool {
		found = true
		return false
	})
	return found
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 32
		}
	}
	return string(b)
}
