// httpcount: the time to complete a fixed number of GET requests with a fixed number of keep-alive connections (the
// source document's measure: "time to complete N requests"). wrk runs for a duration instead, so it cannot say this.
//
//	go run httpcount.go -n 1000 -c 8 http://127.0.0.1:8080/page
//
// Prints "<seconds> <requests> <non-200 answers>".
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	n := flag.Int("n", 100, "requests in all")
	c := flag.Int("c", 8, "concurrent connections")
	flag.Parse()
	url := flag.Arg(0)
	transport := &http.Transport{MaxIdleConnsPerHost: *c, MaxConnsPerHost: *c, DisableCompression: true}
	client := &http.Client{Transport: transport, Timeout: 60 * time.Second}
	var next, bad int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < *c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for atomic.AddInt64(&next, 1) <= int64(*n) {
				resp, err := client.Get(url)
				if err != nil {
					atomic.AddInt64(&bad, 1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					atomic.AddInt64(&bad, 1)
				}
			}
		}()
	}
	wg.Wait()
	fmt.Printf("%.3f %d %d\n", time.Since(start).Seconds(), *n, bad)
	if bad > 0 {
		os.Exit(1)
	}
}
