#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Starts/stops a throwaway loopback HTTPS nginx whose files all live in one directory, for tests and the demo.
set -euo pipefail

usage() {
  echo "usage: $0 start DIR PORT [--protocols \"TLSv1.2 TLSv1.3\"] [--session-cache on|off|builtin:N]" \
       "[--tickets on|off] [--ticket-key FILE] [--cert rsa2048|rsa3072|ecdsa-p256] [--cert-from DIR] [--ciphers STRING]" \
       "[--dhparam ffdhe2048]" \
       "[--workers N] | $0 reload DIR | $0 stop DIR" >&2
  exit 2
}
die() { echo "nginx-target: $*" >&2; exit 1; }
# The first serious line of the error log names the cause; later ones tend to be follow-ups.
log_cause() { grep -m1 -E '\[(emerg|alert|crit)\]' "$1/error.log" || tail -n 1 "$1/error.log"; }

# Prints the master pid recorded in DIR if that process is still our nginx (guards against pid reuse).
running_pid() {
  local pid
  pid=$(cat "$1/nginx.pid" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "-p $1 -e " || return 1
  echo "$pid"
}

# A zombie counts as gone: our init may reap the daemonised master only after a while.
alive() {
  local p s
  for p in "$@"; do s=$(ps -o stat= -p "$p") && [[ $s != Z* ]] && return 0; done
  return 1
}

# Waits up to $1 tenths of a second for all given pids to exit.
wait_gone() {
  local n=$1; shift
  while ((n-- > 0)); do alive "$@" || return 0; sleep 0.1; done
  ! alive "$@"
}

stop() {
  local dir=$1 pid kids
  pid=$(running_pid "$dir") || return 0
  # Workers are collected first so that none is orphaned if the master has to be killed.
  kids=$(pgrep -P "$pid" | tr '\n' ' ' || true)
  kill -QUIT "$pid" 2>/dev/null || true
  wait_gone 50 "$pid" $kids && return 0
  kill -TERM "$pid" $kids 2>/dev/null || true
  wait_gone 20 "$pid" $kids && return 0
  kill -KILL "$pid" $kids 2>/dev/null || true
  wait_gone 20 "$pid" $kids || die "could not stop nginx $pid"
}

start() {
  local dir=$1 port=$2 pid; shift 2
  local protocols="TLSv1.2 TLSv1.3" cache=off tickets=off ticket_key="" cert=rsa2048 cert_from="" ciphers="" dhparam=""
  local workers=1
  while (($#)); do
    (($# >= 2)) || usage
    case $1 in
      --protocols) protocols=$2 ;;
      --session-cache) [[ $2 =~ ^(on|off|builtin:[1-9][0-9]*)$ ]] || usage; cache=$2 ;;
      --tickets) [[ $2 =~ ^(on|off)$ ]] || usage; tickets=$2 ;;
      --ticket-key) [[ -f $2 ]] || die "no ticket key file $2"; ticket_key=$(cd "$(dirname "$2")" && pwd)/$(basename "$2") ;;
      --cert) [[ $2 =~ ^(rsa2048|rsa3072|ecdsa-p256)$ ]] || usage; cert=$2 ;;
      # Another instance's certificate and key: the same server behind a balancer (sessions are bound to it).
      --cert-from) [[ -f $2/cert.pem && -f $2/key.pem ]] || die "no cert.pem and key.pem in $2"; cert_from=$2 ;;
      --ciphers) ciphers=$2 ;;
      --dhparam) [[ $2 == ffdhe2048 ]] || usage; dhparam=$2 ;;
      --workers) [[ $2 =~ ^[1-9][0-9]*$ ]] || usage; workers=$2 ;;
      *) usage ;;
    esac
    shift 2
  done
  [[ $port =~ ^[1-9][0-9]*$ ]] && ((port < 65536)) || usage
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if pid=$(running_pid "$dir"); then die "nginx $pid already runs in $dir; stop it first"; fi

  local keyopts=(rsa:2048)
  [[ $cert == rsa3072 ]] && keyopts=(rsa:3072)
  [[ $cert == ecdsa-p256 ]] && keyopts=(ec -pkeyopt ec_paramgen_curve:P-256)
  if [[ -n $cert_from ]]; then
    cp "$cert_from/cert.pem" "$cert_from/key.pem" "$dir/"
  else
    openssl req -x509 -newkey "${keyopts[@]}" -nodes -days 30 -subj /CN=localhost \
      -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
      -keyout "$dir/key.pem" -out "$dir/cert.pem" 2>"$dir/openssl.log" || die "openssl req failed: $(tail -n 3 "$dir/openssl.log")"
  fi
  [[ -z $dhparam ]] || openssl genpkey -genparam -algorithm DH -pkeyopt group:ffdhe2048 -out "$dir/dhparam.pem" 2>>"$dir/openssl.log" \
    || die "openssl genpkey failed: $(tail -n 3 "$dir/openssl.log")"
  local optional=""
  [[ -z $ciphers ]] || optional+="ssl_ciphers \"$ciphers\";"
  [[ -z $dhparam ]] || optional+="${optional:+ }ssl_dhparam $dir/dhparam.pem;"
  [[ -z $ticket_key ]] || optional+="${optional:+ }ssl_session_ticket_key $ticket_key;"
  local cache_conf=off
  [[ $cache == on ]] && cache_conf=shared:SSL:10m
  [[ $cache == builtin:* ]] && cache_conf=$cache
  truncate -s 4M "$dir/big.bin"
  : >"$dir/error.log"

  cat >"$dir/nginx.conf" <<EOF
daemon on;
master_process on;
worker_processes $workers;
pid $dir/nginx.pid;
error_log $dir/error.log;
$( ((EUID == 0)) && echo "user root;  # workers must read DIR, which may be private (e.g. mktemp -d)" )

events { worker_connections 1024; }

http {
    access_log off;
    client_body_temp_path $dir/client_body_temp;
    proxy_temp_path $dir/proxy_temp;
    fastcgi_temp_path $dir/fastcgi_temp;
    uwsgi_temp_path $dir/uwsgi_temp;
    scgi_temp_path $dir/scgi_temp;

    server {
        listen 127.0.0.1:$port ssl;
        ssl_certificate $dir/cert.pem;
        ssl_certificate_key $dir/key.pem;
        ssl_protocols $protocols;
        ssl_session_cache $cache_conf;
        ssl_session_tickets $tickets;
        $optional
        keepalive_requests 100000;

        location / { return 200 "ok\n"; }
        location = /big { default_type application/octet-stream; alias $dir/big.bin; }
    }
}
EOF

  # With -e nginx also logs its startup errors to error.log, so its stderr holds nothing extra.
  "${NGINX_BIN:-/usr/sbin/nginx}" -c "$dir/nginx.conf" -p "$dir" -e "$dir/error.log" 2>/dev/null \
    || die "nginx failed to start: $(log_cause "$dir")"
  local n=50
  until pid=$(running_pid "$dir") && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    ((n-- > 0)) || { stop "$dir"; die "nginx not accepting on 127.0.0.1:$port after 5 s: $(log_cause "$dir")"; }
    sleep 0.1
  done
  echo "$pid"
}

# Reloads the configuration as `nginx -s reload` does (new workers; the old ones finish their connections)
# and waits until the old workers have gone.
reload() {
  local dir=$1 pid old
  pid=$(running_pid "$dir") || die "no nginx runs in $dir"
  old=$(pgrep -P "$pid" | tr '\n' ' ' || true)
  kill -HUP "$pid"
  wait_gone 100 $old || die "nginx's old workers ($old) still run 10 s after the reload"
}

case ${1:-} in
  start) (($# >= 3)) || usage; start "${@:2}" ;;
  reload) (($# == 2)) || usage; reload "$(cd "$2" && pwd)" ;;
  stop) (($# == 2)) || usage; [[ -d $2 ]] || exit 0; stop "$(cd "$2" && pwd)" ;;
  *) usage ;;
esac
