package redisscripts

import (
	"os"
	"path/filepath"
	"testing"
)

// The module's copies are spec/redis's files byte for byte (run `go generate ./stores/redisscripts` after a
// change to spec/redis).
func TestCopiesEqualSpec(t *testing.T) {
	for name, copy := range map[string]string{"delete_if.lua": DeleteIf, "incr.lua": Incr, "tag.lua": Tag} {
		spec, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "spec", "redis", name))
		if err != nil {
			t.Fatal(err)
		}
		if string(spec) != copy {
			t.Errorf("%s differs from spec/redis/%s: run go generate ./stores/redisscripts", name, name)
		}
	}
}
