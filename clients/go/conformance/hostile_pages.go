// hostile_pages.json (spec/HTTP.md §2): which site a page written by an app is for. Each request is sent as the
// bytes of its request line and header lines to a real net/http server over a connection whose peer is the
// case's address (and TLS when its scheme is https), and served by pages.Cache's Middleware over a memory store:
// the key is the one the page cache wrote the page under, and a request it did not store counts only when the
// page cache said why ("host"), or when net/http refused the request before any handler saw it.
package conformance

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/larder-cache/larder/clients/go/pages"
	"github.com/larder-cache/larder/clients/go/stores"
)

type hostilePageCase struct {
	Name    string `json:"name"`
	Options struct {
		Site           *string  `json:"site"`
		TrustedProxies []string `json:"trusted_proxies"`
		Scheme         *string  `json:"scheme"`
	} `json:"options"`
	Request struct {
		Peer    string      `json:"peer"`
		Scheme  string      `json:"scheme"`
		Target  string      `json:"target"`
		Headers [][2]string `json:"headers"`
	} `json:"request"`
	Expected struct {
		Key       *string `json:"key"`
		NotStored *string `json:"not_stored"`
	} `json:"expected"`
}

func hostilePagesCases(_ string, data []byte) ([]Case, error) {
	var doc struct {
		Cases []hostilePageCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Cases == nil {
		return nil, errors.New("no cases")
	}
	var out []Case
	for _, c := range doc.Cases {
		if c.Name == "" || (c.Expected.Key == nil) == (c.Expected.NotStored == nil) {
			return nil, fmt.Errorf("case %q expects neither or both of key and not_stored", c.Name)
		}
		out = append(out, Case{c.Name, func() error { return checkPage(c) }})
	}
	return out, nil
}

// recordingStore is the memory store, noting the keys written.
type recordingStore struct {
	stores.Store
	mu   sync.Mutex
	keys []string
}

func (s *recordingStore) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	s.mu.Lock()
	s.keys = append(s.keys, key)
	s.mu.Unlock()
	return s.Store.Set(ctx, key, value, ttl)
}

func (s *recordingStore) written() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string{}, s.keys...)
}

func checkPage(c hostilePageCase) error {
	mem, err := stores.Open(context.Background(), "memory://")
	if err != nil {
		return err
	}
	store := &recordingStore{Store: mem}
	pc := pages.New(store)
	if c.Options.Site != nil {
		pc.Site = *c.Options.Site
	}
	if c.Options.Scheme != nil {
		pc.Scheme = *c.Options.Scheme
	}
	if pc.TrustedProxies, err = pages.ParseTrustedProxies(c.Options.TrustedProxies...); err != nil {
		return err
	}
	if err := pc.Validate(); err != nil {
		return fmt.Errorf("the options: %v", err)
	}
	peer, err := peerAddr(c.Request.Peer)
	if err != nil {
		return err
	}
	var ran atomic.Bool
	done := make(chan struct{})
	app := pc.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=60")
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("a page"))
	}))
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran.Store(true)
		defer close(done)
		app.ServeHTTP(w, r)
	})
	status, err := serveOne(handler, peer, strings.EqualFold(c.Request.Scheme, "https"), requestBytes(c))
	if err != nil {
		return err
	}
	if ran.Load() {
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			return errors.New("the handler did not finish within 5 s")
		}
	}
	written := store.written()
	if c.Expected.Key != nil {
		if len(written) != 1 || written[0] != *c.Expected.Key {
			return fmt.Errorf("expected the page under %q; written under %q (status %d, not stored %v)", *c.Expected.Key, written, status, pc.Stats().NotStored)
		}
		if v, err := store.Get(context.Background(), *c.Expected.Key); v == nil || err != nil {
			return fmt.Errorf("the page is not under %q: %v", *c.Expected.Key, err)
		}
		return nil
	}
	if len(written) != 0 {
		return fmt.Errorf("expected nothing stored (%s); written under %q", *c.Expected.NotStored, written)
	}
	if !ran.Load() {
		if status < 400 || status > 499 {
			return fmt.Errorf("the handler never ran, and net/http answered %d", status)
		}
		return nil // net/http refused the request (400): no page cache saw it
	}
	if n := pc.Stats().NotStored[*c.Expected.NotStored]; n != 1 {
		return fmt.Errorf("not stored, but for %v, not %q", pc.Stats().NotStored, *c.Expected.NotStored)
	}
	return nil
}

func peerAddr(peer string) (net.Addr, error) {
	if ap, err := netip.ParseAddrPort(peer); err == nil {
		return net.TCPAddrFromAddrPort(ap), nil
	}
	a, err := netip.ParseAddr(strings.Trim(peer, "[]"))
	if err != nil {
		return nil, fmt.Errorf("peer %q is not an address", peer)
	}
	return net.TCPAddrFromAddrPort(netip.AddrPortFrom(a, 40000)), nil
}

// requestBytes is the request as the case sends it: the request line and the header lines, in order.
func requestBytes(c hostilePageCase) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\n", c.Request.Target)
	for _, h := range c.Request.Headers {
		fmt.Fprintf(&b, "%s: %s\r\n", h[0], h[1])
	}
	b.WriteString("\r\n")
	return []byte(b.String())
}

// peerConn is one end of a pipe that says it is connected to peer.
type peerConn struct {
	net.Conn
	peer net.Addr
}

func (c peerConn) RemoteAddr() net.Addr { return c.peer }

// oneConnListener hands out one connection, then waits until closed.
type oneConnListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *oneConnListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80}
}

// serveOne serves one request of raw bytes from peer (over TLS when tlsOn) and answers the response's status.
func serveOne(h http.Handler, peer net.Addr, tlsOn bool, request []byte) (int, error) {
	client, server := net.Pipe()
	var conn net.Conn = peerConn{server, peer}
	var clientConn net.Conn = client
	if tlsOn {
		cert, err := selfSigned()
		if err != nil {
			return 0, err
		}
		conn = tls.Server(conn, &tls.Config{Certificates: []tls.Certificate{cert}})
		clientConn = tls.Client(client, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a test's own certificate
	}
	l := &oneConnListener{conns: make(chan net.Conn, 1), closed: make(chan struct{})}
	l.conns <- conn
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	defer clientConn.Close()
	_ = clientConn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := clientConn.Write(request); err != nil {
		return 0, fmt.Errorf("sending the request: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(clientConn), nil)
	if err != nil {
		return 0, fmt.Errorf("reading the response: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

var (
	certOnce sync.Once
	cert     tls.Certificate
	certErr  error
)

// selfSigned is a throwaway certificate for the https cases (made once).
func selfSigned() (tls.Certificate, error) {
	certOnce.Do(func() {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			certErr = err
			return
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "larder-conformance"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			certErr = err
			return
		}
		cert = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	})
	return cert, certErr
}
