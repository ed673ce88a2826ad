# SPDX-License-Identifier: Apache-2.0
"""The JDK's own TLS (JSSE), which tlsprof profiles by the frames of its CPU samples and counts from the wire:
against its fixture (examples/java/JsseHandshakes.java: client and server SSLEngines handshaking in memory, each
handshake and a Signature.sign after it timed by the thread's CPU clock), per certificate key; and a JDK
HttpsServer (examples/java/TlsServer.java) and a Netty server on netty-tcnative (examples/java/NettyTlsServer.java)
under `openssl s_time -new`, counted in default mode against the client's connections. One run of each per round.
"""

import json
import os
import subprocess
import time

from .common import BenchError, log, med
from .fmt import fmed, fnum, fpct, table
from .processes import Child, LineWatcher, run_text

HEADING = "## Accuracy: the JDK's TLS by its frames"
BEFORE = "## Attach and report time"
# The certificate keys, with keytool's arguments for them.
KEYS = {
    "EC P-256": ["-keyalg", "EC", "-groupname", "secp256r1"],
    "RSA-2048": ["-keyalg", "RSA", "-keysize", "2048"],
}
# The servers: the JDK's HttpsServer (examples/java/TlsServer.java) and Netty on netty-tcnative's BoringSSL
# (examples/java/NettyTlsServer.java), which tlsprof probes.
SERVERS = ["JSSE", "Netty"]
HANDSHAKES = 800
# The sampling rate of the fixture runs: ten times the default, for enough samples of each stage.
FREQ_HZ = 999
JVM_ARGS = ["-XX:+PreserveFramePointer"]
SERVER_SECONDS = 8
SMOKE_ROUNDS = 1
EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "java")


def rounds(args):
    """The rounds a --java-only-bench run makes."""
    return SMOKE_ROUNDS if args.smoke else args.rounds


class Classes:
    """The fixture and the servers compiled into the scratch directory with the libraries Maven fetches (Netty and
    netty-tcnative, examples/java/pom.xml), a keystore per key, and a PEM certificate and key for Netty."""

    def __init__(self, scratch):
        self.dir = os.path.join(scratch, "java")
        os.makedirs(self.dir, exist_ok=True)
        listing = os.path.join(self.dir, "libraries.classpath")
        out = run_text(["mvn", "-q", "-f", os.path.join(EXAMPLES, "pom.xml"), "dependency:build-classpath",
                        f"-Dmdep.outputFile={listing}"], timeout=900)
        if out.returncode != 0:
            raise BenchError(f"mvn dependency:build-classpath: {(out.stdout + out.stderr).strip()[-300:]}")
        with open(listing) as f:
            self.class_path = f"{self.dir}:{f.read().strip()}"
        sources = [os.path.join(EXAMPLES, f) for f in ("JsseHandshakes.java", "TlsServer.java",
                                                       "NettyTlsServer.java")]
        out = run_text(["javac", "-cp", self.class_path, "-d", self.dir, *sources], timeout=300)
        if out.returncode != 0:
            raise BenchError(f"javac: {out.stderr.strip()[-300:]}")
        self.cert, self.key = (os.path.join(self.dir, n) for n in ("cert.pem", "key.pem"))
        out = run_text(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                        "-nodes", "-keyout", self.key, "-out", self.cert, "-days", "2", "-subj", "/CN=localhost"],
                       timeout=60)
        if out.returncode != 0:
            raise BenchError(f"openssl req: {out.stderr.strip()[-300:]}")
        self.stores = {}
        for key, args in KEYS.items():
            store = os.path.join(self.dir, key.replace(" ", "-") + ".p12")
            if os.path.exists(store):
                os.remove(store)
            out = run_text(["keytool", "-genkeypair", "-alias", "tls", "-dname", "CN=localhost", "-validity", "2",
                            *args, "-storetype", "PKCS12", "-storepass", "changeit", "-keypass", "changeit",
                            "-keystore", store], timeout=120)
            if out.returncode != 0:
                raise BenchError(f"keytool: {out.stderr.strip()[-300:]}")
            self.stores[key] = store

    def java(self, *args):
        return ["java", *JVM_ARGS, "-cp", self.class_path, *args]

    def server(self, kind):
        """The command line of a server of `kind` (SERVERS)."""
        if kind == "JSSE":
            return self.java("TlsServer", self.stores["EC P-256"], "changeit")
        return self.java("NettyTlsServer", self.cert, self.key)


def _record(bench, pid, out, *args):
    """tlsprof recording process `pid` into `out`, once its probes are live."""
    tlsprof = Child([bench.tlsprof, "record", "--pid", pid, *args, "-o", out],
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    watch = LineWatcher(tlsprof.popen.stderr)
    if watch.wait_for(lambda l: "probes live" in l, timeout=60) is None:
        tlsprof.stop(grace=5)
        raise BenchError(f"tlsprof did not attach: {watch.text().strip()[-300:]}")
    return tlsprof, watch


def _stop(tlsprof, watch):
    if tlsprof.stop(grace=120) != 0:
        raise BenchError(f"tlsprof exited with {tlsprof.status}: {watch.text().strip()[-300:]}")


def _report(bench, recording):
    out = run_text([bench.tlsprof, "report", "--json", recording], timeout=120)
    if out.returncode != 0:
        raise BenchError(f"tlsprof report --json: {out.stderr.strip()[-300:]}")
    return json.loads(out.stdout)


def _stage_ms(r, name):
    return next((s["self_cpu_ms"] for s in r["stages"] if s["name"] == name), None)


def fixture_run(bench, classes, rnd, key):
    """The fixture on `key`'s keystore under tlsprof (exact mode, FREQ_HZ): its truths and tlsprof's figures."""
    fixture = subprocess.Popen(classes.java("JsseHandshakes", classes.stores[key], "changeit", str(HANDSHAKES)),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        if fixture.stdout.readline().strip() != "ready":
            raise BenchError("JsseHandshakes did not get ready")
        out = os.path.join(bench.scratch, f"java-r{rnd}-{key.replace(' ', '-')}.tlsprof")
        tlsprof, watch = _record(bench, fixture.pid, out, "--freq", str(FREQ_HZ), "--max-overhead", "100")
        fixture.stdin.write("go\n")
        fixture.stdin.flush()
        line = fixture.stdout.readline()
        # Stopped while the JVM runs: it is asked for the names of the code it compiled until the end.
        _stop(tlsprof, watch)
    finally:
        fixture.stdin.close()
        fixture.wait(timeout=60)
    try:
        truth = json.loads(line)
    except json.JSONDecodeError:
        raise BenchError(f"JsseHandshakes printed {line!r}") from None
    r = _report(bench, out)
    n, signs = truth["handshakes"], truth["signs"]
    tls_us = 1e3 * (r["targets"][0].get("tls_cpu_ms") or 0.0)
    sign_ms = _stage_ms(r, "sign")
    rec = {
        "round": rnd, "key": key, "handshakes": n,
        "handshake_us": truth["handshake_cpu_us"], "sign_us": truth["sign_cpu_us"],
        # The signatures made alone are TLS CPU by their frames too: taken out at the fixture's own figure.
        "ours_handshake_us": (tls_us - signs * truth["sign_cpu_us"]) / n,
        # One signature per handshake (the server's CertificateVerify) and one alone.
        "ours_sign_us": 1e3 * sign_ms / (n + signs) if sign_ms is not None else None,
        "samples": r["samples"],
    }
    bench.data.setdefault("java", []).append(rec)
    log(f"round {rnd} java fixture {key}: TLS per handshake {rec['ours_handshake_us']:.0f} µs vs the fixture's "
        f"{rec['handshake_us']:.0f}; per signature {fnum(rec['ours_sign_us'], 0)} vs {rec['sign_us']:.0f}")


def server_run(bench, classes, rnd, kind):
    """A server of `kind` on an EC P-256 key, warmed, then counted in default mode under `openssl s_time -new`."""
    server = Child(classes.server(kind), stdout=subprocess.PIPE)
    try:
        watch_out = LineWatcher(server.popen.stdout)
        got = watch_out.wait_for(lambda l: l.startswith("listening "), timeout=60)
        if got is None:
            raise BenchError("TlsServer did not listen")
        port = got[1].rsplit(":", 1)[1]
        _s_time(port, SERVER_SECONDS)
        out = os.path.join(bench.scratch, f"java-r{rnd}-{kind}.tlsprof")
        tlsprof, watch = _record(bench, server.pid, out, "--max-overhead", "0.3")
        made = _s_time(port, SERVER_SECONDS)
        time.sleep(0.3)
        _stop(tlsprof, watch)
    finally:
        server.stop(grace=10)
    r = _report(bench, out)
    h = r["handshakes"]
    rec = {"round": rnd, "server": kind, "made": made, "estimate": h["total"], "ci95": h.get("total_ci95"),
           "windows": r["probing"]["windows"], "estimated": h.get("estimated")}
    bench.data.setdefault("java_server", []).append(rec)
    log(f"round {rnd} java server {kind}: {made} connections, estimated {rec['estimate']} {rec['ci95']}")


def _s_time(port, seconds):
    """Connections `openssl s_time -new` made to `port` over `seconds`."""
    out = run_text(["openssl", "s_time", "-connect", f"127.0.0.1:{port}", "-new", "-time", str(seconds),
                    "-www", "/"], timeout=seconds + 60)
    for line in out.stdout.splitlines():
        if "connections in" in line and "real seconds" in line:
            return int(line.split()[0])
    raise BenchError(f"openssl s_time: {out.stdout.strip()[-300:]}{out.stderr.strip()[-300:]}")


def run_round(bench, rnd):
    """Each key's fixture run, then each server's, in orders rotated by the round."""
    classes = Classes(bench.scratch)
    keys = list(KEYS)
    k = (rnd - 1) % len(keys)
    for key in keys[k:] + keys[:k]:
        fixture_run(bench, classes, rnd, key)
        time.sleep(0.5)
    for kind in SERVERS[k:] + SERVERS[:k]:
        server_run(bench, classes, rnd, kind)


# -- the section


def _ratio(ours, truth):
    return ours / truth - 1 if ours is not None and truth else None


def _fixture_table(data):
    rows = []
    for key in KEYS:
        rs = [r for r in data.get("java") or [] if r["key"] == key]
        if not rs:
            continue
        rows.append([key, fmed([r["ours_handshake_us"] for r in rs], 0), fmed([r["handshake_us"] for r in rs], 0),
                     fpct(med([_ratio(r["ours_handshake_us"], r["handshake_us"]) for r in rs])),
                     fmed([r["ours_sign_us"] for r in rs], 0), fmed([r["sign_us"] for r in rs], 0),
                     fpct(med([_ratio(r["ours_sign_us"], r["sign_us"]) for r in rs])),
                     fmed([r["samples"] for r in rs], 0), len(rs)])
    return table(["Certificate key", "tlsprof: TLS CPU per handshake, µs", "fixture's clock", "tlsprof vs fixture",
                  "tlsprof: sign per signature, µs", "fixture's Signature.sign", "tlsprof vs fixture",
                  "samples", "runs"], rows)


def _server_table(data):
    rows = []
    for r in data.get("java_server") or []:
        lo, hi = r["ci95"] or (None, None)
        inside = lo is not None and lo <= r["made"] <= hi
        rows.append([r.get("server", "JSSE"), r["round"], r["made"], fnum(r["estimate"], 0), f"{fnum(lo, 0)}–{fnum(hi, 0)}",
                     fpct(_ratio(r["estimate"], r["made"])), "yes" if inside else "**no**", r["windows"]])
    return table(["server", "round", "client's connections", "tlsprof's estimate", "95% interval", "estimate vs client",
                  "interval holds the client's", "windows"], rows)


def section_values(data):
    """The template's fields of the section, or none when the run made no Java runs."""
    if not data.get("java"):
        return {"java_measured": False, "java_table": "", "java_server_table": "", "java_note": "",
                "java_handshakes": HANDSHAKES, "java_freq": FREQ_HZ, "java_server_seconds": SERVER_SECONDS}
    note = ""
    if data.get("java_only_bench"):
        m = data["machine"]
        n = max(r["round"] for r in data["java"])
        note = (f" Measured apart from the rest of this file (`scripts/bench.py --java-only-bench`, {n} round(s)), "
                f"{data.get('started', '?')}: {m['cpu']}, kernel {m['kernel']}, {m['tlsprof']}.")
    return {"java_measured": True, "java_table": _fixture_table(data), "java_server_table": _server_table(data),
            "java_note": note, "java_handshakes": HANDSHAKES, "java_freq": FREQ_HZ,
            "java_server_seconds": SERVER_SECONDS}
