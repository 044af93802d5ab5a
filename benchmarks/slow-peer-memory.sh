#!/usr/bin/env bash
# Proxy memory with a slow peer (issue 9): a large download to a client that reads slowly, and a large upload to a
# backend that reads slowly, through our proxy (Proxy.Host, native relay) with TLS in front (curl, HTTP/2) and both
# an HTTP/1.1 and an h2c backend behind. The four transfers run at once; the proxy's RSS is sampled every second.
# With flow control coupled end to end the proxy holds about two stream windows per transfer whatever the size, so
# its RSS must not grow with the bytes moved.
#
#   benchmarks/slow-peer-memory.sh [--size 1073741824] [--rate 1048576] [--sample-seconds 0] [--transfers LIST] [--no-build]
#
# --size bytes per transfer, --rate the slow side's bytes/s (curl --limit-rate for downloads, the backend's
# POST /sink?rate= for uploads). At the defaults each transfer takes about 17 minutes. --sample-seconds N stops the
# transfers after N seconds (0: let them finish). --transfers picks some of down-h1,down-h2,up-h1,up-h2 (default all,
# at once). The proxy's environment passes through (e.g. DOTNET_gcServer=1). Ports: 19201/19202 (backend), 18543 (proxy).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

SIZE=1073741824; RATE=1048576; SAMPLE=0; BUILD=1; TRANSFERS="down-h1,down-h2,up-h1,up-h2"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --size) SIZE=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --sample-seconds) SAMPLE=$2; shift 2 ;;
    --transfers) TRANSFERS=$2; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
command -v curl >/dev/null || { echo "needs curl" >&2; exit 1; }

LOAD="$ROOT/benchmarks/Proxy.Load/bin/Release/net10.0/Proxy.Load.dll"
HOST="$ROOT/src/Proxy.Host/bin/Release/net10.0/Proxy.Host.dll"
source "$ROOT/benchmarks/lib/proxy-bench.sh"
bench_build

bench_workdir slow-peer

bench_certificate
cat > "$WORK/proxy.json" <<'JSON'
{ "Logging": { "LogLevel": { "Default": "Warning" } }, "Demo": { "Enabled": false },
  "ReverseProxy": {
    "Routes": {
      "h1": { "ClusterId": "h1", "Match": { "Path": "/h1/{**rest}" }, "Transforms": [ { "PathRemovePrefix": "/h1" } ] },
      "h2": { "ClusterId": "h2", "Match": { "Path": "/h2/{**rest}" }, "Transforms": [ { "PathRemovePrefix": "/h2" } ] } },
    "Clusters": {
      "h1": { "HttpRequest": { "Version": "1.1" }, "Destinations": { "d1": { "Address": "http://127.0.0.1:19201/" } } },
      "h2": { "HttpRequest": { "Version": "2", "VersionPolicy": "RequestVersionExact" },
        "Destinations": { "d1": { "Address": "http://127.0.0.1:19202/" } } } } } }
JSON

dotnet "$LOAD" serve --server kestrel --urls http://127.0.0.1:19201 --h2c-port 19202 >"$WORK/backend.log" 2>&1 &
PIDS+=($!)
# Request bodies of any size: the server's default limit is 30 MB, as on Kestrel.
dotnet "$HOST" --config "$WORK/proxy.json" --urls "https://127.0.0.1:18543" \
  --ProxyServer:DevelopmentCertificateDirectory="$WORK/cert" --ProxyServer:MaxRequestBodySize=1000000000000000 >"$WORK/proxy.log" 2>&1 &
PROXY=$!; PIDS+=($PROXY)
for _ in $(seq 1 60); do
  curl -sk -o /dev/null https://127.0.0.1:18543/h1/size/10 2>/dev/null && curl -sk -o /dev/null https://127.0.0.1:18543/h2/size/10 2>/dev/null && break
  sleep 0.5
done
rss() { awk '/VmRSS/{print $2}' "/proc/$PROXY/status"; }
# One small transfer each way first, so the idle figure includes warmed-up (JIT-compiled) code and the pools' first blocks.
head -c 65536 /dev/zero | curl -sk --http2 -o /dev/null -X POST -T - https://127.0.0.1:18543/h1/sink
head -c 65536 /dev/zero | curl -sk --http2 -o /dev/null -X POST -T - https://127.0.0.1:18543/h2/sink
curl -sk --http2 -o /dev/null https://127.0.0.1:18543/h1/stream/1048576
curl -sk --http2 -o /dev/null https://127.0.0.1:18543/h2/stream/1048576
IDLE=$(rss)

CURLS=()
for b in h1 h2; do
  if [[ ",$TRANSFERS," == *",down-$b,"* ]]; then
  curl -sk --http2 --limit-rate "$RATE" -o /dev/null -w "download via $b backend: %{size_download} bytes, HTTP %{http_code}, %{time_total} s\n" \
    "https://127.0.0.1:18543/$b/stream/$SIZE" >"$WORK/down-$b.out" 2>&1 &
  CURLS+=($!)
  fi
  if [[ ",$TRANSFERS," == *",up-$b,"* ]]; then
  # An upload of unknown length (DATA frames until END_STREAM; chunked towards the HTTP/1.1 backend).
  (head -c "$SIZE" /dev/zero | curl -sk --http2 -o "$WORK/up-$b.body" -X POST -T - -w "upload via $b backend: HTTP %{http_code}, %{time_total} s, " \
    "https://127.0.0.1:18543/$b/sink?rate=$RATE" >"$WORK/up-$b.out" 2>&1; echo "backend read $(cat "$WORK/up-$b.body" 2>/dev/null | tr -d '\n') bytes" >>"$WORK/up-$b.out") &
  CURLS+=($!)
  fi
done
PIDS+=("${CURLS[@]}")

START=$SECONDS PEAK=0 SAMPLES=()
running() { local p; for p in "${CURLS[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
while running; do
  r=$(rss); (( r > PEAK )) && PEAK=$r; SAMPLES+=("$r")
  if (( SAMPLE > 0 && SECONDS - START >= SAMPLE )); then
    echo "stopping the transfers after ${SAMPLE} s (--sample-seconds)"
    for p in "${CURLS[@]}"; do pkill -P "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
    break
  fi
  sleep 1
done
for p in "${CURLS[@]}"; do wait "$p" 2>/dev/null || true; done
cat "$WORK"/down-*.out "$WORK"/up-*.out 2>/dev/null || true  # only the transfers that ran have files
echo "${#CURLS[@]} transfers ($TRANSFERS) of ${SIZE} bytes at ${RATE} B/s, $((SECONDS - START)) s: proxy RSS idle ${IDLE} kB, peak ${PEAK} kB, growth $((PEAK - IDLE)) kB"
# Warm-up (the first transfers fill the pools) against accumulation: RSS a tenth of the way in and at the end.
n=${#SAMPLES[@]}
if (( n >= 10 )); then
  echo "RSS at 10% of the run ${SAMPLES[$((n / 10))]} kB, at 50% ${SAMPLES[$((n / 2))]} kB, last ${SAMPLES[$((n - 1))]} kB"
fi
