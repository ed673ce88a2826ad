#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Opens TLS connections that it abandons after the server's flight, as scanners and health checks do: the
# server has made its key share and signature, and never gets the client's Finished.
import argparse
import json
import signal
import socket
import ssl
import sys
import time

LIMIT_S = 60


def abandon_one(ctx, host, port, hold_s):
    with socket.create_connection((host, port)) as raw:
        inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = ctx.wrap_bio(inc, out, server_hostname="localhost")
        while True:
            try:
                tls.do_handshake()
                # Done on our side: the Finished that would complete the server's side stays unsent.
                time.sleep(hold_s)
                return
            except ssl.SSLWantReadError:
                pass
            if out.pending:
                raw.sendall(out.read())
            data = raw.recv(65536)
            if not data:
                raise OSError("the server closed the connection during the handshake")
            inc.write(data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--count", type=int, help="this many connections")
    ap.add_argument("--seconds", type=float, help="as many connections as fit in this time")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--hold-ms", type=float, default=0.0,
                    help="keep each connection this long after the server's flight before closing it, as a "
                         "client a round trip away leaves later")
    args = ap.parse_args()
    if (args.count is None) == (args.seconds is None) or not 0 < (args.seconds or 1) < LIMIT_S:
        ap.error(f"give --count, or --seconds below {LIMIT_S}")
    if not 0 <= args.hold_ms <= 1000:
        ap.error("--hold-ms: from 0 to 1000")

    # Test servers use throwaway self-signed certificates. TLS 1.3: the client's Finished is its last flight.
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    done, end = 0, time.monotonic() + (args.seconds or LIMIT_S)
    while (done < args.count) if args.count is not None else time.monotonic() < end:
        abandon_one(ctx, args.host, args.port, args.hold_ms / 1e3)
        done += 1
    print(json.dumps({"connections": done, "abandoned": done}))


def give_up(signum, frame):
    raise TimeoutError


if __name__ == "__main__":
    # One alarm bounds the whole run, however the time is split between connections.
    signal.signal(signal.SIGALRM, give_up)
    signal.alarm(LIMIT_S)
    try:
        main()
    except TimeoutError:
        sys.exit(f"abandon_client: gave up after {LIMIT_S} s")
    except OSError as e:
        sys.exit(f"abandon_client: {e}")
