#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# An HTTPS server that never drives its handshakes itself: each connection is wrapped without a handshake and
# read at once, so the handshake runs inside SSL_read_ex, as in servers that leave it to their first read.
# Python's ssl module uses the system's libssl (Debian's exports only the public API).
import argparse
import signal
import socket
import ssl
import sys

LIMIT_S = 300
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n"


def serve(ctx, listener):
    while True:
        raw, _ = listener.accept()
        with raw:
            tls = ctx.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
            try:
                if tls.recv(4096):
                    tls.sendall(RESPONSE)
            except (ssl.SSLError, OSError):
                pass  # the client left during the handshake or before its request: it is the client's choice
            finally:
                tls.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    listener = socket.create_server(("127.0.0.1", args.port), backlog=128)
    print(f"listening {listener.getsockname()[1]}", flush=True)
    serve(ctx, listener)


def give_up(signum, frame):
    sys.exit(f"io_driven_server: stopped after {LIMIT_S} s")


if __name__ == "__main__":
    # Bounded: a test that forgets it does not leave it running.
    signal.signal(signal.SIGALRM, give_up)
    signal.alarm(LIMIT_S)
    main()
