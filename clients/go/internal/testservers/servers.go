// Package testservers starts the real servers the store tests run against — memcached, redis-server (and a
// three-node Redis Cluster), PostgreSQL, larder-hostile — on free loopback ports, each once per test process
// and only when a test asks, mirroring clients/python/tests/servers.py. Call StopAll from TestMain. Servers get
// SIGKILL if the test process dies (Pdeathsig), so none outlives a crashed run.
package testservers

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/larder-cache/larder/clients/go/internal/faultsproc"
	"github.com/larder-cache/larder/clients/go/internal/hostileproc"
	"github.com/larder-cache/larder/clients/go/internal/testenv"
)

var (
	mu      sync.Mutex
	started []*exec.Cmd
	dirs    []string
	cache   = map[string]string{}
)

// StopAll stops every server this process started.
func StopAll() {
	mu.Lock()
	defer mu.Unlock()
	for _, c := range started {
		if c.Process != nil {
			_ = c.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = c.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				_ = c.Process.Kill()
			}
		}
	}
	for _, d := range dirs {
		os.RemoveAll(d)
	}
	started, dirs = nil, nil
}

// FreePort is a free loopback port below `below`.
func FreePort(below int) int {
	for range 1000 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			continue
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port < below {
			return port
		}
	}
	panic("no free port")
}

func freeBusPort() int {
	for range 100 {
		p := FreePort(55000)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+10000))
		if err != nil {
			continue
		}
		l.Close()
		return p
	}
	panic("no free port pair")
}

func find(t testing.TB, name string, dirs ...string) string {
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed (make services installs it): %v", name, err)
	}
	return p
}

func start(t testing.TB, what string, cmd *exec.Cmd, port int) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", what, err)
	}
	started = append(started, cmd)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s did not listen on %d within 20 s", what, port)
}

func tempDir(t testing.TB, prefix string) string {
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	dirs = append(dirs, d)
	return d
}

// Memcached returns the address of a memcached started for this process (name tells several apart).
func Memcached(t testing.TB, name string) string {
	mu.Lock()
	defer mu.Unlock()
	if a, ok := cache["memcached/"+name]; ok {
		return a
	}
	a, _ := startMemcached(t)
	cache["memcached/"+name] = a
	return a
}

// KillableMemcached starts a memcached of the calling test's own and returns its address and a function that
// kills it (SIGKILL, as a crash), for tests of a server dying mid-run.
func KillableMemcached(t testing.TB) (string, func()) {
	mu.Lock()
	defer mu.Unlock()
	a, cmd := startMemcached(t)
	var once sync.Once
	return a, func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
}

// startMemcached runs one memcached on a free loopback port; the caller holds mu.
func startMemcached(t testing.TB) (string, *exec.Cmd) {
	port := FreePort(65536)
	args := []string{"-l", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "0", "-m", "64", "-t", "2"}
	if os.Geteuid() == 0 {
		args = append(args, "-u", "root")
	}
	cmd := exec.Command(find(t, "memcached"), args...)
	start(t, "memcached", cmd, port)
	return fmt.Sprintf("127.0.0.1:%d", port), cmd
}

func redis(t testing.TB, cluster bool) int {
	port := FreePort(65536)
	if cluster {
		port = freeBusPort()
	}
	dir := tempDir(t, "larder-go-redis-")
	args := []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no",
		"--daemonize", "no", "--protected-mode", "no", "--loglevel", "warning"}
	if cluster {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", fmt.Sprintf("nodes-%d.conf", port),
			"--cluster-node-timeout", "2000")
	}
	cmd := exec.Command(find(t, "redis-server"), args...)
	cmd.Dir = dir
	start(t, "redis-server", cmd, port)
	return port
}

// Redis returns redis://127.0.0.1:port/0 of a redis-server started for this process.
func Redis(t testing.TB, name string) string {
	mu.Lock()
	defer mu.Unlock()
	if a, ok := cache["redis/"+name]; ok {
		return a
	}
	u := fmt.Sprintf("redis://127.0.0.1:%d/0", redis(t, false))
	cache["redis/"+name] = u
	return u
}

// RedisCluster returns redis+cluster://… of a three-master cluster started for this process.
func RedisCluster(t testing.TB) string {
	mu.Lock()
	defer mu.Unlock()
	if a, ok := cache["redis-cluster"]; ok {
		return a
	}
	var addrs []string
	var ports []int
	for range 3 {
		p := redis(t, true)
		ports = append(ports, p)
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", p))
	}
	cli := find(t, "redis-cli")
	args := append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(ports[0]), "--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v: %s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, p := range ports {
		for {
			out, _ := exec.Command(cli, "-h", "127.0.0.1", "-p", strconv.Itoa(p), "cluster", "info").Output()
			if strings.Contains(string(out), "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redis cluster not ok within 20 s")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	u := "redis+cluster://" + strings.Join(addrs, ",")
	cache["redis-cluster"] = u
	return u
}

var pgBinDirs = []string{"/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin"}

func asPostgres(t testing.TB, binary string, args ...string) *exec.Cmd {
	if os.Geteuid() == 0 {
		return exec.Command(find(t, "runuser"), append([]string{"-u", "postgres", "--", binary}, args...)...)
	}
	return exec.Command(binary, args...)
}

// Postgres returns postgres://larder@127.0.0.1:port/postgres of a PostgreSQL started for this process.
func Postgres(t testing.TB) string {
	mu.Lock()
	defer mu.Unlock()
	if a, ok := cache["postgres"]; ok {
		return a
	}
	dir := tempDir(t, "larder-go-pg-")
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			t.Fatalf("running as root needs the postgres user (the postgresql package creates it): %v", err)
		}
		if out, err := exec.Command("chown", "-R", "postgres:postgres", dir).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v %s", err, out)
		}
	}
	initdb := asPostgres(t, find(t, "initdb", pgBinDirs...), "-D", data, "-A", "trust", "-U", "larder", "--no-sync",
		"-E", "UTF8", "--locale=C")
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v: %s", err, out)
	}
	port := FreePort(65536)
	cmd := asPostgres(t, find(t, "postgres", pgBinDirs...), "-D", data, "-p", strconv.Itoa(port), "-k", data,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=200")
	start(t, "postgres", cmd, port)
	ready := find(t, "pg_isready", pgBinDirs...)
	deadline := time.Now().Add(30 * time.Second)
	for exec.Command(ready, "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "larder").Run() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("postgres did not accept connections within 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	u := fmt.Sprintf("postgres://larder@127.0.0.1:%d/postgres", port)
	cache["postgres"] = u
	return u
}

// Hostile starts larder-hostile (protocol memcached or redis, a behaviour) and returns its address and a stop
// function; it exits when its standard input closes.
func Hostile(t testing.TB, protocol, behaviour string, args ...string) (string, func()) {
	addr, stop, err := hostileproc.Start(testenv.HostileBin(t), append([]string{protocol, behaviour}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return addr, stop
}

// Faults starts larder-faults in front of upstream (a real server's HOST:PORT); it stops with the test.
func Faults(t testing.TB, upstream string) *faultsproc.Proxy {
	p, err := faultsproc.Start(testenv.FaultsBin(t), upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}
