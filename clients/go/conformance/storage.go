// storage.json (spec/HTTP.md §1): with each case's settings, httprules.Storage gives exactly `expected`; the
// file's shape (unique names, notes, known reasons, sorted lowercase Vary names) is a case of its own,
// file-shape, as in the other runners, so every column counts the same.
package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/larder-cache/larder/clients/go/httprules"
)

type storageExpected struct {
	Stored       *bool     `json:"stored"`
	Reason       *string   `json:"reason"`
	FreshMs      *int64    `json:"fresh_ms"`
	InitialAgeMs *int64    `json:"initial_age_ms"`
	KeepStaleMs  *int64    `json:"keep_stale_ms"`
	Vary         *[]string `json:"vary"`
}

type storageCase struct {
	Name    string                     `json:"name"`
	Note    string                     `json:"note"`
	Rules   map[string]json.RawMessage `json:"rules"`
	Request struct {
		Method  string      `json:"method"`
		Headers [][2]string `json:"headers"`
	} `json:"request"`
	Response struct {
		Status  int         `json:"status"`
		Headers [][2]string `json:"headers"`
	} `json:"response"`
	RequestTimeMs  int64                      `json:"request_time_ms"`
	ResponseTimeMs int64                      `json:"response_time_ms"`
	Expected       storageExpected            `json:"expected"`
	ExpectedRaw    map[string]json.RawMessage `json:"-"`
}

var reasons = map[string]bool{"method": true, "status": true, "no-store": true, "request-no-store": true,
	"private": true, "authorization": true, "set-cookie": true, "vary-star": true, "no-explicit-freshness": true}

func storageCases(data []byte) ([]Case, error) {
	var doc struct {
		Defaults map[string]json.RawMessage `json:"rules_defaults"`
		Cases    []json.RawMessage          `json:"cases"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Defaults == nil || doc.Cases == nil {
		return nil, errors.New("no rules_defaults or cases")
	}
	cases := make([]storageCase, len(doc.Cases))
	for i, raw := range doc.Cases {
		if err := json.Unmarshal(raw, &cases[i]); err != nil {
			return nil, err
		}
		var whole struct {
			Expected map[string]json.RawMessage `json:"expected"`
		}
		if err := json.Unmarshal(raw, &whole); err != nil {
			return nil, err
		}
		cases[i].ExpectedRaw = whole.Expected
	}
	out := []Case{{"file-shape", func() error { return checkShape(cases) }}}
	for _, c := range cases {
		out = append(out, Case{c.Name, func() error { return checkStorage(doc.Defaults, c) }})
	}
	return out, nil
}

// RulesFor builds Rules from the front's settings (defaults with overrides; an unknown name is an error).
func RulesFor(defaults, overrides map[string]json.RawMessage) (httprules.Rules, error) {
	settings := map[string]json.RawMessage{}
	for k, v := range defaults {
		settings[k] = v
	}
	for k, v := range overrides {
		if _, ok := settings[k]; !ok {
			return httprules.Rules{}, fmt.Errorf("unknown rule %s", k)
		}
		settings[k] = v
	}
	var r httprules.Rules
	for k, v := range settings {
		var err error
		switch k {
		case "targeted_fields":
			err = json.Unmarshal(v, &r.TargetedFields)
		case "surrogate_control":
			err = json.Unmarshal(v, &r.SurrogateControl)
		case "heuristic_max_secs":
			err = json.Unmarshal(v, &r.HeuristicMax)
		case "cache_set_cookie":
			err = json.Unmarshal(v, &r.CacheSetCookie)
		case "stale_while_revalidate_secs":
			err = json.Unmarshal(v, &r.StaleWhileRevalidate)
		case "stale_if_error_secs":
			err = json.Unmarshal(v, &r.StaleIfError)
		case "revalidation_window_secs":
			err = json.Unmarshal(v, &r.RevalidationWindow)
		case "honor_request_cache_control":
			err = json.Unmarshal(v, &r.HonorRequestCacheControl)
		default:
			err = fmt.Errorf("unknown setting %s", k)
		}
		if err != nil {
			return r, err
		}
	}
	return r, nil
}

func lines(pairs [][2]string) []httprules.Line {
	out := make([]httprules.Line, len(pairs))
	for i, p := range pairs {
		out[i] = httprules.Line{Name: p[0], Value: p[1]}
	}
	return out
}

func checkStorage(defaults map[string]json.RawMessage, c storageCase) error {
	r, err := RulesFor(defaults, c.Rules)
	if err != nil {
		return err
	}
	d := httprules.Storage(r, c.Request.Method, lines(c.Request.Headers), c.Response.Status, lines(c.Response.Headers),
		c.RequestTimeMs, c.ResponseTimeMs)
	e := c.Expected
	if e.Stored == nil {
		return errors.New("no expected.stored")
	}
	if !*e.Stored {
		if d.Stored || e.Reason == nil || d.Reason != *e.Reason {
			return fmt.Errorf("expected not stored (%v), got %+v", deref(e.Reason), d)
		}
		return nil
	}
	if !d.Stored || e.FreshMs == nil || e.InitialAgeMs == nil || e.KeepStaleMs == nil || e.Vary == nil ||
		d.FreshMs != *e.FreshMs || d.InitialAgeMs != *e.InitialAgeMs || d.KeepStaleMs != *e.KeepStaleMs ||
		!reflect.DeepEqual(d.Vary, *e.Vary) {
		return fmt.Errorf("expected stored %d/%d/%d %v, got %+v", deref(e.FreshMs), deref(e.InitialAgeMs), deref(e.KeepStaleMs), e.Vary, d)
	}
	return nil
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func checkShape(cases []storageCase) error {
	names := map[string]bool{}
	for _, c := range cases {
		if names[c.Name] {
			return fmt.Errorf("%s is not unique", c.Name)
		}
		names[c.Name] = true
		if c.Note == "" {
			return fmt.Errorf("%s has no note", c.Name)
		}
		e := c.Expected
		if e.Stored == nil {
			return fmt.Errorf("%s: stored is true or false", c.Name)
		}
		if *e.Stored {
			keys := make([]string, 0, len(c.ExpectedRaw))
			for k := range c.ExpectedRaw {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			if strings.Join(keys, ",") != "fresh_ms,initial_age_ms,keep_stale_ms,stored,vary" || e.Vary == nil {
				return fmt.Errorf("%s: fields %v", c.Name, keys)
			}
			v := *e.Vary
			for i, n := range v {
				if n != strings.ToLower(n) || (i > 0 && v[i-1] >= n) {
					return fmt.Errorf("%s: vary is lowercase, sorted and unique", c.Name)
				}
			}
		} else if e.Reason == nil || !reasons[*e.Reason] {
			return fmt.Errorf("%s: unknown reason %v", c.Name, deref(e.Reason))
		}
	}
	return nil
}
