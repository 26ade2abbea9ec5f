// The suite runs every case of every vector file through the same code as the conformance runner: the hostile_*
// files too, hostile_keys.json against the suite's own memcached and redis-server and hostile_replies.json with
// larder-hostile (testservers), unless the environment names others.
package conformance

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/larder-cache/larder/clients/go/internal/testenv"
	"github.com/larder-cache/larder/clients/go/internal/testservers"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testservers.StopAll()
	os.Exit(code)
}

// hostileEnv sets what hostile_keys.json, hostile_replies.json and outage.json take from the environment (README
// "hostile_*.json" and "outage.json"), from the servers the suite starts, unless it is set already.
func hostileEnv(t *testing.T) {
	if os.Getenv("LARDER_CONFORMANCE_MEMCACHED") == "" {
		t.Setenv("LARDER_CONFORMANCE_MEMCACHED", testservers.Memcached(t, "conformance"))
	}
	if os.Getenv("LARDER_CONFORMANCE_REDIS") == "" {
		u := testservers.Redis(t, "conformance") // redis://127.0.0.1:PORT/0
		t.Setenv("LARDER_CONFORMANCE_REDIS", strings.TrimSuffix(strings.TrimPrefix(u, "redis://"), "/0"))
	}
	t.Setenv("LARDER_HOSTILE", testenv.HostileBin(t))
	t.Setenv("LARDER_FAULTS", testenv.FaultsBin(t))
}

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
	hostileEnv(t)
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

// The hostile files are judged by the command too, as the matrix runs it (hostile_keys.json and
// hostile_pages.json; TestEveryVectorFile runs all four, and outage.json): with its servers in the environment,
// one line each; without them (outage.json too), a failure that names the variable, never a pass.
func TestHostileFilesThroughTheCommand(t *testing.T) {
	hostileEnv(t)
	bin := filepath.Join(t.TempDir(), "larder-conformance")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/larder-conformance").CombinedOutput(); err != nil {
		t.Fatalf("build: %v %s", err, out)
	}
	dir := vectorsDir(t)
	keys, pages, replies := filepath.Join(dir, "hostile_keys.json"), filepath.Join(dir, "hostile_pages.json"), filepath.Join(dir, "hostile_replies.json")
	out, err := exec.Command(bin, keys, pages).Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], `{"language":"go","file":"hostile_keys.json","status":"pass"`) ||
		!strings.HasPrefix(lines[1], `{"language":"go","file":"hostile_pages.json","status":"pass"`) {
		t.Fatalf("output: %s", out)
	}
	cmd := exec.Command(bin, keys, replies, filepath.Join(dir, "outage.json"))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err = cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"LARDER_CONFORMANCE_MEMCACHED", "LARDER_HOSTILE", "LARDER_FAULTS"} {
		if !strings.Contains(string(out), `"status":"fail","cases":0,"failed":[],"reason":"`+v+" is not set") {
			t.Errorf("without %s: %s", v, out)
		}
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
