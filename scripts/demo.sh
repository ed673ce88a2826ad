#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The demo: nginx and a Node.js HTTPS server on loopback under bounded load, profiled by tlsprof.
# Leaves the summary, its JSON and a flame graph in out/.
set -euo pipefail
cd "$(dirname "$0")/.."

out=$PWD/out
tlsprof=$PWD/target/release/tlsprof
[ "$(id -u)" -eq 0 ] || { echo "demo: tlsprof loads BPF programs: run as root (sudo make demo)" >&2; exit 1; }
[ -x "$tlsprof" ] || { echo "demo: $tlsprof is missing: run 'make build' first" >&2; exit 1; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

rm -rf "$out" && mkdir -p "$out"
nginx_port=$(free_port)
node_pid=""
cleanup() {
  [ -n "$node_pid" ] && kill "$node_pid" 2>/dev/null || true
  scripts/nginx-target.sh stop "$out/nginx"
}
trap cleanup EXIT

# nginx: TLS 1.2 and 1.3, RSA-2048 certificate made on the fly, session tickets on so clients can resume.
nginx_master=$(scripts/nginx-target.sh start "$out/nginx" "$nginx_port" --tickets on)
node_port=$(free_port)
node --perf-basic-prof examples/node/https-server.js --port "$node_port" --key "$out/nginx/key.pem" --cert "$out/nginx/cert.pem" \
  >"$out/node.log" 2>&1 &
node_pid=$!
until grep -q listening "$out/node.log" 2>/dev/null; do
  kill -0 "$node_pid" 2>/dev/null || { echo "demo: the Node.js server did not start: $(cat "$out/node.log")" >&2; exit 1; }
  sleep 0.1
done

echo "demo: nginx (master $nginx_master) on 127.0.0.1:$nginx_port, node (pid $node_pid) on 127.0.0.1:$node_port"
pids=()
for p in "$nginx_master" $(pgrep -P "$nginx_master") "$node_pid"; do pids+=(--pid "$p"); done
# A 14 s demo under full load: a budget of 2% (the default is 0.3%) lets the probe windows catch the
# resuming clients too.
"$tlsprof" record "${pids[@]}" --duration 14 --hello-capture always --max-overhead 2 --output "$out/demo.tlsprof" >"$out/summary.txt" 2>"$out/record.log" &
record_pid=$!
until grep -q "probes live" "$out/record.log" 2>/dev/null; do
  kill -0 "$record_pid" 2>/dev/null || { cat "$out/record.log" >&2; exit 1; }
  sleep 0.1
done
cat "$out/record.log"

# All at once, as a server sees its clients: the default budget probes part of the time, and every probe
# window then sees the whole mix.
echo "demo: load for about 10 s, all at once: full handshakes to nginx, resuming clients to nginx (1000 connections), full handshakes to node"
load=()
openssl s_time -connect "127.0.0.1:$nginx_port" -new -time 10 | grep 'real seconds' &
load+=($!)
python3 examples/resume_client.py --port "$nginx_port" --count 1000 &
load+=($!)
openssl s_time -connect "127.0.0.1:$node_port" -new -time 10 | grep 'real seconds' &
load+=($!)
wait "${load[@]}"

wait "$record_pid"
"$tlsprof" report --json "$out/demo.tlsprof" >"$out/summary.json"
"$tlsprof" flamegraph "$out/demo.tlsprof" --output "$out/flame.svg"
"$tlsprof" flamegraph "$out/demo.tlsprof" --folded >"$out/flame.folded"
cat "$out/summary.txt"
echo
echo "demo: wrote $out/summary.txt, $out/summary.json, $out/flame.svg, $out/flame.folded"
