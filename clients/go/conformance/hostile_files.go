// hostile_files.json (spec/STORES.md §7): a hostile directory under a file store. For each case,
// hostile_tree.py (beside the vector file) plants the case's links, foreign files, FIFO and store files in a
// fresh ROOT and OUTSIDE, the runner opens the store from file://ROOT and the case's query and runs its
// operations, each within 5 s, and hostile_tree.py then checks that nothing planted was read, changed, followed
// or deleted, and that the files the store made have the case's modes.
package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/larder-cache/larder/clients/go/stores"
)

type hostileFileOp struct {
	Op     string  `json:"op"`
	Key    *string `json:"key"`
	Prefix *string `json:"prefix"`
	Tag    *string `json:"tag"`
	Expect string  `json:"expect"`
}

type hostileFileCase struct {
	Name       string          `json:"name"`
	URLQuery   string          `json:"url_query"`
	Operations []hostileFileOp `json:"operations"`
}

// opLimit bounds every operation (a FIFO must not block a read).
const opLimit = 5 * time.Second

func hostileFilesCases(path string, data []byte) ([]Case, error) {
	var doc struct {
		EntryHex *string           `json:"entry_hex"`
		Cases    []hostileFileCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Cases == nil {
		return nil, errors.New("no cases")
	}
	entryHex := doc.EntryHex
	if entryHex == nil {
		// The value of every write is hostile_keys.json's entry_hex.
		keysData, err := os.ReadFile(filepath.Join(filepath.Dir(path), "hostile_keys.json"))
		if err != nil {
			return nil, fmt.Errorf("the entry to write is hostile_keys.json's entry_hex: %v", err)
		}
		var keysDoc struct {
			EntryHex *string `json:"entry_hex"`
		}
		if err := json.Unmarshal(keysData, &keysDoc); err != nil || keysDoc.EntryHex == nil {
			return nil, fmt.Errorf("hostile_keys.json has no entry_hex: %v", err)
		}
		entryHex = keysDoc.EntryHex
	}
	entry, err := unhex("entry_hex", *entryHex)
	if err != nil {
		return nil, err
	}
	script, err := filepath.Abs(filepath.Join(filepath.Dir(path), "hostile_tree.py"))
	if err != nil {
		return nil, err
	}
	var out []Case
	for _, c := range doc.Cases {
		if c.Name == "" || c.Operations == nil {
			return nil, fmt.Errorf("a case without a name or operations: %+v", c)
		}
		out = append(out, Case{c.Name, func() error { return checkFileCase(script, entry, c) }})
	}
	return out, nil
}

func hostileTree(script, verb, name, root, outside string) error {
	cmd := exec.Command("python3", script, verb, name, root, outside)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("hostile_tree.py %s: %v", verb, err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("hostile_tree.py %s: %v: %s", verb, err, strings.TrimSpace(output.String()))
		}
		return nil
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("hostile_tree.py %s did not finish within 60 s", verb)
	}
}

func checkFileCase(script string, entry []byte, c hostileFileCase) error {
	base, err := os.MkdirTemp("", "larder-go-hostile-files-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(base)
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{root, outside} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	if err := hostileTree(script, "plant", c.Name, root, outside); err != nil {
		return err
	}
	url := "file://" + root
	if c.URLQuery != "" {
		url += "?" + strings.TrimPrefix(c.URLQuery, "?")
	}
	var s stores.Store
	open := func(expect string) error {
		var opened stores.Store
		err := within(opLimit, "open", func(ctx context.Context) error {
			var err error
			opened, err = stores.Open(ctx, url)
			switch expect {
			case "ok":
				if err != nil {
					return fmt.Errorf("open %s: %v", url, err)
				}
			case "url_error":
				if stores.KindOf(err) != stores.BadURL {
					return fmt.Errorf("open %s answered %v, not the URL error", url, err)
				}
			default:
				return fmt.Errorf("open expects %q", expect)
			}
			return nil
		})
		if err == nil {
			if s != nil {
				s.Close()
			}
			s = opened
		}
		return err
	}
	ops := c.Operations
	if len(ops) == 0 || ops[0].Op != "open" {
		if err := open("ok"); err != nil {
			return err
		}
	}
	defer func() {
		if s != nil {
			s.Close()
		}
	}()
	for i, op := range ops {
		var err error
		if op.Op == "open" {
			err = open(op.Expect)
		} else if s == nil {
			err = errors.New("no store is open")
		} else {
			err = within(opLimit, op.Op, func(ctx context.Context) error { return fileOp(ctx, s, entry, op) })
		}
		if err != nil {
			return fmt.Errorf("operation %d (%s %s): %v", i, op.Op, opTarget(op), err)
		}
	}
	return hostileTree(script, "check", c.Name, root, outside)
}

func opTarget(op hostileFileOp) string {
	for _, p := range []*string{op.Key, op.Prefix, op.Tag} {
		if p != nil {
			return fmt.Sprintf("%q", *p)
		}
	}
	return ""
}

func fileOp(ctx context.Context, s stores.Store, entry []byte, op hostileFileOp) error {
	key := ""
	if op.Key != nil {
		key = *op.Key
	}
	read := func(v []byte, err error) error {
		switch {
		case err != nil:
			return fmt.Errorf("answered %v", err)
		case op.Expect == "miss" && v != nil:
			return fmt.Errorf("answered %d bytes, not a miss", len(v))
		case op.Expect == "hit" && !bytes.Equal(v, entry):
			return fmt.Errorf("answered %d bytes, not the entry this case wrote", len(v))
		case op.Expect != "miss" && op.Expect != "hit":
			return fmt.Errorf("a read expects %q", op.Expect)
		}
		return nil
	}
	write := func(added bool, err error) error {
		switch op.Expect {
		case "ok":
			if err != nil || !added {
				return fmt.Errorf("answered %v %v", added, err)
			}
		case "error":
			if err == nil {
				return errors.New("succeeded")
			}
			var se *stores.Error
			if !errors.As(err, &se) || se.Kind == stores.InvalidKey {
				return fmt.Errorf("answered %v, not the store's own error", err)
			}
		default:
			return fmt.Errorf("a write expects %q", op.Expect)
		}
		return nil
	}
	deleted := func(ok bool, err error) error {
		switch {
		case err != nil:
			return fmt.Errorf("answered %v", err)
		case op.Expect == "deleted" && !ok:
			return errors.New("deleted nothing")
		case op.Expect == "noop" && ok:
			return errors.New("deleted something")
		case op.Expect != "deleted" && op.Expect != "noop":
			return fmt.Errorf("a delete expects %q", op.Expect)
		}
		return nil
	}
	switch op.Op {
	case "get":
		return read(s.Get(ctx, key))
	case "get_many":
		vs, err := s.GetMulti(ctx, []string{key})
		if err == nil && len(vs) != 1 {
			return fmt.Errorf("answered %d values for one key", len(vs))
		}
		var v []byte
		if err == nil {
			v = vs[0]
		}
		return read(v, err)
	case "set":
		return write(true, s.Set(ctx, key, entry, 0))
	case "add":
		return write(s.Add(ctx, key, entry, 0))
	case "delete":
		return deleted(s.Delete(ctx, key))
	case "delete_if":
		return deleted(s.DeleteIf(ctx, key, entry))
	case "purge_prefix", "purge_tag":
		var err error
		if op.Op == "purge_prefix" {
			prefix := ""
			if op.Prefix != nil {
				prefix = *op.Prefix
			}
			_, err = s.PurgePrefix(ctx, prefix)
		} else {
			tag := ""
			if op.Tag != nil {
				tag = *op.Tag
			}
			_, err = s.PurgeTag(ctx, tag)
		}
		if op.Expect != "ok" {
			return fmt.Errorf("a purge expects %q", op.Expect)
		}
		if err != nil {
			return fmt.Errorf("answered %v", err)
		}
		return nil
	}
	return fmt.Errorf("unknown operation %q", op.Op)
}
