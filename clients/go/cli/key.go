// `key`: the key of FORMAT.md §5.3 for a request URL, then a newline.
package cli

import (
	"github.com/larder-cache/larder/clients/go/keys"
)

const keyHelp = `usage: larder-go key URL [--method M] [--namespace N] [--drop PARAM]... [--no-default-drops]

Print the cache key of a request URL (spec/FORMAT.md §5.3).

options:
  URL                 the request URL, e.g. https://shop.example/p/42?b=2&a=1
  --method M          the request method (default GET)
  --namespace N       prefix keys with NAMESPACE and a colon
  --drop PARAM        also drop PARAM (a name, or prefix*); repeatable
  --no-default-drops  do not drop utm_*, gclid, fbclid, msclkid
`

var keySpecs = map[string]flagSpec{"method": {value: true}, "namespace": {value: true},
	"drop": {value: true, repeat: true}, "no-default-drops": {}}

func keyCmd(args []string) ([]byte, error) {
	p, help, err := parse(args, keySpecs, keyHelp)
	if help != nil || err != nil {
		return help, err
	}
	if len(p.pos) != 1 {
		if len(p.pos) == 0 {
			return nil, usage("the URL argument is required")
		}
		return nil, usage("unexpected argument %q", p.pos[1])
	}
	method := "GET"
	if v, ok := p.get("method"); ok {
		method = v
	}
	namespace, _ := p.get("namespace")
	drop := []string{}
	if !p.has("no-default-drops") {
		drop = append(drop, keys.DefaultDrop...)
	}
	drop = append(drop, p.opts["drop"]...)
	k, err := keys.URLKey(method, p.pos[0], namespace, drop)
	if err != nil {
		return nil, &failure{2, err.Error()}
	}
	return []byte(k + "\n"), nil
}
