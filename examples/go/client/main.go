// SPDX-License-Identifier: Apache-2.0

// An HTTPS client for tlsprof's tests: -n connections (or as many as fit in -duration), each a new TCP
// connection with its own handshake and one request, from -workers goroutines. With -resume it offers
// the session of an earlier connection (a shared ClientSessionCache). It prints one JSON line of what it
// saw: connections, resumed handshakes and errors, which tests compare with tlsprof's counts. With
// -recurse N it asks /recurse and checks each answer. With -hold it waits to be told to start, and to exit.
package main

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"tlsprof.example/go/internal/stack"
)

type result struct {
	Connections int64  `json:"connections"`
	Resumed     int64  `json:"resumed"`
	Errors      int64  `json:"errors"`
	WrongAnswer int64  `json:"wrong_answers"`
	FirstError  string `json:"first_error,omitempty"`
}

func main() {
	addr := flag.String("addr", "", "server address host:port")
	n := flag.Int64("n", 0, "connections to make (0: until -duration)")
	duration := flag.Duration("duration", 10*time.Second, "upper bound on the run")
	workers := flag.Int("workers", 4, "concurrent connections")
	resume := flag.Bool("resume", false, "resume sessions (shared client session cache)")
	recurse := flag.Int("recurse", 0, "ask /recurse?n=N and check the answer")
	version := flag.String("version", "1.3", "TLS version: 1.2 or 1.3")
	fetch := flag.String("fetch", "", "print the body of this path instead, over one connection")
	hold := flag.Bool("hold", false, "wait for a line on stdin before the first connection, and for stdin to close before exiting (a profiler attaches and reads meanwhile)")
	flag.Parse()
	if *addr == "" {
		fmt.Fprintln(os.Stderr, "client: -addr is required")
		os.Exit(2)
	}
	cfg := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13, MaxVersion: tls.VersionTLS13}
	if *version == "1.2" {
		cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
	}
	if *resume {
		cfg.ClientSessionCache = tls.NewLRUClientSessionCache(64)
	}
	if *fetch != "" {
		tr := &http.Transport{TLSClientConfig: cfg}
		resp, err := (&http.Client{Transport: tr}).Get("https://" + *addr + *fetch)
		if err != nil {
			fmt.Fprintln(os.Stderr, "client:", err)
			os.Exit(1)
		}
		io.Copy(os.Stdout, resp.Body)
		resp.Body.Close()
		return
	}
	var res result
	var firstErr sync.Once
	fail := func(err error) {
		atomic.AddInt64(&res.Errors, 1)
		firstErr.Do(func() { res.FirstError = err.Error() })
	}
	stdin := bufio.NewReader(os.Stdin)
	if *hold {
		fmt.Println("ready")
		if _, err := stdin.ReadString('\n'); err != nil {
			fmt.Fprintln(os.Stderr, "client: stdin closed before the start line")
			os.Exit(2)
		}
	}
	deadline := time.Now().Add(*duration)
	var started int64
	var wg sync.WaitGroup
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for time.Now().Before(deadline) {
				i := atomic.AddInt64(&started, 1)
				if *n > 0 && i > *n {
					return
				}
				one(*addr, cfg, *recurse, byte(i), &res, fail)
			}
		}(w)
	}
	wg.Wait()
	out, _ := json.Marshal(&res)
	fmt.Println(string(out))
	if *hold {
		io.Copy(io.Discard, stdin)
	}
}

// one makes one connection: handshake, one request, close.
func one(addr string, cfg *tls.Config, recurse int, seed byte, res *result, fail func(error)) {
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		fail(err)
		return
	}
	defer conn.Close()
	atomic.AddInt64(&res.Connections, 1)
	if conn.ConnectionState().DidResume {
		atomic.AddInt64(&res.Resumed, 1)
	}
	path := "/"
	if recurse > 0 {
		path = fmt.Sprintf("/recurse?n=%d&seed=%d", recurse, seed)
	}
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", path); err != nil {
		fail(err)
		return
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		fail(err)
		return
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		fail(err)
		return
	}
	want := "ok"
	if recurse > 0 {
		want = fmt.Sprint(stack.Deep(recurse, seed))
	}
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != want {
		atomic.AddInt64(&res.WrongAnswer, 1)
	}
}
