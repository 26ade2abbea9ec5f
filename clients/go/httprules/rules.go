// Package httprules decides whether larder, a shared cache, stores a response and for how long: the storage
// rules of spec/HTTP.md §1, which `larder serve` applies, so a Go app writing its own pages into a shared store
// stores exactly what the front would, with the same freshness and stale window. spec/vectors/storage.json is
// the contract. Nothing here does I/O.
package httprules

import (
	"sort"
	"strings"
)

// Rules are `larder serve`'s storage settings (spec/HTTP.md §1.8); DefaultRules() gives its defaults.
// Durations are whole seconds.
type Rules struct {
	TargetedFields           []string
	SurrogateControl         bool
	HeuristicMax             int64
	CacheSetCookie           bool
	StaleWhileRevalidate     int64
	StaleIfError             int64
	RevalidationWindow       int64
	HonorRequestCacheControl bool
}

// DefaultRules are the front's defaults.
func DefaultRules() Rules {
	return Rules{TargetedFields: []string{"cdn-cache-control"}, SurrogateControl: true, StaleIfError: 300,
		RevalidationWindow: 3600}
}

// Line is one header line: name (any case) and value.
type Line struct {
	Name, Value string
}

// Decision is the outcome: Stored, or a Reason (the Cache-Status detail) for not storing.
type Decision struct {
	Stored       bool
	Reason       string
	FreshMs      int64
	InitialAgeMs int64
	KeepStaleMs  int64
	Vary         []string
}

var understood = map[int]bool{200: true, 203: true, 204: true, 300: true, 301: true, 302: true, 303: true,
	307: true, 308: true, 404: true, 405: true, 410: true, 414: true, 451: true, 501: true}

var heuristic = map[int]bool{200: true, 203: true, 204: true, 206: true, 300: true, 301: true, 308: true,
	404: true, 405: true, 410: true, 414: true, 451: true, 501: true}

func values(h []Line, name string) []string {
	var out []string
	for _, l := range h {
		if lower(l.Name) == name {
			out = append(out, l.Value)
		}
	}
	return out
}

func notStored(reason string) Decision { return Decision{Reason: reason} }

// Storage decides, in spec/HTTP.md §1.2's order, whether and how this response is stored.
func Storage(r Rules, method string, request []Line, status int, response []Line, requestTimeMs, responseTimeMs int64) Decision {
	if method != "GET" {
		return notStored("method")
	}
	if status < 200 || status >= 600 || status == 206 || status == 304 {
		return notStored("status")
	}
	if r.HonorRequestCacheControl && ParseCacheControl(values(request, "cache-control")).NoStore {
		return notStored("request-no-store")
	}
	d, useExpires := Governing(r, response)
	if d.MustUnderstand {
		if !understood[status] {
			return notStored("status")
		}
	} else if d.NoStore {
		return notStored("no-store")
	}
	if d.Private {
		return notStored("private")
	}
	if len(values(request, "authorization")) > 0 && !(d.Public || d.MustRevalidate || d.SMaxage != nil) {
		return notStored("authorization")
	}
	if len(values(response, "set-cookie")) > 0 && !r.CacheSetCookie {
		return notStored("set-cookie")
	}
	vary, star := VaryNames(response)
	if star {
		return notStored("vary-star")
	}
	if CodingIsDecodable(response) {
		kept := vary[:0]
		for _, n := range vary {
			if n != "accept-encoding" {
				kept = append(kept, n)
			}
		}
		vary = kept
	}
	hasValidator := len(values(response, "etag")) > 0 || len(values(response, "last-modified")) > 0
	lifetime, ok := lifetimeMs(r, status, response, &d, useExpires, responseTimeMs)
	if !ok {
		if !(hasValidator && (heuristic[status] || d.Public)) {
			return notStored("no-explicit-freshness")
		}
		lifetime = 0
	}
	initialAge := initialAgeMs(response, requestTimeMs, responseTimeMs)
	var fresh int64
	if !d.NoCache {
		fresh = max(lifetime-initialAge, 0)
	}
	keep := staleWindowMs(r, &d)
	if hasValidator {
		keep = max(keep, r.RevalidationWindow*1000)
	}
	if fresh == 0 && keep == 0 {
		return notStored("no-explicit-freshness")
	}
	if vary == nil {
		vary = []string{}
	}
	return Decision{Stored: true, FreshMs: fresh, InitialAgeMs: initialAge, KeepStaleMs: keep, Vary: vary}
}

// Governing returns the directives that govern larder (§1.3) and whether Expires counts.
func Governing(r Rules, response []Line) (Directives, bool) {
	for _, f := range r.TargetedFields {
		if d, ok := parseTargeted(values(response, lower(f))); ok {
			return d, false
		}
	}
	if r.SurrogateControl {
		if d, ok := parseSurrogateControl(values(response, "surrogate-control")); ok {
			return d, false
		}
	}
	return ParseCacheControl(values(response, "cache-control")), true
}

// VaryNames are the lowercase names a response varies on, sorted and unique; star is true for `Vary: *`.
func VaryNames(response []Line) (names []string, star bool) {
	set := map[string]bool{}
	for _, line := range values(response, "vary") {
		for _, n := range strings.Split(line, ",") {
			n = strings.Trim(n, " \t")
			if n == "*" {
				return nil, true
			}
			if n != "" {
				set[lower(n)] = true
			}
		}
	}
	names = make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, false
}

// CodingIsDecodable: no Content-Encoding, or exactly one line naming identity, gzip, br or zstd (any case).
func CodingIsDecodable(response []Line) bool {
	c := values(response, "content-encoding")
	if len(c) == 0 {
		return true
	}
	if len(c) != 1 {
		return false
	}
	switch lower(strings.Trim(c[0], " \t")) {
	case "identity", "gzip", "br", "zstd":
		return true
	}
	return false
}

func lifetimeMs(r Rules, status int, response []Line, d *Directives, useExpires bool, nowMs int64) (int64, bool) {
	if d.SMaxage != nil {
		return *d.SMaxage * 1000, true
	}
	if d.MaxAge != nil {
		return *d.MaxAge * 1000, true
	}
	expires := values(response, "expires")
	if useExpires && len(expires) > 0 {
		if len(expires) != 1 {
			return 0, true
		}
		at, ok := ParseHTTPDate(expires[0], nowMs)
		if !ok {
			return 0, true
		}
		return min(max(at-dateOr(response, nowMs), 0), MaxDeltaSeconds*1000), true
	}
	if r.HeuristicMax > 0 && (heuristic[status] || d.Public) {
		if lm, ok := firstDate(response, "last-modified", nowMs); ok {
			age := max(dateOr(response, nowMs)-lm, 0)
			return min(age/10, r.HeuristicMax*1000), true
		}
	}
	return 0, false
}

func staleWindowMs(r Rules, d *Directives) int64 {
	if d.MustRevalidate || d.ProxyRevalidate || d.NoCache || d.SMaxage != nil {
		return 0
	}
	swr, sie := r.StaleWhileRevalidate, r.StaleIfError
	if d.StaleWhileRevalidate != nil {
		swr = *d.StaleWhileRevalidate
	}
	if d.StaleIfError != nil {
		sie = *d.StaleIfError
	}
	return max(swr, sie) * 1000
}

func initialAgeMs(response []Line, requestTimeMs, responseTimeMs int64) int64 {
	var apparent int64
	if date, ok := firstDate(response, "date", responseTimeMs); ok {
		apparent = max(responseTimeMs-date, 0)
	}
	delay := max(responseTimeMs-requestTimeMs, 0)
	var age int64
	if ages := values(response, "age"); len(ages) > 0 {
		first, _, _ := strings.Cut(ages[0], ",")
		if v, ok := deltaSeconds(strings.Trim(first, " \t")); ok {
			age = v
		}
	}
	return max(apparent, age*1000+delay)
}

func firstDate(response []Line, name string, nowMs int64) (int64, bool) {
	lines := values(response, name)
	if len(lines) == 0 {
		return 0, false
	}
	return ParseHTTPDate(lines[0], nowMs)
}

func dateOr(response []Line, responseTimeMs int64) int64 {
	if d, ok := firstDate(response, "date", responseTimeMs); ok {
		return d
	}
	return responseTimeMs
}
