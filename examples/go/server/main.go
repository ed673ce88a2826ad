// SPDX-License-Identifier: Apache-2.0

// An HTTPS server for tlsprof's tests and demo. Its certificate is made at start (self-signed, key type
// chosen by -key). With -recurse N, every handshake picks its certificate and every request of /recurse
// computes its answer through N nested calls with large frames: the goroutine's stack grows (and moves)
// in the middle of the handshake and of the request, which a return probe on Go code would not survive.
package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"tlsprof.example/go/internal/stack"
)

func newKey(kind string) (crypto.Signer, error) {
	switch kind {
	case "rsa":
		return rsa.GenerateKey(rand.Reader, 2048)
	case "ecdsa":
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ed25519":
		_, k, err := ed25519.GenerateKey(rand.Reader)
		return k, err
	}
	return nil, fmt.Errorf("unknown key type %q (rsa, ecdsa, ed25519)", kind)
}

// threadCPU is this thread's CPU time (CLOCK_THREAD_CPUTIME_ID).
func threadCPU() time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		log.Fatal(errno)
	}
	return time.Duration(ts.Nano())
}

// clockedSigner alternates, one handshake in two, between the key's crypto.Signer (what tlsprof's sign
// stage probes) and the same signature through the package function beneath it (not probed), which it
// times on the goroutine's thread, locked to it for the call: the server's own, probe-free account of what
// its signatures cost in the same run, served at /sign-clock for tests to compare with tlsprof's figure.
type clockedSigner struct {
	crypto.Signer
	calls, signerCalls, clockedNs atomic.Int64
}

func (c *clockedSigner) Sign(r io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	if c.calls.Add(1)%2 == 1 {
		c.signerCalls.Add(1)
		return c.Signer.Sign(r, digest, opts)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := threadCPU()
	defer func() { c.clockedNs.Add(int64(threadCPU() - start)) }()
	switch k := c.Signer.(type) {
	case *ecdsa.PrivateKey:
		return ecdsa.SignASN1(r, k, digest)
	case *rsa.PrivateKey:
		if pss, ok := opts.(*rsa.PSSOptions); ok {
			return rsa.SignPSS(r, k, pss.Hash, digest, pss)
		}
		return rsa.SignPKCS1v15(r, k, opts.HashFunc(), digest)
	}
	return c.Signer.Sign(r, digest, opts)
}

func selfSigned(key crypto.Signer) (tls.Certificate, error) {
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	keyType := flag.String("key", "ecdsa", "certificate key: rsa, ecdsa or ed25519")
	recurse := flag.Int("recurse", 0, "nested calls with 512-byte frames in GetCertificate and /recurse")
	noTickets := flag.Bool("no-tickets", false, "disable session tickets (every handshake is full)")
	maxVersion := flag.String("max-version", "1.3", "highest TLS version: 1.2 or 1.3")
	signClock := flag.Bool("sign-clock", false, "time every other handshake signature (served at /sign-clock)")
	park := flag.Duration("park", 0, "sleep this long in GetCertificate: the handshake's goroutine parks")
	burn := flag.Bool("burn", false, "spin a goroutine on the CPU, to run while handshakes are parked")
	flag.Parse()

	key, err := newKey(*keyType)
	if err != nil {
		log.Fatal(err)
	}
	cert, err := selfSigned(key)
	if err != nil {
		log.Fatal(err)
	}
	clocked := &clockedSigner{Signer: key}
	if *signClock {
		cert.PrivateKey = clocked
	}
	cfg := &tls.Config{
		SessionTicketsDisabled: *noTickets,
		MaxVersion:             tls.VersionTLS13,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			time.Sleep(*park)
			if *recurse > 0 && stack.Deep(*recurse, 1) == 0 {
				return nil, fmt.Errorf("unreachable")
			}
			return &cert, nil
		},
	}
	if *maxVersion == "1.2" {
		cfg.MaxVersion = tls.VersionTLS12
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	// /recurse?n=N&seed=S answers stack.Deep(N, S), which the client checks against its own computation.
	mux.HandleFunc("/recurse", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		seed, _ := strconv.Atoi(r.URL.Query().Get("seed"))
		if n < 0 || n > 100000 {
			http.Error(w, "n out of range", http.StatusBadRequest)
			return
		}
		fmt.Fprintln(w, stack.Deep(n, byte(seed)))
	})
	mux.HandleFunc("/sign-clock", func(w http.ResponseWriter, r *http.Request) {
		all, signer := clocked.calls.Load(), clocked.signerCalls.Load()
		fmt.Fprintf(w, "{\"signer_calls\": %d, \"clocked\": %d, \"clocked_ns\": %d}\n", signer, all-signer, clocked.clockedNs.Load())
	})
	if *burn {
		go func() {
			for x := uint64(1); ; x = x*6364136223846793005 + 1 {
				// Yields now and then, as a busy request handler would; async preemption does the rest.
				if x%4096 == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	// The first line tells the tests where to connect.
	fmt.Printf("listening %s\n", ln.Addr())
	os.Stdout.Sync()
	srv := &http.Server{Handler: mux, TLSConfig: cfg, ErrorLog: log.New(os.Stderr, "", 0)}
	log.Fatal(srv.ServeTLS(ln, "", ""))
}
