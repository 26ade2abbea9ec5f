// The suite runs every case of every vector file through the same code as the conformance runner.
package conformance

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func vectorsDir(t testing.TB) string {
	dir, err := filepath.Abs("../../../spec/vectors")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestEveryVectorFile(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(vectorsDir(t), "*.json"))
	if err != nil || len(files) < 7 {
		t.Fatalf("vector files: %v %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			cases, err := Cases(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cases {
				if err := run(c); err != nil {
					t.Errorf("%s: %v", c.Name, err)
				}
			}
		})
	}
}

func TestRunnerContract(t *testing.T) {
	dir := t.TempDir()
	unknown := filepath.Join(dir, "unknown.json")
	if err := os.WriteFile(unknown, []byte(`{"schema":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := Judge(unknown)
	if r.Status != "fail" || r.Reason == nil || !strings.Contains(*r.Reason, "not a vector file") {
		t.Fatalf("unknown file: %+v", r)
	}
	missing := Judge(filepath.Join(dir, "entries.json"))
	if missing.Status != "fail" {
		t.Fatalf("unreadable file: %+v", missing)
	}
	// A wrong case fails by name, and the report says why.
	data, _ := os.ReadFile(filepath.Join(vectorsDir(t), "keys.json"))
	bad := strings.Replace(string(data), `"key": "GET:https://example.com/"`, `"key": "GET:https://wrong/"`, 1)
	wrong := filepath.Join(dir, "keys.json")
	if err := os.WriteFile(wrong, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	r = Judge(wrong)
	if r.Status != "fail" || len(r.Failed) != 1 || r.Failed[0] != "http/basic" {
		t.Fatalf("wrong case: %+v", r)
	}
	if !strings.HasPrefix(r.Line(), `{"language":"go","file":"keys.json","status":"fail"`) {
		t.Fatalf("line: %s", r.Line())
	}
}

func TestRunnerCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	out, err := exec.Command("go", "run", "../cmd/larder-conformance", filepath.Join(vectorsDir(t), "ring.json")).Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(out)) != `{"language":"go","file":"ring.json","status":"pass","cases":6,"failed":[],"reason":null}` {
		t.Fatalf("output: %s", out)
	}
}
