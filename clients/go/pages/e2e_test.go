// A Go net/http app behind `larder serve --store redis://…`: pages the middleware writes are served by the Rust
// front without reaching Go (the app counts its renders), a tag purge from Go makes it render again, and Python's
// PageCache finds the page Go wrote. A front whose upstream is dead proves the keys: it can only serve what Go
// put under exactly its key.
package pages_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/larder-cache/larder/clients/go/internal/testenv"
	"github.com/larder-cache/larder/clients/go/internal/testservers"
	"github.com/larder-cache/larder/clients/go/pages"
	"github.com/larder-cache/larder/clients/go/stores"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testservers.StopAll()
	os.Exit(code)
}

// front starts `larder serve` in front of upstream and returns its address.
func front(t *testing.T, upstream, storeURL string, extra ...string) string {
	port, admin := testservers.FreePort(65536), testservers.FreePort(65536)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	log, _ := os.Create(filepath.Join(t.TempDir(), "larder.log"))
	cmd := exec.Command(testenv.LarderBin(t), "serve", "--upstream", upstream, "--listen", addr,
		"--admin", fmt.Sprintf("127.0.0.1:%d", admin), "--admin-no-token", "--store", storeURL)
	cmd.Args = append(cmd.Args, extra...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "LARDER_") {
			env = append(env, e)
		}
	}
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		out, _ := os.ReadFile(log.Name())
		if strings.Contains(string(out), "panicked") {
			t.Errorf("larder panicked: %s", out)
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return addr
		}
		time.Sleep(20 * time.Millisecond)
	}
	out, _ := os.ReadFile(log.Name())
	t.Fatalf("larder serve did not listen: %s", out)
	return ""
}

func get(t *testing.T, url string, header ...string) (int, string) {
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func app(renders *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := renders.Add(1)
		pages.FrontHeaders(w.Header(), time.Minute, "article:7", "articles")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		if r.URL.Path == "/varies" {
			w.Header().Set("Vary", "Accept-Language")
			fmt.Fprintf(w, "<p>%s</p>", r.Header.Get("Accept-Language"))
			return
		}
		fmt.Fprintf(w, "<h1>article 7</h1><p>render %d</p>", n)
	})
}

func TestAGoAppBehindTheRustFront(t *testing.T) {
	storeURL := testservers.Redis(t, "pages")
	store, err := stores.Open(context.Background(), storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	pc := pages.New(store)
	var renders atomic.Int32
	upstream := httptest.NewServer(pc.Middleware(app(&renders)))
	defer upstream.Close()
	addr := front(t, upstream.URL, storeURL)

	status, first := get(t, "http://"+addr+"/article/7?b=2&a=1&utm_source=news")
	if status != 200 || !strings.Contains(first, "render 1") {
		t.Fatalf("first request: %d %q", status, first)
	}
	for range 5 {
		if status, body := get(t, "http://"+addr+"/article/7?a=1&b=2"); status != 200 || body != first {
			t.Fatalf("later request: %d %q", status, body)
		}
	}
	if renders.Load() != 1 {
		t.Fatalf("the app rendered %d times; later requests must not reach it", renders.Load())
	}
	if pc.Stats().Stored != 1 {
		t.Fatalf("stats %+v", pc.Stats())
	}
	// A tag purge from Go: the next request reaches the app again.
	if _, err := pc.PurgeTag(context.Background(), "article:7"); err != nil {
		t.Fatal(err)
	}
	if _, body := get(t, "http://"+addr+"/article/7?a=1&b=2"); !strings.Contains(body, "render 2") || renders.Load() != 2 {
		t.Fatalf("after the purge: %q, %d renders", body, renders.Load())
	}
}

func TestTheFrontServesWhatGoWroteUnderItsKey(t *testing.T) {
	storeURL := testservers.Redis(t, "pages")
	store, _ := stores.Open(context.Background(), storeURL)
	defer store.Close()
	pc := pages.New(store)
	pc.Namespace = "dead"
	dead := fmt.Sprintf("http://127.0.0.1:%d", testservers.FreePort(65536))
	addr := front(t, dead, storeURL, "--namespace", "dead")
	var renders atomic.Int32
	handler := pc.Middleware(app(&renders))
	render := func(target string, header ...string) string {
		req := httptest.NewRequest("GET", target, nil)
		req.Host = addr // as the front sends it upstream: the Host clients gave it
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		return rec.Body.String()
	}
	body := render("/article/9?z=1&a=2&gclid=x")
	if status, served := get(t, "http://"+addr+"/article/9?a=2&z=1"); status != 200 || served != body {
		t.Fatalf("the front did not serve Go's page: %d %q", status, served)
	}
	fr := render("/varies", "Accept-Language", "fr")
	de := render("/varies", "Accept-Language", "de")
	if _, served := get(t, "http://"+addr+"/varies", "Accept-Language", "fr"); served != fr {
		t.Fatalf("variant fr: %q", served)
	}
	if _, served := get(t, "http://"+addr+"/varies", "Accept-Language", "de"); served != de {
		t.Fatalf("variant de: %q", served)
	}
	// Python's PageCache finds the page Go wrote.
	py := filepath.Join(testenv.RepoRoot(), ".venv", "bin", "python")
	if p := os.Getenv("LARDER_PYTHON"); p != "" {
		py = p
	}
	script := `
import sys
from larder.pages import PageCache, PageRequest
pc = PageCache(sys.argv[1], namespace="dead")
found = pc.find(PageRequest("GET", "http", sys.argv[2], "/article/9?a=2&z=1"))
sys.stdout.write(found[1].value.body.decode())
`
	// Its stdout only: a warning on stderr is the interpreter's business, not part of the page.
	var stderr strings.Builder
	python := exec.Command(py, "-c", script, storeURL, addr)
	python.Stderr = &stderr
	out, err := python.Output()
	if err != nil || string(out) != body {
		t.Fatalf("Python reads Go's page: %v %q %s", err, out, stderr.String())
	}
	// Purged from Go: the dead front has nothing left to serve.
	if _, err := pc.PurgeTag(context.Background(), "articles"); err != nil {
		t.Fatal(err)
	}
	if status, _ := get(t, "http://"+addr+"/article/9?a=2&z=1"); status < 500 {
		t.Fatalf("a purged page was served: %d", status)
	}
}
