// SPDX-License-Identifier: Apache-2.0

// HTTP/3 over QUIC (quic-go) beside HTTPS over TCP, for tlsprof's tests: `go-quic server` serves both on one
// loopback port number (UDP and TCP), with a self-signed ECDSA P-256 certificate made at start, and prints
// "listening 127.0.0.1:PORT"; `go-quic client -addr A -n N [-resume]` makes N HTTP/3 connections, each with its
// own QUIC handshake and one request, and prints its counts as one JSON line: connections, resumed.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/quic-go/quic-go/http3"
)

func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
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

func serve() {
	cert, err := selfSigned()
	if err != nil {
		log.Fatal(err)
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	})
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	port := tcp.Addr().(*net.TCPAddr).Port
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	if err != nil {
		log.Fatal(err)
	}
	h3 := &http3.Server{Handler: handler, TLSConfig: http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{cert}})}
	h1 := &http.Server{Handler: handler, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	go func() { log.Fatal(h3.Serve(udp)) }()
	go func() { log.Fatal(h1.ServeTLS(tcp, "", "")) }()
	fmt.Printf("listening 127.0.0.1:%d\n", port)
	select {}
}

func client(args []string) {
	fs := flag.NewFlagSet("client", flag.ExitOnError)
	addr := fs.String("addr", "", "server address host:port")
	n := fs.Int("n", 10, "connections to make")
	resume := fs.Bool("resume", false, "offer the last session on each new connection")
	limit := fs.Duration("duration", 60*time.Second, "upper bound on the run")
	fs.Parse(args)
	// Test servers use throwaway self-signed certificates.
	cfg := &tls.Config{InsecureSkipVerify: true}
	if *resume {
		cfg.ClientSessionCache = tls.NewLRUClientSessionCache(16)
	}
	counts := struct {
		Connections int `json:"connections"`
		Resumed     int `json:"resumed"`
	}{}
	deadline := time.Now().Add(*limit)
	for i := 0; i < *n && time.Now().Before(deadline); i++ {
		// A transport per connection: each request makes its own QUIC handshake.
		tr := &http3.Transport{TLSClientConfig: cfg}
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://" + *addr + "/")
		if err != nil {
			log.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		counts.Connections++
		if resp.TLS != nil && resp.TLS.DidResume {
			counts.Resumed++
		}
		tr.Close()
	}
	json.NewEncoder(os.Stdout).Encode(counts)
}

func main() {
	if len(os.Args) < 2 {
		log.Fatal("usage: go-quic server | go-quic client -addr HOST:PORT -n N [-resume]")
	}
	switch os.Args[1] {
	case "server":
		serve()
	case "client":
		client(os.Args[2:])
	default:
		log.Fatalf("unknown command %q", os.Args[1])
	}
}
