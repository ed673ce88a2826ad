#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Starts/stops a throwaway loopback PostgreSQL server with `ssl = on` whose files all live in one directory, for
# tests: a server that forks a backend for each connection, which handshakes within a millisecond of its fork.
set -euo pipefail

usage() { echo "usage: $0 start DIR PORT | $0 stop DIR" >&2; exit 2; }
die() { echo "postgres-target: $*" >&2; exit 1; }

bin_dir() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [[ -x $d/postgres ]] || die "no PostgreSQL server in /usr/lib/postgresql: install Debian's postgresql"
  echo "$d"
}

# The server runs as the postgres account (it refuses root); without root, as whoever runs this.
as_owner() {
  if ((EUID == 0)); then runuser -u postgres -- "$@"; else "$@"; fi
}

stop() {
  local dir=$1
  [[ -f $dir/data/postmaster.pid ]] || return 0
  as_owner "$(bin_dir)/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
}

start() {
  local dir=$1 port=$2 bin
  [[ $port =~ ^[1-9][0-9]*$ ]] && ((port < 65536)) || usage
  bin=$(bin_dir)
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  [[ -f $dir/data/postmaster.pid ]] && die "a server already runs in $dir; stop it first"
  ((EUID == 0)) && chown postgres "$dir"
  as_owner "$bin/initdb" -D "$dir/data" -A trust -U postgres >"$dir/initdb.log" 2>&1 \
    || die "initdb failed: $(tail -n 3 "$dir/initdb.log")"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj /CN=localhost \
    -keyout "$dir/data/server.key" -out "$dir/data/server.crt" 2>"$dir/openssl.log" \
    || die "openssl req failed: $(tail -n 3 "$dir/openssl.log")"
  chmod 600 "$dir/data/server.key"
  ((EUID == 0)) && chown postgres "$dir/data/server.key" "$dir/data/server.crt"
  cat >>"$dir/data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
ssl = on
max_connections = 20
EOF
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 start >/dev/null \
    || die "the server did not start: $(tail -n 3 "$dir/server.log")"
  head -n 1 "$dir/data/postmaster.pid"
}

case ${1:-} in
  start) (($# == 3)) || usage; start "$2" "$3" ;;
  stop) (($# == 2)) || usage; [[ -d $2 ]] || exit 0; stop "$(cd "$2" && pwd)" ;;
  *) usage ;;
esac
