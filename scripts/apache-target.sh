#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Starts/stops a throwaway loopback HTTPS Apache httpd (Debian's apache2, mod_ssl) whose files all live in one
# directory, for tests: a server whose handshakes mod_ssl drives with SSL_accept.
set -euo pipefail

usage() {
  echo "usage: $0 start DIR PORT [--mpm event|prefork] [--cert rsa2048|ecdsa-p256] | $0 stop DIR" >&2
  exit 2
}
die() { echo "apache-target: $*" >&2; exit 1; }
log_cause() { grep -m1 -E ':(emerg|alert|crit)\]' "$1/error.log" || tail -n 1 "$1/error.log"; }

# Prints the parent pid recorded in DIR if that process is still our httpd (guards against pid reuse).
running_pid() {
  local pid
  pid=$(cat "$1/httpd.pid" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "-f $1/httpd.conf" || return 1
  echo "$pid"
}

alive() {
  local p s
  for p in "$@"; do s=$(ps -o stat= -p "$p") && [[ $s != Z* ]] && return 0; done
  return 1
}

wait_gone() {
  local n=$1; shift
  while ((n-- > 0)); do alive "$@" || return 0; sleep 0.1; done
  ! alive "$@"
}

stop() {
  local dir=$1 pid kids
  pid=$(running_pid "$dir") || return 0
  kids=$(pgrep -P "$pid" | tr '\n' ' ' || true)
  kill -TERM "$pid" 2>/dev/null || true
  wait_gone 50 "$pid" $kids && return 0
  kill -KILL "$pid" $kids 2>/dev/null || true
  wait_gone 20 "$pid" $kids || die "could not stop httpd $pid"
}

start() {
  local dir=$1 port=$2 pid mpm=event cert=ecdsa-p256; shift 2
  while (($#)); do
    (($# >= 2)) || usage
    case $1 in
      --mpm) [[ $2 =~ ^(event|prefork)$ ]] || usage; mpm=$2 ;;
      --cert) [[ $2 =~ ^(rsa2048|ecdsa-p256)$ ]] || usage; cert=$2 ;;
      *) usage ;;
    esac
    shift 2
  done
  [[ $port =~ ^[1-9][0-9]*$ ]] && ((port < 65536)) || usage
  [[ -x /usr/sbin/apache2 ]] || die "no /usr/sbin/apache2: install Debian's apache2"
  mkdir -p "$dir/www"
  dir=$(cd "$dir" && pwd)
  if pid=$(running_pid "$dir"); then die "httpd $pid already runs in $dir; stop it first"; fi

  local keyopts=(rsa:2048)
  [[ $cert == ecdsa-p256 ]] && keyopts=(ec -pkeyopt ec_paramgen_curve:P-256)
  openssl req -x509 -newkey "${keyopts[@]}" -nodes -days 30 -subj /CN=localhost \
    -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
    -keyout "$dir/key.pem" -out "$dir/cert.pem" 2>"$dir/openssl.log" || die "openssl req failed: $(tail -n 3 "$dir/openssl.log")"
  echo ok >"$dir/www/index.html"
  : >"$dir/error.log"
  # The children run as the starting user's account when it is not root (httpd refuses to switch then).
  local user=daemon group=daemon
  ((EUID == 0)) || { user=$(id -un); group=$(id -gn); }
  chmod o+rx "$dir" "$dir/www"
  chmod o+r "$dir/www/index.html"

  local mpm_conf="StartServers 1
ServerLimit 1
ThreadsPerChild 64
MaxRequestWorkers 64"
  [[ $mpm == prefork ]] && mpm_conf="StartServers 4
MinSpareServers 4
MaxSpareServers 8
MaxRequestWorkers 16"

  cat >"$dir/httpd.conf" <<EOF
ServerRoot /usr/lib/apache2
ServerName localhost
Listen 127.0.0.1:$port
PidFile $dir/httpd.pid
ErrorLog $dir/error.log
LogLevel warn
DefaultRuntimeDir $dir
Mutex file:$dir default
User $user
Group $group
LoadModule mpm_${mpm}_module modules/mod_mpm_${mpm}.so
LoadModule authz_core_module modules/mod_authz_core.so
LoadModule mime_module modules/mod_mime.so
LoadModule socache_shmcb_module modules/mod_socache_shmcb.so
LoadModule ssl_module modules/mod_ssl.so
TypesConfig /etc/mime.types
$mpm_conf
KeepAlive On
DocumentRoot $dir/www
<Directory $dir/www>
    Require all granted
</Directory>
SSLEngine on
SSLCertificateFile $dir/cert.pem
SSLCertificateKeyFile $dir/key.pem
SSLProtocol -all +TLSv1.2 +TLSv1.3
SSLSessionCache shmcb:$dir/ssl_scache(512000)
SSLRandomSeed startup builtin
EOF

  /usr/sbin/apache2 -f "$dir/httpd.conf" -k start 2>"$dir/start.log" \
    || die "httpd failed to start: $(cat "$dir/start.log") $(log_cause "$dir")"
  local n=50
  until pid=$(running_pid "$dir") && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    ((n-- > 0)) || { stop "$dir"; die "httpd not accepting on 127.0.0.1:$port after 5 s: $(log_cause "$dir")"; }
    sleep 0.1
  done
  echo "$pid"
}

case ${1:-} in
  start) (($# >= 3)) || usage; start "${@:2}" ;;
  stop) (($# == 2)) || usage; [[ -d $2 ]] || exit 0; stop "$(cd "$2" && pwd)" ;;
  *) usage ;;
esac
