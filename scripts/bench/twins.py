# SPDX-License-Identifier: Apache-2.0
"""The twins: two identical targets (nginx, or with --go the Go server of examples/go) whose serving processes share
one CPU, and the figures a run compares between them."""

import os
import re
import shutil
import socket
import subprocess
import time

from .common import CLK_TCK, REPO, BenchError, log
from .procfs import children_of, cpu_ticks, ctx_switches, mapped_library, schedstat_ns, tasks
from .processes import Child, run_text

NGINX_TARGET = os.path.join(REPO, "scripts/nginx-target.sh")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nginx_libraries():
    """(soname, path) of the libssl and libcrypto that /usr/sbin/nginx loads, from ldd."""
    out = run_text(["ldd", "/usr/sbin/nginx"])
    libs = re.findall(r"^\s*(lib(?:ssl|crypto)\.so\S*) => (/\S+)", out.stdout, re.M)
    if len(libs) != 2:
        raise BenchError(f"cannot find nginx's libssl and libcrypto in `ldd /usr/sbin/nginx`: {out.stdout.strip()}")
    return libs


def build_aws_lc():
    """AWS-LC, nginx built against it and the AWS-LC fixture (scripts/build-aws-lc.sh, kept in target/ as the
    tests keep them): (nginx, fixture)."""
    out = run_text([os.path.join(REPO, "scripts/build-aws-lc.sh"), os.path.join(REPO, "target/nginx-aws-lc")],
                   timeout=1200)
    if out.returncode != 0:
        raise BenchError(f"build-aws-lc.sh: {out.stderr.strip()[-300:]}")
    nginx, fixture = out.stdout.split()
    return nginx, fixture


class Nginx:
    """One of the two identical targets (the twins): one worker, loopback, TLS 1.3, an RSA-2048 certificate or
    `cert` (nginx-target.sh's name). Debian's nginx, or `executable` with its TLS library linked in (nginx built
    against AWS-LC)."""

    def __init__(self, scratch, name, executable=None, cert="rsa2048"):
        self.name = name
        kind = "" if executable is None else "static-"
        kind += "" if cert == "rsa2048" else f"{cert}-"
        self.dir = os.path.join(scratch, f"nginx-{kind}{name}")
        self.executable = executable
        self.cert = cert
        self.port = free_port()
        self.master = None
        self.worker = None

    def start(self):
        # Each twin runs its own copy of the TLS library's file (libssl and libcrypto, or the executable they are
        # linked into): uprobes belong to a file, and bpftrace 0.17 attaches its uprobes to every process that
        # maps the file (-p does not restrict them). With a copy each, a profiler's uprobes trap in the profiled
        # twin only, not in the control twin or in the load clients.
        libdir = os.path.join(self.dir, "lib")
        os.makedirs(libdir, exist_ok=True)
        env = dict(os.environ, LD_LIBRARY_PATH=libdir)
        if self.executable is None:
            for soname, path in nginx_libraries():
                shutil.copy2(path, os.path.join(libdir, soname))
        else:
            env["NGINX_BIN"] = os.path.join(libdir, "nginx")
            shutil.copy2(self.executable, env["NGINX_BIN"])
        out = run_text([NGINX_TARGET, "start", self.dir, self.port,
                        "--protocols", "TLSv1.3", "--cert", self.cert, "--workers", "1"], env=env)
        if out.returncode != 0:
            raise BenchError(f"nginx-target.sh start: {out.stderr.strip().splitlines()[-1:] or out.returncode}")
        self.master = int(out.stdout.strip())
        workers = []
        for _ in range(50):
            workers = children_of(self.master)
            if workers:
                break
            time.sleep(0.1)
        if len(workers) != 1:
            raise BenchError(f"nginx master {self.master} has {len(workers)} workers, expected 1")
        self.worker = workers[0]
        if self.executable is not None:
            exe = os.readlink(f"/proc/{self.worker}/exe")
            if exe != env["NGINX_BIN"]:
                raise BenchError(f"nginx {self.name} runs {exe}, not its copy {env['NGINX_BIN']}")
        for name in ("libssl", "libcrypto") if self.executable is None else ():
            path = mapped_library(self.worker, name)
            if not path or os.path.dirname(path) != libdir:
                raise BenchError(f"nginx {self.name} maps {path or 'no shared ' + name}, not its copy in {libdir}")
        log(f"nginx {self.name}: master {self.master}, worker {self.worker} on 127.0.0.1:{self.port}")

    def check_worker(self):
        if self.worker not in children_of(self.master):
            raise BenchError(f"nginx worker {self.worker} is gone (see {self.dir}/error.log)")

    def stop(self):
        subprocess.run([NGINX_TARGET, "stop", self.dir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=60)


def go_tool():
    """The machine's go (scripts/install-deps.sh installs one), or None."""
    return shutil.which("go") or next((p for p in ["/usr/local/go/bin/go"] if os.access(p, os.X_OK)), None)


def build_go(scratch, programs=("server", "client")):
    """examples/go's `programs` built with the machine's go into scratch: their paths, in order."""
    go = go_tool()
    if not go:
        raise BenchError("go is not installed (scripts/install-deps.sh installs it)")
    out = []
    for program in programs:
        path = os.path.join(scratch, f"go-{program}")
        built = run_text([go, "build", "-o", path, f"./{program}"], cwd=os.path.join(REPO, "examples/go"),
                         timeout=300)
        if built.returncode != 0:
            raise BenchError(f"go build {program}: {built.stderr.strip()[-300:]}")
        out.append(path)
    return tuple(out)


class GoServer:
    """A Go twin: examples/go/server, loopback, RSA-2048, TLS 1.3, no session tickets (every handshake is full, as
    nginx's twins under `s_time -new`). Its one process serves (`worker`, as nginx's worker)."""

    def __init__(self, scratch, name, binary):
        self.name = name
        self.binary = binary
        self.log = os.path.join(scratch, f"go-server-{name}.out")
        self.child = None
        self.port = None
        self.master = self.worker = None

    def start(self):
        self.child = Child([self.binary, "-key", "rsa", "-no-tickets"], stdout=self.log)
        for _ in range(100):
            with open(self.log) as f:
                line = f.readline()
            if line.startswith("listening ") and line.endswith("\n"):
                self.port = int(line.split()[1].rsplit(":", 1)[1])
                break
            if self.child.poll() is not None:
                break
            time.sleep(0.05)
        if self.port is None:
            raise BenchError(f"the Go server {self.name} did not start (see {self.log})")
        self.master = self.worker = self.child.pid
        log(f"Go server {self.name}: pid {self.worker} on 127.0.0.1:{self.port}")

    def check_worker(self):
        if self.child.poll() is not None:
            raise BenchError(f"the Go server {self.name} is gone (exit {self.child.status}, see {self.log})")

    def stop(self):
        if self.child:
            self.child.stop(grace=10)


def build_rust_example(name):
    """examples/rust/NAME as cargo's release profile builds it (the tests' build directory, kept)."""
    target = os.path.join(REPO, "target/examples")
    built = run_text(["cargo", "build", "--release", "--locked", "--quiet", "--manifest-path",
                      os.path.join(REPO, f"examples/rust/{name}/Cargo.toml"), "--target-dir", target],
                     timeout=900)
    if built.returncode != 0:
        raise BenchError(f"cargo build {name}: {built.stderr.strip()[-300:]}")
    return os.path.join(target, "release", name)


class RustServer:
    """A Rust twin: examples/rust/rustls-server (rustls 0.23, aws-lc-rs) or boring-server (BoringSSL through the
    boring crate), loopback, RSA-2048, one connection at a time on its one thread (`worker`, as nginx's worker).
    Its default session store stays unused: `s_time -new` never resumes."""

    def __init__(self, scratch, name, binary):
        self.name = name
        self.binary = binary
        self.scratch = scratch
        self.kind = os.path.basename(binary)
        self.log = os.path.join(scratch, f"{self.kind}-{name}.out")
        self.child = None
        self.port = None
        self.master = self.worker = None

    def start(self):
        key, cert = os.path.join(self.scratch, "rust-key.pem"), os.path.join(self.scratch, "rust-cert.pem")
        if not os.path.exists(cert):
            made = run_text(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                             "/CN=localhost", "-keyout", key, "-out", cert])
            if made.returncode != 0:
                raise BenchError(f"openssl req: {made.stderr.strip()[-300:]}")
        self.child = Child([self.binary, cert, key], stdout=self.log)
        for _ in range(100):
            with open(self.log) as f:
                line = f.readline()
            if line.strip().isdigit() and line.endswith("\n"):
                self.port = int(line)
                break
            if self.child.poll() is not None:
                break
            time.sleep(0.05)
        if self.port is None:
            raise BenchError(f"{self.kind} {self.name} did not start (see {self.log})")
        self.master = self.worker = self.child.pid
        log(f"{self.kind} {self.name}: pid {self.worker} on 127.0.0.1:{self.port}")

    def check_worker(self):
        if self.child.poll() is not None:
            raise BenchError(f"{self.kind} {self.name} is gone (exit {self.child.status}, see {self.log})")

    def stop(self):
        if self.child:
            self.child.stop(grace=10)


# The CPUs this benchmark may use, read before pin_twins narrows its own affinity to all but the last.
BENCH_CPUS = sorted(os.sched_getaffinity(0))


def pin_twins(twins):
    """Both workers get the last CPU, which they share; this process, and so the clients and profilers it starts,
    get the others. On one CPU the twins see the same CPU speed and the same neighbours. Pinning also keeps the
    scheduler from moving a worker onto a client's CPU, which changes its CPU per request by more than a
    profiler does. Returns the workers' CPU, or None."""
    cpus = BENCH_CPUS
    if len(cpus) < 2:
        return None
    for twin in twins:
        # Every thread: a Go server's threads made later inherit the mask of the thread that makes them.
        for tid in tasks(twin.worker):
            os.sched_setaffinity(tid, {cpus[-1]})
    os.sched_setaffinity(0, set(cpus[:-1]))
    log(f"{', '.join(t.name for t in twins)} pinned to CPU {cpus[-1]}; clients and profilers on CPU "
        f"{','.join(map(str, cpus[:-1]))}")
    return cpus[-1]


def worker_counters(pid):
    """What a run compares between the twins: the worker's CPU ticks, on-CPU ns and context switches."""
    return cpu_ticks(pid), schedstat_ns(pid), ctx_switches(pid)


def twin_figures(load, before, after):
    """One twin's load result and its worker's counters over the run, per request."""
    (t0, n0, x0), (t1, n1, x1) = before, after
    n = load["requests"]
    return {**load, "worker_ticks": t1 - t0, "worker_ns": n1 - n0,
            "cpu_us_per_req": (t1 - t0) / CLK_TCK * 1e6 / n, "cpu_us_per_req_ns": (n1 - n0) / 1e3 / n,
            "ctx_per_req": (sum(x1) - sum(x0)) / n, "vol_ctx_per_req": (x1[0] - x0[0]) / n,
            "invol_ctx_per_req": (x1[1] - x0[1]) / n}


def paired_overhead(mine, other):
    """The overhead of a run: both twins ran the same load on the same CPU at the same time."""
    return mine["cpu_us_per_req_ns"] / other["cpu_us_per_req_ns"] - 1
