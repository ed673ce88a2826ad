// SPDX-License-Identifier: Apache-2.0

// Ground-truth fixture for Go's crypto/tls, as tests/fixtures/crypto_ops.c is for OpenSSL:
// `ops [--derive x25519|p256] [--sign rsa2048|p256] [--no-twin] [--op-log PATH] N_DERIVE M_SIGN` makes exactly
// N key exchanges and M signatures as a TLS 1.3 server's handshake makes them: a fresh key share completed
// against the client's (`(*ecdh.PrivateKey).ECDH`), the certificate key's crypto.Signer signing a
// CertificateVerify digest (RSA-PSS or ECDSA with SHA-256), interleaved one by one. Each call is timed on its
// thread's CPU clock. An unprobed twin (this program again, started before any profiler attaches: probes
// attached by PID never reach it) makes the same operations in turn with it, one step each through two pipes:
// its clock, read in the same milliseconds as the probed calls, is the ground truth. It prints "ready", waits
// for a line on stdin, runs, and prints the JSON line of examples/rust/twin-clock. `--op-log PATH` writes each
// operation's kind (its initial), start (ns since the Unix epoch) and thread CPU (µs), the twin's to PATH.twin.
package main

import (
	"bufio"
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/big"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// The twin is this program with this variable set, its pipes at descriptors 3 (its turns) and 4 (its answers).
const twinEnv = "TLSPROF_GO_OPS_TWIN"

const (
	derive = iota
	sign
)

var kinds = [2]string{"derive", "sign"}

func fail(what string) {
	fmt.Fprintf(os.Stderr, "ops: %s failed\n", what)
	os.Exit(1)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: ops [--derive x25519|p256] [--sign rsa2048|p256] [--no-twin] [--op-log PATH] N_DERIVE M_SIGN")
	os.Exit(2)
}

type options struct {
	deriveAlg, signAlg, opLog string
	twin                      bool
	n, m                      uint64
}

func parse(args []string) options {
	o := options{deriveAlg: "x25519", signAlg: "rsa2048", twin: true}
	i := 0
	for ; i < len(args) && strings.HasPrefix(args[i], "--"); i += 2 {
		if args[i] == "--no-twin" {
			o.twin = false
			i--
			continue
		}
		if i+1 >= len(args) {
			usage()
		}
		switch v := args[i+1]; {
		case args[i] == "--derive" && (v == "x25519" || v == "p256"):
			o.deriveAlg = v
		case args[i] == "--sign" && (v == "rsa2048" || v == "p256"):
			o.signAlg = v
		case args[i] == "--op-log":
			o.opLog = v
		default:
			usage()
		}
	}
	if len(args)-i != 2 {
		usage()
	}
	var err1, err2 error
	o.n, err1 = strconv.ParseUint(args[i], 10, 64)
	o.m, err2 = strconv.ParseUint(args[i+1], 10, 64)
	if err1 != nil || err2 != nil {
		usage()
	}
	return o
}

// threadCPU is this thread's CPU time (CLOCK_THREAD_CPUTIME_ID); main's goroutine is locked to its thread.
func threadCPU() float64 {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		fail("clock_gettime")
	}
	return float64(ts.Nano()) / 1e3
}

type op struct {
	kind    int
	startNs int64
	cpuUs   float64
}

// clock sums each kind's calls: their thread CPU and wall time, and the operations made.
type clock struct {
	cpuUs, wallUs [2]float64
	ops           [2]uint64
	log           []op
	keepLog       bool
}

func (c *clock) timed(kind int, call func()) {
	start := time.Now()
	cpu0 := threadCPU()
	call()
	cpu := threadCPU() - cpu0
	c.wallUs[kind] += float64(time.Since(start).Nanoseconds()) / 1e3
	c.cpuUs[kind] += cpu
	c.ops[kind]++
	if c.keepLog {
		c.log = append(c.log, op{kind, start.UnixNano(), cpu})
	}
}

func (c *clock) mean(kind int) float64 {
	if c.ops[kind] == 0 {
		return 0
	}
	return c.cpuUs[kind] / float64(c.ops[kind])
}

func (c *clock) writeLog(path string) {
	if !c.keepLog {
		return
	}
	var b strings.Builder
	for _, o := range c.log {
		fmt.Fprintf(&b, "%c %d %.3f\n", kinds[o.kind][0], o.startNs, o.cpuUs)
	}
	if os.WriteFile(path, []byte(b.String()), 0o644) != nil {
		fail("writing the op log")
	}
}

// keys: the group of the key exchange with the client's share, and the certificate key with its options.
type keys struct {
	curve    ecdh.Curve
	peer     *ecdh.PublicKey
	signer   crypto.Signer
	signOpts crypto.SignerOpts
	digest   []byte
}

func newKeys(o options) keys {
	k := keys{curve: ecdh.X25519()}
	if o.deriveAlg == "p256" {
		k.curve = ecdh.P256()
	}
	peer, err := k.curve.GenerateKey(rand.Reader)
	if err != nil {
		fail("the peer's key share")
	}
	k.peer = peer.PublicKey()
	if o.signAlg == "p256" {
		k.signer, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		k.signOpts = crypto.SHA256
	} else {
		k.signer, err = rsa.GenerateKey(rand.Reader, 2048)
		k.signOpts = &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash, Hash: crypto.SHA256}
	}
	if err != nil {
		fail("key generation")
	}
	// What a TLS 1.3 server signs: 64 spaces, its context string, a zero byte and the transcript hash, hashed.
	h := sha256.New()
	h.Write([]byte(strings.Repeat(" ", 64) + "TLS 1.3, server CertificateVerify\x00"))
	transcript := sha256.Sum256([]byte("transcript"))
	h.Write(transcript[:])
	k.digest = h.Sum(nil)
	return k
}

// step makes the operation of its turn, interleaving the kinds evenly; only the measured call is timed.
func (k keys) step(c *clock, d, s *uint64, n, m uint64) {
	if *d < n && (*s >= m || *d*m <= *s*n) {
		*d++
		share, err := k.curve.GenerateKey(rand.Reader)
		if err != nil {
			fail("key share")
		}
		c.timed(derive, func() {
			if _, err := share.ECDH(k.peer); err != nil {
				fail("ECDH")
			}
		})
		return
	}
	*s++
	c.timed(sign, func() {
		if _, err := k.signer.Sign(rand.Reader, k.digest, k.signOpts); err != nil {
			fail("signing")
		}
	})
}

// warmUp makes one TLS 1.3 handshake in memory before the clock starts: the binary holds crypto/tls's
// handshake code as a server's does (tlsprof recognises Go's TLS by it), and first-use costs are paid.
func warmUp() {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		fail("warm-up key")
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		fail("warm-up certificate")
	}
	a, b := net.Pipe()
	server := tls.Server(a, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
	client := tls.Client(b, &tls.Config{InsecureSkipVerify: true})
	done := make(chan error, 1)
	go func() { done <- server.Handshake() }()
	if client.Handshake() != nil || <-done != nil {
		fail("warm-up handshake")
	}
	// The pipe, not the TLS connections: tls.Conn.Close writes a close_notify that nobody reads on a net.Pipe,
	// and waits out its 5 s write deadline.
	a.Close()
	b.Close()
}

func blockingPipe() (*os.File, *os.File) {
	var fds [2]int
	if syscall.Pipe2(fds[:], syscall.O_CLOEXEC) != nil {
		fail("pipe")
	}
	return os.NewFile(uintptr(fds[0]), "pipe"), os.NewFile(uintptr(fds[1]), "pipe")
}

// lockstep: the main process and its twin take turns, one step each.
type lockstep struct {
	turns, answers *os.File
	isTwin         bool
}

func (l *lockstep) byte(f *os.File, write bool) {
	var err error
	if write {
		_, err = f.Write([]byte{0})
	} else {
		_, err = f.Read(make([]byte, 1))
	}
	if err != nil {
		if l.isTwin {
			os.Exit(0) // the main process is gone
		}
		fail("lockstep pipe")
	}
}

func run(o options, k keys, l *lockstep, c *clock) {
	var d, s uint64
	for i := uint64(0); i < o.n+o.m; i++ {
		if l != nil {
			if l.isTwin {
				l.byte(l.turns, false)
			} else if i > 0 {
				l.byte(l.answers, false)
			}
		}
		k.step(c, &d, &s, o.n, o.m)
		if l != nil {
			if l.isTwin {
				l.byte(l.answers, true)
			} else {
				l.byte(l.turns, true)
			}
		}
	}
}

func main() {
	runtime.LockOSThread()
	// With one P (a process pinned to one CPU, as the bench pins the fixture), the P of the thread waiting
	// for its turn is handed off and taken back around each step, and the two processes' operations then cost
	// them different amounts (derivations 9% apart): two Ps keep the twins alike.
	if runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}
	o := parse(os.Args[1:])
	warmUp()
	k := newKeys(o)
	if os.Getenv(twinEnv) != "" {
		l := &lockstep{turns: os.NewFile(3, "turns"), answers: os.NewFile(4, "answers"), isTwin: true}
		c := &clock{keepLog: o.opLog != ""}
		run(o, k, l, c)
		c.writeLog(o.opLog + ".twin")
		var out [16]byte
		binary.LittleEndian.PutUint64(out[:8], math.Float64bits(c.mean(derive)))
		binary.LittleEndian.PutUint64(out[8:], math.Float64bits(c.mean(sign)))
		if _, err := l.answers.Write(out[:]); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}

	var l *lockstep
	var twin *exec.Cmd
	if o.twin {
		// Blocking pipes, read and written by plain system calls on both sides (os.Pipe's would go through
		// the runtime's network poller here and not in the twin): the two processes wait for their turns
		// alike.
		turnsR, turnsW := blockingPipe()
		answersR, answersW := blockingPipe()
		twin = exec.Command("/proc/self/exe", os.Args[1:]...)
		twin.Env = append(os.Environ(), twinEnv+"=1")
		twin.Stderr = os.Stderr
		twin.ExtraFiles = []*os.File{turnsR, answersW}
		if twin.Start() != nil {
			fail("starting the unprobed twin")
		}
		turnsR.Close()
		answersW.Close()
		l = &lockstep{turns: turnsW, answers: answersR}
	}

	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fail("reading stdin")
	}
	c := &clock{keepLog: o.opLog != ""}
	run(o, k, l, c)
	c.writeLog(o.opLog)
	twinFields := `"unprobed_derive_cpu_us":null,"unprobed_sign_cpu_us":null,"twin_pid":null`
	if l != nil {
		// The twin's last step, then its figures.
		if o.n+o.m > 0 {
			l.byte(l.answers, false)
		}
		var in [16]byte
		if _, err := io.ReadFull(l.answers, in[:]); err != nil || twin.Wait() != nil {
			fail("the unprobed twin")
		}
		twinFields = fmt.Sprintf(`"unprobed_derive_cpu_us":%.2f,"unprobed_sign_cpu_us":%.2f,"twin_pid":%d`,
			math.Float64frombits(binary.LittleEndian.Uint64(in[:8])),
			math.Float64frombits(binary.LittleEndian.Uint64(in[8:])), twin.Process.Pid)
	}
	var b strings.Builder
	b.WriteString("{")
	for kind, name := range kinds {
		n := math.Max(float64(c.ops[kind]), 1)
		fmt.Fprintf(&b, `"%ss":%d,"%s_cpu_us":%.2f,"%s_wall_us":%.2f,`, name, c.ops[kind], name, c.cpuUs[kind]/n,
			name, c.wallUs[kind]/n)
	}
	fmt.Fprintf(&b, `%s,"pid":%d,"derive_alg":"%s","sign_alg":"%s","as_speed":false,"library":"go"}`, twinFields,
		os.Getpid(), o.deriveAlg, o.signAlg)
	fmt.Println(b.String())
}
