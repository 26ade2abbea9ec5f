// The net/http middleware: func(http.Handler) http.Handler that passes every response through to the client
// and, for GET requests, keeps a copy (bounded by MaxBody) that Save stores once the handler returns; a GET from
// an untrusted peer reaches the handler without the forwarding fields that name a site (site.go).
package pages

import (
	"bytes"
	"net/http"
	"time"
)

// Middleware wraps next: each GET response the front's rules allow is written into the store, under the site
// spec/HTTP.md §2 derives (none: not stored). A GET from a peer that is not in TrustedProxies reaches next
// without the forwarding fields that name a site (X-Forwarded-Host, X-Forwarded-Proto, Forwarded…), so the page
// the handler renders is for the site it is keyed on. Call Validate when the app starts.
func (c *Cache) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			next.ServeHTTP(w, r)
			return
		}
		r = c.withoutUntrustedForwarding(r)
		start := time.Now().UnixMilli()
		rec := &recorder{ResponseWriter: w, limit: c.maxBody()}
		next.ServeHTTP(rec, r)
		if !rec.wrote {
			rec.WriteHeader(http.StatusOK)
		}
		if rec.over {
			c.count(false, "too-large", false)
			return
		}
		_, _ = c.Save(r.Context(), r, rec.status, rec.header, rec.body.Bytes(), start)
	})
}

func (c *Cache) maxBody() int {
	if c.MaxBody == 0 {
		return DefaultMaxBody
	}
	return c.MaxBody
}

// recorder passes a response through and keeps its status, its headers as sent, and up to limit body bytes.
type recorder struct {
	http.ResponseWriter
	status int
	header http.Header
	body   bytes.Buffer
	limit  int
	wrote  bool
	over   bool
}

func (r *recorder) WriteHeader(status int) {
	if r.wrote {
		return
	}
	r.wrote, r.status = true, status
	r.header = r.ResponseWriter.Header().Clone()
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(p []byte) (int, error) {
	if !r.wrote {
		h := r.ResponseWriter.Header()
		if h.Get("Content-Type") == "" {
			h.Set("Content-Type", http.DetectContentType(p))
		}
		r.WriteHeader(http.StatusOK)
	}
	if !r.over {
		if r.body.Len()+len(p) > r.limit {
			r.over = true
			r.body = bytes.Buffer{}
		} else {
			r.body.Write(p)
		}
	}
	return r.ResponseWriter.Write(p)
}

// Flush passes through to a writer that can flush.
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
