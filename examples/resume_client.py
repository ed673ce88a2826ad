#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Makes sequential HTTPS requests that offer the previous TLS session, to drive resumed handshakes.
import argparse
import json
import re
import signal
import socket
import ssl
import subprocess
import sys

LIMIT_S = 60
REQUEST = b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--tls", choices=VERSIONS)
    ap.add_argument("--host", default="127.0.0.1")
    args = ap.parse_args()

    # Test servers use throwaway self-signed certificates.
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if args.tls:
        ctx.minimum_version = ctx.maximum_version = VERSIONS[args.tls]

    session, reused, version, cipher, key = None, 0, None, None, None
    for _ in range(args.count):
        with socket.create_connection((args.host, args.port)) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost", session=session) as tls:
                tls.sendall(REQUEST)
                # Reading to EOF also makes a TLS 1.3 client process the NewSessionTicket sent after the handshake.
                while tls.recv(65536):
                    pass
                reused += tls.session_reused
                session = tls.session
                version, cipher = tls.version(), tls.cipher()[0]
                key = key or certificate_key(tls.getpeercert(binary_form=True))
    print(json.dumps({"connections": args.count, "reused": reused, "version": version, "cipher": cipher,
                      "certificate_key": key}))


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
    # One alarm bounds the whole run, however the time is split between connections.
    signal.signal(signal.SIGALRM, give_up)
    signal.alarm(LIMIT_S)
    try:
        main()
    except TimeoutError:
        sys.exit(f"resume_client: gave up after {LIMIT_S} s")
    except OSError as e:
        sys.exit(f"resume_client: {e}")
