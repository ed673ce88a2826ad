#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Connections that carry bytes which look like TLS and are not, to a server on --port (loopback), for tests of
# what is counted from the wire: random bytes, random bytes behind a handshake record's header, a real
# ClientHello cut anywhere, a real ClientHello written a byte at a time and dropped before the server's answer,
# and a ClientHello whose record claims more bytes than come. None of them is a handshake: the server never
# answers with a ServerHello that a client goes on from. Bounded by --count and --seconds; prints its counts
# as one JSON line (connections made, by kind).
import argparse
import json
import random
import socket
import ssl
import time

KINDS = ("random", "record_header", "cut_hello", "bytewise_hello", "long_record")


def client_hello(rng):
    """A ClientHello as Python's TLS client would send it (made through a memory BIO, never sent itself)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def payload(kind, rng, hello):
    if kind == "random":
        return rng.randbytes(rng.randint(1, 600))
    if kind == "record_header":
        return bytes([22, 3, rng.randint(0, 4)]) + rng.randbytes(rng.randint(0, 600))
    if kind == "cut_hello":
        return hello[: rng.randint(1, len(hello) - 1)]
    if kind == "long_record":
        # A handshake record that says it holds 16 KiB, a ClientHello's start, then nothing more.
        return bytes([22, 3, 1, 0x40, 0x00]) + hello[5 : 5 + rng.randint(0, len(hello) - 5)]
    return hello


def main(args):
    rng = random.Random(args.seed)
    hello = client_hello(rng)
    counts = {k: 0 for k in KINDS}
    deadline = time.monotonic() + args.seconds
    for i in range(args.count):
        if time.monotonic() > deadline:
            break
        kind = KINDS[i % len(KINDS)]
        data = payload(kind, rng, hello)
        with socket.create_connection(("127.0.0.1", args.port), timeout=5) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if kind == "bytewise_hello":
                # Every byte but the last, each in its own segment: the server never has the whole hello.
                for b in data[:-1]:
                    s.sendall(bytes([b]))
            else:
                s.sendall(data)
            # Give the server a moment to read what came, then leave without reading its answer.
            time.sleep(0.005)
        counts[kind] += 1
    print(json.dumps({"connections": sum(counts.values()), **counts}))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=1)
    main(ap.parse_args())
