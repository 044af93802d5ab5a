#!/usr/bin/env bash
# Latency at low load: one request at a time through nghttpx and through our proxy (Proxy.Host, direct path), measured
# in turn round by round against one Kestrel backend. Per round and target: gRPC unary 1x1 with Grpc.Net.Client
# (Proxy.Load: RPS, p50 and p99 in ms), then GET /size/1024 with h2load -c1 -m1 over h2c and HTTP/1.1 (mean per request).
# At one request at a time the cost is the threads a request wakes, not the work: this is where hops show.
#
#   benchmarks/latency-1x1.sh [ROUNDS]        (default 3; needs a Release build: dotnet build -c Release)
#
# Ports: 19001/19002 (backend), nghttpx 18080 (h1) / 18081 (h2c), ours 18090 / 18091, admin 9902.
set -euo pipefail
ROUNDS=${1:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d /tmp/latency-1x1.XXXXXX)
LOAD=$ROOT/benchmarks/Proxy.Load/bin/Release/net10.0/Proxy.Load.dll
HOST=$ROOT/src/Proxy.Host/bin/Release/net10.0/Proxy.Host.dll
pids=()
cleanup() { for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done; rm -rf "$W"; }
trap cleanup EXIT
export DOTNET_CLI_TELEMETRY_OPTOUT=1 ASPNETCORE_ENVIRONMENT=Production
sed -e "s#@BH1@#19001#g" -e "s#@BH2C@#19002#g" "$ROOT/benchmarks/peers/proxy.json" > "$W/proxy.json"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$W/key.pem" -out "$W/cert.pem" -days 2 -subj /CN=localhost >/dev/null 2>&1
sed -e "s#@H1@#18080#" -e "s#@H2C@#18081#" -e "s#@TLS@#18083#" -e "s#@BH1@#19001#g" -e "s#@BH2C@#19002#g" \
    -e "s#@KEY@#$W/key.pem#" -e "s#@CERT@#$W/cert.pem#" -e "s#@TMP@#$W#g" "$ROOT/benchmarks/peers/nghttpx.conf" > "$W/nghttpx.conf"
setsid dotnet "$LOAD" serve --server kestrel --urls http://127.0.0.1:19001 --h2c-port 19002 > "$W/backend.log" 2>&1 < /dev/null & pids+=($!)
setsid nghttpx --conf="$W/nghttpx.conf" > "$W/nghttpx.log" 2>&1 < /dev/null & pids+=($!)
Admin__Url=http://127.0.0.1:9902 setsid dotnet "$HOST" --config "$W/proxy.json" --urls "http://127.0.0.1:18090;http://127.0.0.1:18091" \
    --DirectPath:Enabled=true > "$W/ours.log" 2>&1 < /dev/null & pids+=($!)
for p in 19001 19002 18080 18081 18090 18091; do until (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null; do sleep 0.2; done; done
# Priming: .NET code is measured after it tiered up.
for u in 18081 18091; do
  h2load -c16 -m16 -D 8 "http://127.0.0.1:$u/size/1024" > /dev/null 2>&1
  dotnet "$LOAD" run --scenario grpcnet-unary --url "http://127.0.0.1:$u" --connections 1 --streams 70 --warmup 1 --duration 8 --no-progress > /dev/null 2>&1
done
for r in $(seq "$ROUNDS"); do for u in 18081 18091; do
  name=$([[ $u == 18081 ]] && echo nghttpx || echo ours)
  g=$(dotnet "$LOAD" run --scenario grpcnet-unary --url "http://127.0.0.1:$u" --connections 1 --streams 1 --warmup 1 --duration 4 --no-progress --no-header 2>&1 \
      | grep target | awk -F'|' '{print "grpc1x1 rps", $7, "p50", $9, "p99", $11}')
  h=$(h2load -c1 -m1 -D 4 --warm-up-time=1 "http://127.0.0.1:$u/size/1024" 2>&1 | grep -E "time for request" | awk '{print "h2c1x1 mean", $6}')
  h1=$(h2load --h1 -c1 -m1 -D 4 --warm-up-time=1 "http://127.0.0.1:$((u - 1))/size/1024" 2>&1 | grep -E "time for request" | awk '{print "h1 1x1 mean", $6}')
  echo "round $r $name $g $h $h1"
done; done
