// hostile_replies.json (spec/STORES.md §2, "Replies are hostile too"): every operation of the memcached and
// Redis stores against larder-hostile ($LARDER_HOSTILE), one fresh server and one fresh store per operation; each
// must fail with the store's own error (timeout, protocol, unavailable or error: not a success, not
// invalid_key, not unsupported, not a panic) within the case's within_ms of the call.
package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/larder-cache/larder/clients/go/internal/hostileproc"
	"github.com/larder-cache/larder/clients/go/stores"
)

type hostileReplyCase struct {
	Name       string   `json:"name"`
	Protocol   string   `json:"protocol"`
	Behaviour  string   `json:"behaviour"`
	ServerArgs []string `json:"server_args"`
	URLQuery   string   `json:"url_query"`
	Operations []string `json:"operations"`
	WithinMs   int64    `json:"within_ms"`
}

func hostileRepliesCases(path string, data []byte) ([]Case, error) {
	var doc struct {
		EntryHex *string            `json:"entry_hex"`
		Cases    []hostileReplyCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Cases == nil {
		return nil, errors.New("no cases")
	}
	entry := []byte("hostile replies")
	if doc.EntryHex != nil {
		var err error
		if entry, err = unhex("entry_hex", *doc.EntryHex); err != nil {
			return nil, err
		}
	}
	bin, err := needEnv("LARDER_HOSTILE", "the larder-hostile binary (crates/testkit)")
	if err != nil {
		return nil, err
	}
	var out []Case
	for _, c := range doc.Cases {
		if c.Name == "" || len(c.Operations) == 0 || c.WithinMs <= 0 || (c.Protocol != "memcached" && c.Protocol != "redis") {
			return nil, fmt.Errorf("case %q: a name, memcached or redis, operations and within_ms", c.Name)
		}
		out = append(out, Case{c.Name, func() error {
			for _, op := range c.Operations {
				if err := checkReply(bin, entry, c, op); err != nil {
					return fmt.Errorf("%s: %v", op, err)
				}
			}
			return nil
		}})
	}
	return out, nil
}

// startHostile runs larder-hostile for the case and returns its address and a stop that closes its standard input.
func startHostile(bin string, c hostileReplyCase) (string, func(), error) {
	return hostileproc.Start(bin, append([]string{c.Protocol, c.Behaviour}, c.ServerArgs...)...)
}

func checkReply(bin string, entry []byte, c hostileReplyCase, op string) error {
	addr, stop, err := startHostile(bin, c)
	if err != nil {
		return err
	}
	defer stop()
	url := c.Protocol + "://" + addr
	if c.URLQuery != "" {
		url += "?" + strings.TrimPrefix(c.URLQuery, "?")
	}
	limit := time.Duration(c.WithinMs) * time.Millisecond
	started := time.Now()
	// The runner's own bound is twice the case's, so a store that never returns is reported, not waited for.
	err = within(2*limit+time.Second, op, func(ctx context.Context) error {
		s, err := stores.Open(ctx, url)
		if err != nil {
			return fmt.Errorf("open %s: %v", url, err)
		}
		defer s.Close()
		return replyOp(ctx, s, entry, op)
	})
	took := time.Since(started)
	var late *overdue
	if errors.As(err, &late) {
		return err
	}
	var se *stores.Error
	switch {
	case err == nil:
		return errors.New("succeeded against a hostile server")
	case !errors.As(err, &se):
		return fmt.Errorf("failed with %v, not the store's own error", err)
	case se.Kind == stores.InvalidKey || se.Kind == stores.Unsupported || se.Kind == stores.BadURL:
		return fmt.Errorf("failed for another reason: %v", err)
	case took > limit:
		return fmt.Errorf("failed only after %v (within_ms %d): %v", took.Round(time.Millisecond), c.WithinMs, err)
	}
	return nil
}

func replyOp(ctx context.Context, s stores.Store, entry []byte, op string) error {
	var err error
	switch op {
	case "get":
		_, err = s.Get(ctx, "k1")
	case "get_many":
		_, err = s.GetMulti(ctx, []string{"k1", "k2", "k3"})
	case "set":
		err = s.Set(ctx, "k1", entry, 0)
	case "add":
		_, err = s.Add(ctx, "k1", entry, 0)
	case "incr":
		_, _, err = s.Incr(ctx, "k1", 1, 0, true)
	case "delete":
		_, err = s.Delete(ctx, "k1")
	case "delete_if":
		_, err = s.DeleteIf(ctx, "k1", entry)
	case "purge_tag":
		_, err = s.PurgeTag(ctx, "t")
	case "purge_prefix":
		_, err = s.PurgePrefix(ctx, "k")
	default:
		return fmt.Errorf("unknown operation %q", op)
	}
	return err
}
