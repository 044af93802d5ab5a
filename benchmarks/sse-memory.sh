#!/usr/bin/env bash
# Memory per proxied SSE stream: our proxy (Proxy.Host, native relay) with TLS in front and an h2c backend behind,
# N connections x S streams, 1 event per second per stream. Prints the proxy's RSS before the streams, its peak and
# its last sample while they are open, and (RSS - idle RSS) / streams, TLS and everything else included.
#
#   benchmarks/sse-memory.sh [--connections 2000] [--streams 10] [--warmup 40] [--duration 30] [--no-build]
#                            [--every SECONDS] [--ramp SECONDS] [--host-dll PATH]
#
# --every S: one event every S seconds per stream instead of one a second (quiet streams: 100,000 streams at one event
# a second are more events than 2 cores running the client, the backend and the proxy can carry). --ramp S: the client's
# connections start evenly over S seconds (users arriving) instead of all at once.
#
# Also prints the mean of the RSS samples (one a second) over the measured period: a peak or a last sample depends on
# where the GC's collections fall, the mean much less. --host-dll runs another build's Proxy.Host.dll (e.g. a
# `git worktree` build of an older commit), to alternate two builds run by run.
#
# The proxy's environment passes through (e.g. DOTNET_gcServer=0 to try the workstation GC). Ports: 19101/19102
# (backend), 18443 (proxy). The backend and the client are benchmarks/Proxy.Load (`serve`, `run --scenario sse`).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

CONNECTIONS=2000; STREAMS=10; WARMUP=40; DURATION=30; BUILD=1; HOST_DLL=''; PACE=(--rate 1); RAMP=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --connections) CONNECTIONS=$2; shift 2 ;;
    --streams) STREAMS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    --host-dll) HOST_DLL=$2; shift 2 ;;
    --every) PACE=(--every "$2"); shift 2 ;;
    --ramp) RAMP=(--ramp "$2"); shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

LOAD="$ROOT/benchmarks/Proxy.Load/bin/Release/net10.0/Proxy.Load.dll"
HOST=${HOST_DLL:-"$ROOT/src/Proxy.Host/bin/Release/net10.0/Proxy.Host.dll"}
source "$ROOT/benchmarks/lib/proxy-bench.sh"
bench_build

bench_workdir sse-memory

bench_certificate
cat > "$WORK/proxy.json" <<'JSON'
{ "Logging": { "LogLevel": { "Default": "Warning" } }, "Demo": { "Enabled": false },
  "ProxyServer": { "AddServerHeader": false },
  "ReverseProxy": {
    "Routes": { "sse": { "ClusterId": "sse", "Match": { "Path": "/{**catch-all}" } } },
    "Clusters": { "sse": { "HttpRequest": { "Version": "2", "VersionPolicy": "RequestVersionExact" },
      "Destinations": { "d1": { "Address": "http://127.0.0.1:19102/" } } } } } }
JSON

dotnet "$LOAD" serve --server proxy --urls http://127.0.0.1:19101 --h2c-port 19102 --sse-rate 1 >"$WORK/backend.log" 2>&1 &
PIDS+=($!)
# Admin endpoint off, as in run-comparison.sh: the measurement is the proxy's own memory per stream.
dotnet "$HOST" --config "$WORK/proxy.json" --urls "https://127.0.0.1:18443" \
  --ProxyServer:DevelopmentCertificateDirectory="$WORK/cert" --Admin:Enabled=false >"$WORK/proxy.log" 2>&1 &
PROXY=$!; PIDS+=($PROXY)
for _ in $(seq 1 60); do
  grep -q "ready" "$WORK/backend.log" 2>/dev/null && curl -sk -o /dev/null https://127.0.0.1:18443/ 2>/dev/null && break
  sleep 0.5
done
rss() { awk '/VmRSS/{print $2}' "/proc/$PROXY/status"; }
IDLE=$(rss)

dotnet "$LOAD" run --scenario sse --url https://127.0.0.1:18443 --connections "$CONNECTIONS" --streams "$STREAMS" \
  "${PACE[@]}" "${RAMP[@]}" --warmup "$WARMUP" --duration "$DURATION" --target-pid "$PROXY" --no-progress --label proxy >"$WORK/run.out" 2>"$WORK/run.err" &
CLIENT=$!; PIDS+=($CLIENT)
PEAK=0; LAST=0; PREV=0; MEASURED=()
MEASURE_FROM=$((SECONDS + WARMUP))
while kill -0 "$CLIENT" 2>/dev/null; do
  r=$(rss); (( r > PEAK )) && PEAK=$r; LAST=$PREV; PREV=$r
  (( SECONDS >= MEASURE_FROM )) && MEASURED+=("$r")
  sleep 1
done
CLEAN=1
wait "$CLIENT" || CLEAN=0
tail -1 "$WORK/run.out"
N=$((CONNECTIONS * STREAMS))
# the mean of the measured period's samples but the last one (taken as the client may be closing its streams)
MEAN=$LAST; COUNT=$(( ${#MEASURED[@]} - 1 ))
(( COUNT > 0 )) && MEAN=$(( ($(IFS=+; echo "${MEASURED[*]:0:COUNT}")) / COUNT ))
echo "streams $N: proxy RSS idle ${IDLE} kB, peak ${PEAK} kB ($(( (PEAK - IDLE) * 1024 / N )) B per stream), last ${LAST} kB ($(( (LAST - IDLE) * 1024 / N )) B per stream), mean ${MEAN} kB over ${COUNT} samples ($(( (MEAN - IDLE) * 1024 / N )) B per stream)"
# A run with failed requests, lost events or reconnects still prints its figures above, then fails.
(( CLEAN == 1 )) || { cat "$WORK/run.err" >&2; echo "the SSE run was not clean (failed requests, lost events or reconnects)" >&2; exit 1; }
