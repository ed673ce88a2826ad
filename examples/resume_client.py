#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Makes HTTPS requests that offer a previous TLS session, to drive resumed handshakes, and counts what came of
# them: connections, sessions offered, sessions reused (the client's own counts, printed as JSON).
#
# Connection i is made by client i % --clients (users each keeping its own session) to one of the --port list
# (picked at random with --seed: clients behind a balancer), offers that client's last session (from any
# port), sends one request and reads the answer (a TLS 1.3 server sends its tickets after the handshake).
# With --between, a shell command runs after half the connections. Loopback by default; bounded by --count
# and --seconds.
import argparse
import json
import os
import random
import re
import signal
import socket
import ssl
import subprocess
import sys
import time

LIMIT_S = 60
REQUEST = b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}


def main(args):
    # Test servers use throwaway self-signed certificates.
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if args.tls:
        ctx.minimum_version = ctx.maximum_version = VERSIONS[args.tls]
    if args.no_tickets:
        ctx.options |= ssl.OP_NO_TICKET
    ports = [int(p) for p in args.port.split(",")]
    if args.wait_for:
        waited = time.monotonic() + 30
        while not os.path.exists(args.wait_for) and time.monotonic() < waited:
            time.sleep(0.05)
    rng = random.Random(args.seed)
    sessions = [None] * args.clients
    counts = {"connections": 0, "offered": 0, "reused": 0}
    version, cipher, key = None, None, None
    deadline = time.monotonic() + args.seconds
    for i in range(args.count):
        if args.between and i == args.count // 2:
            subprocess.run(args.between, shell=True, check=True)
        if time.monotonic() > deadline:
            break
        client = i % args.clients
        session = sessions[client]
        with socket.create_connection((args.host, rng.choice(ports)), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost", session=session) as tls:
                # Read while the handshake's state is whole: a server's close (the JDK's) can leave it unreadable.
                version, cipher = tls.version(), tls.cipher()[0]
                key = key or certificate_key(tls.getpeercert(binary_form=True))
                tls.sendall(REQUEST)
                # Reading to EOF also makes a TLS 1.3 client process the NewSessionTicket sent after the handshake.
                while tls.recv(65536):
                    pass
                counts["connections"] += 1
                counts["offered"] += session is not None
                counts["reused"] += tls.session_reused
                sessions[client] = tls.session or session
    print(json.dumps({**counts, "version": version, "cipher": cipher, "certificate_key": key}))


def certificate_key(der):
    """The server certificate's key as tlsprof names it ("RSA-2048", "ECDSA P-256"), read by openssl x509."""
    text = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-text"], input=der,
                          capture_output=True, check=True).stdout.decode()
    bits = re.search(r"Public-Key: \((\d+) bit\)", text)
    if "rsaEncryption" in text and bits:
        return f"RSA-{bits.group(1)}"
    curve = re.search(r"NIST CURVE: (P-\d+)", text)
    return f"ECDSA {curve.group(1)}" if curve else None


def give_up(signum, frame):
    raise TimeoutError


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", required=True, help="P[,P...]: the servers, picked at random per connection")
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--clients", type=int, default=1, help="clients, each resuming its own last session")
    ap.add_argument("--tls", choices=VERSIONS)
    ap.add_argument("--no-tickets", action="store_true", help="resume by session ID only")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--between", help="shell command run after half the connections")
    ap.add_argument("--seconds", type=float, default=LIMIT_S, help="stop after this long")
    ap.add_argument("--wait-for", help="start once this file exists (at most 30 s): a profiler attaches first")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    # One alarm bounds the whole run, however the time is split between connections and waits.
    signal.signal(signal.SIGALRM, give_up)
    signal.alarm(int(args.seconds) + 60)
    try:
        main(args)
    except TimeoutError:
        sys.exit(f"resume_client: gave up after {int(args.seconds) + 60} s")
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"resume_client: {e}")
