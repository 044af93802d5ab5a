#!/usr/bin/env bash
# A TLS connection storm: N clients connect to the proxy at the same moment (h2load -c N), each sends one request over
# HTTP/2 + TLS and leaves, as when every client of a restarted proxy reconnects at once. Prints h2load's summary, the
# wall time, and the proxy's handshakes by outcome (kestrel.tls_handshake.duration's count: ok, timeout, errors).
#
#   benchmarks/tls-storm.sh [--connections 15000] [--host-dll PATH] [--no-build] [KEY=VALUE ...]
#
# KEY=VALUE pairs go to the proxy's environment (e.g. ProxyServer__Sockets__Engine=Runtime). h2load needs a file
# descriptor per connection: the script raises its soft limit to the hard one.
# Ports: 19101/19102 (backend), 18443 (proxy), 9911 (the proxy's admin endpoint).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

CONNECTIONS=15000; BUILD=1; HOST_DLL=''; ENVS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --connections) CONNECTIONS=$2; shift 2 ;;
    --host-dll) HOST_DLL=$2; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    *=*) ENVS+=("$1"); shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
command -v h2load >/dev/null || { echo "h2load is missing (Debian: apt-get install nghttp2-client)" >&2; exit 1; }
ulimit -n "$(ulimit -Hn)"

LOAD="$ROOT/benchmarks/Proxy.Load/bin/Release/net10.0/Proxy.Load.dll"
HOST=${HOST_DLL:-"$ROOT/src/Proxy.Host/bin/Release/net10.0/Proxy.Host.dll"}
source "$ROOT/benchmarks/lib/proxy-bench.sh"
bench_build

bench_workdir tls-storm

bench_certificate
cat > "$WORK/proxy.json" <<'JSON'
{ "Logging": { "LogLevel": { "Default": "Warning" } }, "Demo": { "Enabled": false },
  "ReverseProxy": {
    "Routes": { "all": { "ClusterId": "c", "Match": { "Path": "/{**catch-all}" } } },
    "Clusters": { "c": { "HttpRequest": { "Version": "2", "VersionPolicy": "RequestVersionExact" },
      "Destinations": { "d1": { "Address": "http://127.0.0.1:19102/" } } } } } }
JSON

dotnet "$LOAD" serve --server proxy --urls http://127.0.0.1:19101 --h2c-port 19102 >"$WORK/backend.log" 2>&1 &
PIDS+=($!)
env "${ENVS[@]}" dotnet "$HOST" --config "$WORK/proxy.json" --urls "https://127.0.0.1:18443" \
  --ProxyServer:DevelopmentCertificateDirectory="$WORK/cert" --Admin:Url=http://127.0.0.1:9911 >"$WORK/proxy.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 60); do
  grep -q "ready" "$WORK/backend.log" 2>/dev/null && curl -sk -o /dev/null https://127.0.0.1:18443/size/10 2>/dev/null && break
  sleep 0.5
done
# Code tiered up and the backend connection open before the storm.
h2load -c 200 -n 4000 https://127.0.0.1:18443/size/10 >/dev/null 2>&1

START=$(date +%s%N)
h2load -c "$CONNECTIONS" -n "$CONNECTIONS" -m 1 https://127.0.0.1:18443/size/10 >"$WORK/h2load.txt" 2>&1 || true
END=$(date +%s%N)
grep -E "^finished in|^requests:" "$WORK/h2load.txt"
echo "wall $(( (END - START) / 1000000 )) ms for $CONNECTIONS connections (env: ${ENVS[*]:-none})"
# Handshakes since the proxy started (the 200 warm-up connections among the ok ones), by outcome.
curl -s http://127.0.0.1:9911/metrics | grep -E '^kestrel_tls_handshake_duration_seconds_count' \
  | sed -E 's/.*error_type="([^"]*)".*\} ([0-9]+).*/handshakes \1 \2/; s/.*tls_protocol_version="[^"]*".*\} ([0-9]+).*/handshakes ok \1/'
