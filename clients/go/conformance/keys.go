// keys.json, ring.json and stores.json: key derivation (FORMAT.md §5), ketama selection (STORES.md §4.2) and
// the keys a store writes or refuses (STORES.md §2).
package conformance

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/larder-cache/larder/clients/go/keys"
	"github.com/larder-cache/larder/clients/go/ring"
	"github.com/larder-cache/larder/clients/go/stores"
)

func keysCases(data []byte) ([]Case, error) {
	var doc struct {
		HTTP []struct {
			Name, Method, URL, Key string
			Namespace              string
			Drop                   *[]string
		} `json:"http"`
		Safe []struct {
			Name, Key, Safe string
		} `json:"safe"`
		Namespaced []struct {
			Name, Namespace, Key, Full string
		} `json:"namespaced"`
		Variants []struct {
			Name           string               `json:"name"`
			BaseKey        string               `json:"base_key"`
			Marker         json.RawMessage      `json:"marker"`
			RequestHeaders [][2]json.RawMessage `json:"request_headers"`
			VariantKey     string               `json:"variant_key"`
		} `json:"variants"`
		Alternates []struct {
			Name         string `json:"name"`
			EntryKey     string `json:"entry_key"`
			Coding       string `json:"coding"`
			AlternateKey string `json:"alternate_key"`
		} `json:"alternates"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.HTTP == nil || doc.Safe == nil || doc.Namespaced == nil || doc.Variants == nil || doc.Alternates == nil {
		return nil, errors.New("a section is missing")
	}
	var out []Case
	for _, c := range doc.HTTP {
		out = append(out, Case{"http/" + c.Name, func() error {
			var drop []string
			if c.Drop != nil {
				drop = append([]string{}, *c.Drop...)
			}
			got, err := keys.URLKey(c.Method, c.URL, c.Namespace, drop)
			if err != nil {
				return err
			}
			return check(got == c.Key, "got %q", got)
		}})
	}
	for _, c := range doc.Safe {
		out = append(out, Case{"safe/" + c.Name, func() error {
			got := keys.SafeKey(c.Key)
			return check(got == c.Safe, "got %q", got)
		}})
	}
	for _, c := range doc.Namespaced {
		out = append(out, Case{"namespaced/" + c.Name, func() error {
			got := keys.NamespacedKey(c.Namespace, c.Key)
			return check(got == c.Full, "got %q", got)
		}})
	}
	for _, c := range doc.Variants {
		out = append(out, Case{"variants/" + c.Name, func() error {
			var m struct {
				Vary       []string `json:"vary"`
				Generation *string  `json:"generation"`
			}
			if err := json.Unmarshal(c.Marker, &m); err != nil {
				return err
			}
			var request []keys.HeaderLine
			for _, h := range c.RequestHeaders {
				name, err := stringOrBase64(h[0])
				if err != nil {
					return err
				}
				value, err := stringOrBase64(h[1])
				if err != nil {
					return err
				}
				request = append(request, keys.HeaderLine{Name: string(name), Value: string(value)})
			}
			got := keys.VariantKey(c.BaseKey, keys.Marker{Vary: m.Vary, Generation: m.Generation}, request)
			return check(got == c.VariantKey, "got %q", got)
		}})
	}
	for _, c := range doc.Alternates {
		out = append(out, Case{"alternates/" + c.Name, func() error {
			got, err := keys.AlternateKey(c.EntryKey, c.Coding)
			if err != nil {
				return err
			}
			return check(got == c.AlternateKey, "got %q", got)
		}})
	}
	return out, nil
}

func ringCases(data []byte) ([]Case, error) {
	var doc struct {
		Cases []struct {
			Name    string `json:"name"`
			Servers []struct {
				Host   string `json:"host"`
				Port   int    `json:"port"`
				Weight int    `json:"weight"`
			} `json:"servers"`
			Ejected     []int       `json:"ejected"`
			Points      int         `json:"points"`
			FirstPoints [][2]uint64 `json:"first_points"`
			Keys        []struct {
				Key    string `json:"key"`
				Hash   uint32 `json:"hash"`
				Server int    `json:"server"`
			} `json:"keys"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Cases == nil {
		return nil, errors.New("no cases")
	}
	var out []Case
	for _, c := range doc.Cases {
		out = append(out, Case{c.Name, func() error {
			servers := make([]ring.Server, len(c.Servers))
			for i, s := range c.Servers {
				servers[i] = ring.Server{Host: s.Host, Port: s.Port, Weight: s.Weight}
			}
			ejected := map[int]bool{}
			for _, i := range c.Ejected {
				ejected[i] = true
			}
			r := ring.Build(servers, ejected)
			if len(r.Points) != c.Points {
				return fmt.Errorf("%d points", len(r.Points))
			}
			for i, p := range c.FirstPoints {
				if uint64(r.Points[i].Value) != p[0] || uint64(r.Points[i].Server) != p[1] {
					return fmt.Errorf("point %d is %v", i, r.Points[i])
				}
			}
			for _, k := range c.Keys {
				if h := ring.Hash(k.Key); h != k.Hash {
					return fmt.Errorf("hash of %q is %d", k.Key, h)
				}
				if s := r.Pick(k.Key); s != k.Server {
					return fmt.Errorf("%q goes to server %d", k.Key, s)
				}
			}
			return nil
		}})
	}
	return out, nil
}

func storesCases(data []byte) ([]Case, error) { return StoreKeyCases(data, nil) }

// StoreKeyCases lists stores.json's cases; with storeCheck, refused and accepted keys also go through it (the stores'
// tests run them on every operation of real stores).
func StoreKeyCases(data []byte, storeCheck func(key string, refused bool) error) ([]Case, error) {
	var doc struct {
		Cases []struct {
			Kind      string `json:"kind"`
			Name      string `json:"name"`
			Prefix    string `json:"prefix"`
			Key       string `json:"key"`
			Purpose   string `json:"purpose"`
			StoredKey string `json:"stored_key"`
			KeyHex    string `json:"key_hex"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Cases == nil {
		return nil, errors.New("no cases")
	}
	var out []Case
	for i, c := range doc.Cases {
		name := c.Name
		if name == "" {
			name = fmt.Sprintf("%s_%d", c.Kind, i)
		}
		out = append(out, Case{c.Kind + "/" + name, func() error {
			switch c.Kind {
			case "stored":
				got := stores.StoredKey(c.Prefix, c.Key)
				return check(got == c.StoredKey, "got %q", got)
			case "internal":
				got := stores.InternalKey(c.Prefix, c.Purpose, c.Name)
				return check(got == c.StoredKey, "got %q", got)
			case "refused", "accepted":
				k, err := hex.DecodeString(c.KeyHex)
				if err != nil {
					return err
				}
				refused := c.Kind == "refused"
				err = stores.CheckKey(string(k))
				if refused && stores.KindOf(err) != stores.InvalidKey {
					return fmt.Errorf("accepted: %v", err)
				}
				if !refused && err != nil {
					return err
				}
				if storeCheck != nil {
					return storeCheck(string(k), refused)
				}
				return nil
			}
			return fmt.Errorf("unknown kind %q", c.Kind)
		}})
	}
	return out, nil
}
