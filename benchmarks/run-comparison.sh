#!/usr/bin/env bash
# The side-by-side comparison (issue 4): starts each target in turn on 127.0.0.1, runs the same scenarios
# against it with the same client, stops it, and writes benchmarks/results/<date>-comparison.{md,json}.
# See benchmarks/README.md for prerequisites, targets and fairness notes.
#
#   benchmarks/run-comparison.sh [--quick] [--only T1,T2] [--scenarios S1,S2] [--duration SEC] [--prime SEC] [--no-build]
#
# Targets: server-ours server-kestrel (the same app on our server / on Kestrel); proxy-ours (native relay, as it
# starts: since session 25 with the direct path on) proxy-ours-direct (DirectPath:Enabled=true named: the same today)
# proxy-ours-pipeline (DirectPath:Enabled=false: every request through the ASP.NET Core pipeline)
# proxy-ours-httpclient (the same, clusters on "Transport": "HttpClient") proxy-ours-kestrel
# proxy-yarp nginx haproxy h2o nghttpx (in front of the Kestrel backend); static-ours static-kestrel static-nginx
# (10 MB file).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PEERS="$ROOT/benchmarks/peers"
RESULTS="$ROOT/benchmarks/results"

QUICK=0 ONLY="" SCENARIOS="" DURATION="" PRIME="" BUILD=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=1; shift ;;
    --only) ONLY="$2"; shift 2 ;;
    --scenarios) SCENARIOS="$2"; shift 2 ;;
    --duration) DURATION="$2"; shift 2 ;;
    --prime) PRIME="$2"; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

# Ports: the target's front listeners and the backend (all loopback).
H1=18080 H2C=18081 TLS=18443 BH1=19001 BH2C=19002
WARMUP=2
if [[ -z "$DURATION" ]]; then DURATION=10; [[ $QUICK == 1 ]] && DURATION=3; fi
[[ $QUICK == 1 ]] && WARMUP=1
# Priming pass: before its measured runs, every target (and, for proxies, its fresh backend) runs each of its
# scenarios once for PRIME seconds, results discarded. .NET tiers its code up (tier 0 -> instrumented -> tier 1)
# only after every hot path has run for a while; a 2 s warm-up per scenario measured tier-0 code for the first
# scenarios of the .NET targets (our server at 3x Kestrel's cost on gRPC 1x1, at par once warm). 0 disables it.
if [[ -z "$PRIME" ]]; then PRIME=3; [[ $QUICK == 1 ]] && PRIME=1; fi
READY_TIMEOUT=30              # seconds a target has to open its ports
RUN_TIMEOUT=$((DURATION + WARMUP + 30))  # hard cap on one h2load run

ALL_TARGETS="server-ours server-kestrel proxy-ours proxy-ours-direct proxy-ours-pipeline proxy-ours-httpclient proxy-ours-kestrel proxy-yarp nginx haproxy h2o nghttpx static-ours static-kestrel static-nginx"
# Scenario table: name|client|protocol (h1, h1-tls, h2c, h2)|what|body|connections|streams per connection|extra flags
#   client h2load: what = the path, body = - or a file key (post1k, grpc), extra = h2load flags
#   client load (benchmarks/Proxy.Load `run`: gRPC with Grpc.Net.Client, and SSE): what = its --scenario, extra = more
#   of its options. grpcnet-* drive the gRPC BenchmarkService as crank's gRPC client does (a GrpcChannel per connection).
#   NOTE: server streaming runs after ping-pong: once its client leaves, Kestrel sometimes keeps both cores busy for good
#   (README, "gRPC with Grpc.Net.Client"), and every row after it on that target starved.
SCENARIO_TABLE="
get-100b-h1|h2load|h1|/size/100|-|64|1|
get-100b-h2c|h2load|h2c|/size/100|-|16|16|
get-100b-h2|h2load|h2|/size/100|-|16|16|
get-1k-h1|h2load|h1|/size/1024|-|64|1|
get-1k-h1-tls|h2load|h1-tls|/size/1024|-|64|1|
get-1k-h2c|h2load|h2c|/size/1024|-|16|16|
get-1k-h2|h2load|h2|/size/1024|-|16|16|
get-10k-h2c|h2load|h2c|/size/10240|-|16|16|
get-10k-h2|h2load|h2|/size/10240|-|16|16|
get-10k-h2c-w16|h2load|h2c|/size/10240|-|16|16|-w16 -W16
get-100k-h1|h2load|h1|/size/102400|-|16|1|
get-100k-h2c|h2load|h2c|/size/102400|-|8|8|
get-100k-h2|h2load|h2|/size/102400|-|8|8|
get-100k-h2c-w16|h2load|h2c|/size/102400|-|8|8|-w16 -W16
get-100k-h2-w16|h2load|h2|/size/102400|-|8|8|-w16 -W16
post-1k-h1|h2load|h1|/echo|post1k|64|1|
post-1k-h2c|h2load|h2c|/echo|post1k|16|16|
post-1k-h2c-w16|h2load|h2c|/echo|post1k|16|16|-w16 -W16
grpc-unary-h2load-16x16-h2c|h2load|h2c|/grpc.testing.BenchmarkService/UnaryCall|grpc|16|16|
grpcnet-unary-1x1-h2c|load|h2c|grpcnet-unary|-|1|1|
grpcnet-unary-1x70-h2c|load|h2c|grpcnet-unary|-|1|70|
grpcnet-unary-1x70-h2|load|h2|grpcnet-unary|-|1|70|
grpcnet-unary-4x70-h2c|load|h2c|grpcnet-unary|-|4|70|
grpcnet-unary-4x70-h2|load|h2|grpcnet-unary|-|4|70|
grpcnet-pingpong-1x70-h2c|load|h2c|grpcnet-pingpong|-|1|70|
sse-10x50-h2c|load|h2c|sse|-|10|50|--rate 20
sse-10x50-h2|load|h2|sse|-|10|50|--rate 20
grpcnet-serverstreaming-1x70-h2c|load|h2c|grpcnet-serverstreaming|-|1|70|--payload 1024
static-10mb-h1|h2load|h1|/static/big.bin|-|8|1|
static-10mb-h1-tls|h2load|h1-tls|/static/big.bin|-|8|1|
static-10mb-h2c|h2load|h2c|/static/big.bin|-|8|1|
static-10mb-h2|h2load|h2|/static/big.bin|-|8|1|
"
QUICK_SCENARIOS="get-1k-h1,get-1k-h2c,get-1k-h2,get-100k-h2c-w16,post-1k-h2c,grpc-unary-h2load-16x16-h2c,grpcnet-unary-1x70-h2c,sse-10x50-h2c,static-10mb-h1,static-10mb-h2c,static-10mb-h2"

need() { command -v "$1" >/dev/null 2>&1; }
log() { printf '\033[1m==>\033[0m %s\n' "$*" >&2; }
for tool in h2load openssl python3 curl dotnet pgrep; do
  need "$tool" || { echo "missing $tool (see benchmarks/README.md, Prerequisites)" >&2; exit 2; }
done

STARTED=$(date +%s); STAMP=$(date -d "@$STARTED" +%Y-%m-%d-%H%M)   # the results file is named after the start of the run
WORK=$(mktemp -d /tmp/proxy-comparison.XXXXXX)
STARTED_GROUPS=()   # process-group ids we started (each target runs under setsid)
cleanup() {
  local g
  [[ -n "${WINDOW_PID:-}" ]] && kill "$WINDOW_PID" 2>/dev/null || true
  for g in "${STARTED_GROUPS[@]:-}"; do
    [[ -n "$g" ]] && kill -TERM -- "-$g" 2>/dev/null || true
  done
  sleep 0.5
  for g in "${STARTED_GROUPS[@]:-}"; do
    [[ -n "$g" ]] && kill -KILL -- "-$g" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- inputs: certificate, static file, request bodies ----------------------------------------------
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 -subj /CN=localhost \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
cat "$WORK/cert.pem" "$WORK/key.pem" > "$WORK/cert+key.pem"
openssl pkcs12 -export -in "$WORK/cert.pem" -inkey "$WORK/key.pem" -out "$WORK/cert.pfx" -passout pass:
mkdir -p "$WORK/static" "$WORK/ourcert"
cp "$WORK/cert.pfx" "$WORK/ourcert/dev-cert.pfx"   # Proxy.Host loads this as its certificate
head -c 10485760 /dev/urandom > "$WORK/static/big.bin"
# nginx workers and h2o drop root for nobody/www-data: they must be able to read the file and the dir.
chmod 755 "$WORK" "$WORK/static"; chmod 644 "$WORK/static/big.bin"
head -c 1024 /dev/zero | tr '\0' 'p' > "$WORK/post1k"
# One gRPC message: the 5-octet prefix (uncompressed, length 0) of an empty SimpleRequest (response_size 0).
printf '\0\0\0\0\0' > "$WORK/grpc"

# ---- build --------------------------------------------------------------------------------------------
APP_DLL="$PEERS/static-app/bin/Release/net10.0/StaticApp.dll"
YARP_DLL="$PEERS/yarp-app/bin/Release/net10.0/YarpApp.dll"
LOAD_PROJECT="$ROOT/benchmarks/Proxy.Load"
LOAD_DLL="$LOAD_PROJECT/bin/Release/net10.0/Proxy.Load.dll"
HAVE_LOAD=0; [[ -f "$LOAD_PROJECT/Proxy.Load.csproj" ]] && HAVE_LOAD=1
HOST_DLL="$ROOT/src/Proxy.Host/bin/Release/net10.0/Proxy.Host.dll"
if [[ $BUILD == 1 ]]; then
  log "building Release (Proxy.Host, static-app)"
  dotnet build -c Release "$ROOT/src/Proxy.Host" -v q -nologo >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; exit 1; }
  dotnet build -c Release "$PEERS/static-app" -v q -nologo >>"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; exit 1; }
  # YARP (Yarp.ReverseProxy 2.3.0, served by the package mirror like every other package): a failed build is an error,
  # never a silently skipped peer.
  dotnet build -c Release "$PEERS/yarp-app" -v q -nologo >>"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; exit 1; }
  if [[ $HAVE_LOAD == 1 ]]; then
    dotnet build -c Release "$LOAD_PROJECT" -v q -nologo >>"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; exit 1; }
  fi
fi
[[ $HAVE_LOAD == 1 && ! -f "$LOAD_DLL" ]] && HAVE_LOAD=0
# The app under test and behind the proxies: the harness's `serve` (gRPC BenchmarkService, /size, /echo, /sse)
# when benchmarks/Proxy.Load exists, otherwise static-app (same HTTP paths, a minimal UnaryCall, no streaming).
serve_app() { # serve_app ours|kestrel H1PORT H2CPORT TLSPORT(0 = none)
  if [[ $HAVE_LOAD == 1 ]]; then
    local server=$1; [[ $server == ours ]] && server=proxy
    local a=(serve --server "$server" --urls "http://127.0.0.1:$2" --h2c-port "$3")
    [[ $4 != 0 ]] && a+=(--https-port "$4")
    echo dotnet "$LOAD_DLL" "${a[@]}"
  else
    local a=(--server "$1" --h1 "$2" --h2c "$3")
    [[ $4 != 0 ]] && a+=(--tls "$4" --cert "$WORK/cert.pfx")
    echo dotnet "$APP_DLL" "${a[@]}"
  fi
}
export DOTNET_gcServer=1 DOTNET_CLI_TELEMETRY_OPTOUT=1 ASPNETCORE_ENVIRONMENT=Production

render() { # template -> file with the @...@ placeholders filled in
  sed -e "s#@TMP@#$WORK#g" -e "s#@H1@#$H1#g" -e "s#@H2C@#$H2C#g" -e "s#@TLS@#$TLS#g" \
      -e "s#@BH1@#$BH1#g" -e "s#@BH2C@#$BH2C#g" -e "s#@CERT@#$WORK/cert.pem#g" -e "s#@KEY@#$WORK/key.pem#g" \
      -e "s#@PEM@#$WORK/cert+key.pem#g" -e "s#@STATIC_ROOT@#$WORK/static#g" "$1" > "$2"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_ports() { # wait_ports NAME PORT...: bounded by READY_TIMEOUT
  local name=$1; shift
  local deadline=$((SECONDS + READY_TIMEOUT)) p
  for p in "$@"; do
    until port_open "$p"; do
      if (( SECONDS >= deadline )); then log "$name: port $p not open after ${READY_TIMEOUT}s"; return 1; fi
      sleep 0.2
    done
  done
}
ports_free() {
  local p
  for p in "$@"; do
    if port_open "$p"; then log "port $p is already in use: stop what listens there"; return 1; fi
  done
}

TARGET_PGID=""
start_group() { # start_group LOGNAME CMD...: runs CMD in its own session; sets TARGET_PGID
  local name=$1; shift
  setsid "$@" >"$WORK/$name.log" 2>&1 < /dev/null &
  TARGET_PGID=$!
  STARTED_GROUPS+=("$TARGET_PGID")
}
stop_group() {
  local g=$1 deadline=$((SECONDS + 10))
  kill -TERM -- "-$g" 2>/dev/null || true
  while kill -0 -- "-$g" 2>/dev/null && (( SECONDS < deadline )); do sleep 0.2; done
  kill -KILL -- "-$g" 2>/dev/null || true
  wait "$g" 2>/dev/null || true
}

# Sum over every process of a session: "cpu_ticks rss_kb threads".
# NOTE: only the session's own processes (pgrep -s), each read with the shell's read (no fork per file). A scan of
# every /proc/*/stat with a `cat` per file took seconds on the loaded 2-core machine, so each sample was taken seconds
# late, by an amount that depended on where the target's pid fell in the scan: the window slid past the client's end
# and the target's CPU per request came out too low, unequally per target (nghttpx: 12 us for GET 1 KB h2c where
# its own /proc counters over the run gave 25).
CLK_TCK=$(getconf CLK_TCK)
group_stats() {
  local sid=$1 p rest cpu=0 rss=0 thr=0
  for p in $(pgrep -s "$sid"); do
    read -r rest < "/proc/$p/stat" 2>/dev/null || continue
    rest=${rest##*) }
    read -r -a s <<<"$rest"
    cpu=$((cpu + s[11] + s[12])); thr=$((thr + s[17])); rss=$((rss + s[21] * 4))
  done
  echo "$cpu $rss $thr"
}

# The target's stats when a run's warm-up ends, sampled in the background while the client runs. window_start prints
# them; a client that ended before the sample was due (it failed at once) gets the stats from the run's start.
WINDOW_FILE=""; WINDOW_PID=""
window_sample() { # window_sample WARMUP_S EXTRA_S
  WINDOW_FILE="$WORK/window.stats"
  group_stats "$TARGET_PGID" >"$WINDOW_FILE"
  ( sleep "$(awk -v a="$1" -v b="$2" 'BEGIN { print a + b }')"; group_stats "$TARGET_PGID" >"$WINDOW_FILE.new" \
      && mv "$WINDOW_FILE.new" "$WINDOW_FILE" ) &
  WINDOW_PID=$!
}
window_start() {
  kill "$WINDOW_PID" 2>/dev/null || true
  wait "$WINDOW_PID" 2>/dev/null || true
  cat "$WINDOW_FILE"
}

BACKEND_PGID=""
start_backend() {
  [[ -n "$BACKEND_PGID" ]] && return 0
  ports_free "$BH1" "$BH2C" || return 1
  log "backend: the app on Kestrel, HTTP/1.1 :$BH1, h2c :$BH2C"
  # shellcheck disable=SC2046
  start_group backend $(serve_app kestrel "$BH1" "$BH2C" 0)
  BACKEND_PGID=$TARGET_PGID
  wait_ports backend "$BH1" "$BH2C"
}

# start_target NAME: starts it, sets TARGET_PGID; returns 3 when the target cannot run here.
SKIP_REASON=""
start_target() {
  local t=$1
  SKIP_REASON=""
  case "$t" in
    proxy-*|nginx|haproxy|h2o|nghttpx) start_backend || { SKIP_REASON="backend did not start"; return 3; } ;;
  esac
  ports_free "$H1" "$H2C" "$TLS" || { SKIP_REASON="front ports busy"; return 3; }
  case "$t" in
    server-ours|server-kestrel)
      # shellcheck disable=SC2046
      start_group "$t" $(serve_app "${t#*-}" "$H1" "$H2C" "$TLS") ;;
    static-ours|static-kestrel)
      local server=${t#*-}
      start_group "$t" dotnet "$APP_DLL" --server "$server" --h1 "$H1" --h2c "$H2C" --tls "$TLS" \
        --cert "$WORK/cert.pfx" --static "$WORK/static" ;;
    proxy-ours|proxy-ours-direct|proxy-ours-pipeline|proxy-ours-httpclient|proxy-ours-kestrel)
      # The same Proxy.Host and proxy.json; proxy-ours-kestrel runs it on Kestrel (Host:Server=kestrel), as YARP runs.
      local listen=(--urls "http://127.0.0.1:$H1;http://127.0.0.1:$H2C;https://127.0.0.1:$TLS")
      if [[ $t == proxy-ours-kestrel ]]; then
        # Kestrel (.NET 10) speaks h2c only on an HTTP/2-only endpoint: a protocol per port, in Kestrel:Endpoints.
        listen=(--Host:Server=kestrel
          --Kestrel:Endpoints:h1:Url="http://127.0.0.1:$H1" --Kestrel:Endpoints:h1:Protocols=Http1
          --Kestrel:Endpoints:h2c:Url="http://127.0.0.1:$H2C" --Kestrel:Endpoints:h2c:Protocols=Http2
          --Kestrel:Endpoints:tls:Url="https://127.0.0.1:$TLS")
      fi
      if [[ $t == proxy-ours-direct ]]; then
        listen+=(--DirectPath:Enabled=true) # every route of proxy.json needs nothing from the pipeline: all go direct
      fi
      if [[ $t == proxy-ours-pipeline ]]; then
        listen+=(--DirectPath:Enabled=false) # every request through HttpContext, hosting and endpoint routing
      fi
      if [[ $t == proxy-ours-httpclient ]]; then
        # Our proxy on our server with the HttpClient transport: the path before the native relay, same run.
        listen+=(--ReverseProxy:Clusters:http:Transport=HttpClient --ReverseProxy:Clusters:grpc:Transport=HttpClient)
      fi
      render "$PEERS/proxy.json" "$WORK/proxy.json"
      # Admin endpoint off: its metrics listeners cost CPU per request that the peers here do not pay.
      start_group "$t" dotnet "$HOST_DLL" --config "$WORK/proxy.json" "${listen[@]}" \
        --ProxyServer:DevelopmentCertificateDirectory="$WORK/ourcert" --Admin:Enabled=false ;;
    proxy-yarp)
      # Yarp.ReverseProxy 2.3.0 on Kestrel with the same proxy.json (benchmarks/peers/yarp-app).
      [[ -f "$YARP_DLL" ]] || { SKIP_REASON="benchmarks/peers/yarp-app is not built (run without --no-build once)"; return 3; }
      render "$PEERS/proxy.json" "$WORK/proxy.json"
      start_group "$t" dotnet "$YARP_DLL" --config "$WORK/proxy.json" --h1 "$H1" --h2c "$H2C" --tls "$TLS" --cert "$WORK/cert.pfx" ;;
    nginx|static-nginx)
      need nginx || { SKIP_REASON="nginx not installed"; return 3; }
      local conf=nginx.conf; [[ $t == static-nginx ]] && conf=nginx-static.conf
      render "$PEERS/$conf" "$WORK/nginx.conf"
      start_group "$t" nginx -c "$WORK/nginx.conf" -e "$WORK/nginx-error.log" ;;
    haproxy)
      need haproxy || { SKIP_REASON="haproxy not installed"; return 3; }
      render "$PEERS/haproxy.cfg" "$WORK/haproxy.cfg"
      start_group "$t" haproxy -db -f "$WORK/haproxy.cfg" ;;
    h2o)
      need h2o || { SKIP_REASON="h2o not installed"; return 3; }
      render "$PEERS/h2o.conf" "$WORK/h2o.conf"
      start_group "$t" h2o -c "$WORK/h2o.conf" ;;
    nghttpx)
      need nghttpx || { SKIP_REASON="nghttpx not installed (Debian package nghttp2-proxy)"; return 3; }
      render "$PEERS/nghttpx.conf" "$WORK/nghttpx.conf"
      start_group "$t" nghttpx --conf="$WORK/nghttpx.conf" ;;
    *) SKIP_REASON="unknown target"; return 3 ;;
  esac
  wait_ports "$t" "$H1" "$H2C" "$TLS" || { SKIP_REASON="did not start: $(tail -3 "$WORK/$t.log" | tr '\n' ' ')"; stop_group "$TARGET_PGID"; return 3; }
}

# Which scenarios a target takes part in (and why not, for the report).
applies() { # applies TARGET SCENARIO -> 0 or 1, with SKIP_REASON
  local t=$1 s=$2
  SKIP_REASON=""
  case "$s" in
    static-*) [[ $t == static-* ]] || return 1 ;;
    *) [[ $t != static-* ]] || return 1 ;;
  esac
  if [[ $t == h2o && $s == grpc* ]]; then SKIP_REASON="h2o 2.2 proxies over HTTP/1.1 without trailers: no gRPC"; return 1; fi
  if [[ $HAVE_LOAD == 0 && ${3:-} == load ]]; then SKIP_REASON="benchmarks/Proxy.Load (the gRPC/SSE client) is not in this tree"; return 1; fi
  return 0
}

RAW="$WORK/results.jsonl"
: > "$RAW"
run_scenario() { # run_scenario TARGET LINE
  local t=$1 line=$2 name client proto path body clients streams extra
  IFS='|' read -r name client proto path body clients streams extra <<<"$line"
  local scheme=http port=$H1 args=()
  case "$proto" in
    h1) args+=(--h1) ;;
    h1-tls) args+=(--h1); scheme=https; port=$TLS ;;
    h2c) port=$H2C ;;
    h2) scheme=https; port=$TLS ;;
  esac
  [[ "$body" == post1k ]] && args+=(-d "$WORK/post1k" -H 'content-type: application/octet-stream')
  [[ "$body" == grpc ]] && args+=(-d "$WORK/grpc" -H 'content-type: application/grpc' -H 'te: trailers')
  # shellcheck disable=SC2206
  [[ -n "$extra" ]] && args+=($extra)
  local url="$scheme://127.0.0.1:$port$path" out="$WORK/h2load.out" lat="$WORK/latency.log"
  rm -f "$lat"
  local before after
  # CPU is counted over the measured window only: the first sample is taken when the warm-up ends (the .NET client
  # first starts and connects, about 0.6 s), the second when the client exits. Counting from the start divided the
  # warm-up's CPU by the measured window's requests too (1.5x with 2 s of warm-up and 4 s measured).
  local skew=0; [[ $client == load ]] && skew=0.6
  window_sample "$WARMUP" "$skew"
  local t0=$SECONDS
  if [[ $client == load ]]; then
    local hj="$WORK/load.jsonl"; rm -f "$hj"
    # shellcheck disable=SC2086
    timeout "$RUN_TIMEOUT" dotnet "$LOAD_DLL" run --scenario "$path" --url "$scheme://127.0.0.1:$port" \
      --connections "$clients" --streams "$streams" --warmup "$WARMUP" --duration "$DURATION" --label "$t" \
      --json "$hj" --no-header --no-progress $extra >"$out" 2>&1 || true
    after=$(group_stats "$TARGET_PGID"); before=$(window_start)
    python3 - "$t" "$name" "$proto" "$clients" "$streams" "$extra" "$hj" "$out" "$before" "$after" "$CLK_TCK" >>"$RAW" <<'PY'
import json, sys
t, name, proto, c, m, extra, hj, out, before, after, tck = sys.argv[1:]
try:
    r = json.loads(open(hj).read().strip().splitlines()[-1])
except (OSError, IndexError, ValueError):
    r = None
b = [int(x) for x in before.split()]; a = [int(x) for x in after.split()]
cpu_s = (a[0] - b[0]) / float(tck)
rec = {"target": t, "scenario": name, "protocol": proto, "clients": int(c), "streams": int(m), "flags": extra,
       "client": "Proxy.Load", "cpu_s": round(cpu_s, 2), "rss_mb": round(a[1] / 1024.0, 1), "threads": a[2]}
if r is None:
    text = open(out, errors="replace").read().strip().splitlines()
    rec.update({"rps": 0.0, "mbps": 0.0, "requests": 0, "succeeded": 0, "failed": None, "non2xx": 0, "bad": None,
                "latency_ms": {k: None for k in ("mean", "p50", "p90", "p99", "max")}, "cpu_us_per_req": None,
                "error": " ".join(text[-3:])[:300]})
else:
    # Proxy.Load: "requests" are good completions only; "errors" counts every failure, bad responses
    # (wrong status, grpc-status, framing) included; SSE adds lost events and reconnects.
    n = r.get("requests") or 0
    errors = r.get("errors") or 0
    sse = r.get("sse") or {}
    rec.update({"rps": r.get("rps", 0.0), "mbps": round((r.get("bytesRead") or 0) / 1e6 / max(r.get("durationSeconds") or 1, 1e-9), 2),
                "requests": n, "succeeded": n, "failed": errors, "non2xx": r.get("badResponses") or 0,
                "bad": errors + (sse.get("lost") or 0) + (sse.get("reconnects") or 0),
                "latency_ms": r.get("latencyMs"), "cpu_us_per_req": round(cpu_s * 1e6 / n, 1) if n else None})
    if sse:
        rec["sse"] = sse
    if r.get("firstError"):
        rec["first_error"] = r["firstError"]
    if n == 0:
        rec["error"] = ("no request completed in the measured window; first error: " + (r.get("firstError") or "none"))[:300]
print(json.dumps(rec))
PY
    local last; last=$(tail -1 "$RAW")
    printf '   %-24s %-15s %10s req/s  p99 %s ms  cpu %s s  (%ss)\n' "$name" "$t" \
      "$(jq -r '.rps' <<<"$last")" "$(jq -r '.latency_ms.p99' <<<"$last")" "$(jq -r '.cpu_s' <<<"$last")" "$((SECONDS - t0))" >&2
    return 0
  fi
  timeout "$RUN_TIMEOUT" h2load -t1 -c "$clients" -m "$streams" -D "$DURATION" --warm-up-time "$WARMUP" \
    --log-file="$lat" "${args[@]}" "$url" >"$out" 2>&1 || true
  after=$(group_stats "$TARGET_PGID"); before=$(window_start)
  python3 - "$t" "$name" "$proto" "$clients" "$streams" "$extra" "$out" "$lat" "$before" "$after" "$CLK_TCK" "$DURATION" >>"$RAW" <<'PY'
import json, re, sys
t, name, proto, c, m, extra, out, lat, before, after, tck, dur = sys.argv[1:]
text = open(out, errors="replace").read()
def num(pattern, default=0.0):
    mm = re.search(pattern, text)
    return float(mm.group(1)) if mm else default
rps = num(r"finished in [^,]+, ([\d.]+) req/s")
reqs = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout", text)
codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", text)
mbps = 0.0
mm = re.search(r"req/s, ([\d.]+)([KMG]?B)/s", text)
if mm:
    mbps = float(mm.group(1)) * {"B": 1 / 1e6, "KB": 1 / 1024, "MB": 1.0, "GB": 1024.0}[mm.group(2)]
lats = []
try:
    for row in open(lat):
        parts = row.split()
        if len(parts) >= 3:
            lats.append(int(parts[2]) / 1000.0)
except OSError:
    pass
lats.sort()
def pct(p):
    return round(lats[min(len(lats) - 1, int(p / 100.0 * len(lats)))], 3) if lats else None
b = [int(x) for x in before.split()]; a = [int(x) for x in after.split()]
cpu_s = (a[0] - b[0]) / float(tck)
counts = [int(x) for x in reqs.groups()] if reqs else [0] * 7
done, ok, timeout = counts[2], counts[3], counts[6]
n2xx, n3xx, n4xx, n5xx = [int(x) for x in codes.groups()] if codes else [0] * 4
# Bad = requests of the measured window that did not end in a 2xx. h2load (1.52, -D mode) counts a request as
# "done" when its stream closes in the window and as "succeeded" when it also closed cleanly with a 2xx or 3xx;
# its "failed" is done - succeeded (4xx, 5xx, resets; "errored" is part of it). Requests still in flight when
# a connection timed out are in "timeout", not in "done". 3xx are not expected from any endpoint here, so they
# are bad too. The status-code counts are not used for the total: h2load counts a status when the response
# headers arrive in the window, so a response whose headers came in the warm-up and whose end in the window is
# done but in no status count, and one still in flight at the end is the reverse: done - 2xx is off by up to
# the number of requests in flight either way (negative, or dozens of phantom bad responses on the 100 KB
# scenarios; clamping it at 0 hid real failures). succeeded <= done always, so bad is never negative.
bad = (done - ok) + min(n3xx, ok) + timeout
# h2load's req/s is every stream that closed cleanly over the -D seconds, 4xx and 5xx included: a target
# answering 503 at once would look fast. RPS here is the good responses (2xx) per second.
h2load_rps = rps
if reqs and float(dur) > 0:
    rps = round((ok - min(n3xx, ok)) / float(dur), 2)
rec = {
    "target": t, "scenario": name, "protocol": proto, "clients": int(c), "streams": int(m), "flags": extra,
    "client": "h2load", "rps": rps, "h2load_rps": h2load_rps, "mbps": round(mbps, 2), "requests": done, "succeeded": ok,
    "failed": done - ok, "non2xx": n3xx + n4xx + n5xx, "bad": bad,
    "h2load": {"total": counts[0], "started": counts[1], "done": done, "succeeded": ok, "failed": counts[4],
               "errored": counts[5], "timeout": timeout, "2xx": n2xx, "3xx": n3xx, "4xx": n4xx, "5xx": n5xx},
    "latency_ms": {"mean": round(sum(lats) / len(lats), 3) if lats else None, "p50": pct(50), "p90": pct(90),
                   "p99": pct(99), "max": round(lats[-1], 3) if lats else None},
    "cpu_s": round(cpu_s, 2), "cpu_us_per_req": round(cpu_s * 1e6 / done, 1) if done else None,
    "rss_mb": round(a[1] / 1024.0, 1), "threads": a[2],
}
if not reqs or done == 0:
    # The counters and whatever h2load said went wrong (its last lines are only the empty timing table).
    lines = text.strip().splitlines()
    said = [l for l in lines if l.startswith(("requests:", "status codes:")) or
            any(w in l.lower() for w in ("error", "fail", "refused", "reset", "timed out", "could not"))]
    rec["error"] = " / ".join(dict.fromkeys(l.strip() for l in (said or lines[-3:])))[:300]
print(json.dumps(rec))
PY
  local last; last=$(tail -1 "$RAW")
  printf '   %-24s %-15s %10s req/s  p99 %s ms  cpu %s s  (%ss)\n' "$name" "$t" \
    "$(jq -r '.rps' <<<"$last")" "$(jq -r '.latency_ms.p99' <<<"$last")" "$(jq -r '.cpu_s' <<<"$last")" "$((SECONDS - t0))" >&2
}

# ---- selection ------------------------------------------------------------------------------------------
TARGETS=${ONLY:-$ALL_TARGETS}; TARGETS=${TARGETS//,/ }
WANTED=${SCENARIOS:-}
[[ -z "$WANTED" && $QUICK == 1 ]] && WANTED=$QUICK_SCENARIOS
SCENARIO_LINES=()
while IFS= read -r line; do
  [[ -z "$line" ]] && continue
  n=${line%%|*}
  if [[ -z "$WANTED" || ",$WANTED," == *",$n,"* ]]; then SCENARIO_LINES+=("$line"); fi
done <<<"$SCENARIO_TABLE"
(( ${#SCENARIO_LINES[@]} > 0 )) || { echo "no scenario matches --scenarios $WANTED" >&2; exit 2; }

SKIPS="$WORK/skips.jsonl"; : > "$SKIPS"
skip() { jq -cn --arg t "$1" --arg s "$2" --arg r "$3" '{target:$t,scenario:$s,reason:$r}' >>"$SKIPS"; log "skip $1${2:+ / $2}: $3"; }

log "targets: $TARGETS"
log "scenarios: ${#SCENARIO_LINES[@]}, ${DURATION}s each after ${WARMUP}s warm-up"
for t in $TARGETS; do
  todo=()
  for line in "${SCENARIO_LINES[@]}"; do
    client=$(cut -d'|' -f2 <<<"$line")
    if applies "$t" "${line%%|*}" "$client"; then todo+=("$line")
    elif [[ -n "$SKIP_REASON" ]]; then skip "$t" "${line%%|*}" "$SKIP_REASON"; fi
  done
  (( ${#todo[@]} > 0 )) || continue
  log "target $t"
  if ! start_target "$t"; then skip "$t" "" "$SKIP_REASON"; continue; fi
  sleep 1
  if (( PRIME > 0 )); then
    log "priming $t: every scenario for ${PRIME}s, results discarded"
    saved=("$RAW" "$DURATION" "$WARMUP"); RAW="$WORK/priming.jsonl" DURATION=$PRIME WARMUP=0
    for line in "${todo[@]}"; do
      # NOTE: server streaming is not primed, and is measured last of the load scenarios (its row follows the SSE
      # rows): after such a run through nginx 1.22 (grpc_pass) ends, the Kestrel backend goes on writing those calls
      # at full CPU with no connection left (reproduced by hand; a client straight to the backend leaves it idle), and
      # every later scenario against that backend measured 0 RPS. The next target gets a fresh backend.
      [[ ${line%%|*} == grpcnet-serverstreaming-* ]] && continue
      run_scenario "$t" "$line" 2>/dev/null
    done
    RAW=${saved[0]} DURATION=${saved[1]} WARMUP=${saved[2]}
  fi
  for line in "${todo[@]}"; do run_scenario "$t" "$line"; done
  stop_group "$TARGET_PGID"
  # A fresh backend for every proxy target: whatever one target's runs leave behind in it (streams a proxy
  # never reset, a wedged handler) must not show up as zeros in the next target's rows.
  if [[ -n "$BACKEND_PGID" ]]; then stop_group "$BACKEND_PGID"; BACKEND_PGID=""; fi
done

# ---- report -----------------------------------------------------------------------------------------------
mkdir -p "$RESULTS"
# <date>-<HHMM>-comparison (start time) for a full run; a run narrowed by --only or --scenarios adds -partial, --quick adds
# -quick: no run overwrites another, and a partial or quick one is never mistaken for a full run.
KIND=full SELECTION=""
if [[ -n "$ONLY" || -n "$SCENARIOS" ]]; then
  KIND=partial SELECTION="${ONLY:+--only $ONLY}${ONLY:+${SCENARIOS:+ }}${SCENARIOS:+--scenarios $SCENARIOS}"
fi
[[ $QUICK == 1 ]] && KIND=quick
SUFFIX=""; [[ $KIND != full ]] && SUFFIX="-$KIND"
MD="$RESULTS/$STAMP-comparison$SUFFIX.md" JSON="$RESULTS/$STAMP-comparison$SUFFIX.json"
if [[ -e "$MD" || -e "$JSON" ]]; then   # two runs started in the same minute: add the seconds
  STAMP=$STAMP$(date -d "@$STARTED" +%S)
  MD="$RESULTS/$STAMP-comparison$SUFFIX.md" JSON="$RESULTS/$STAMP-comparison$SUFFIX.json"
fi
MACHINE="$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), load $(cut -d' ' -f1-3 /proc/loadavg)"
# Package versions of the .NET peers and clients, as Directory.Packages.props pins them.
pkg() { sed -n "s/.*Include=\"$1\" Version=\"\([^\"]*\)\".*/$1 \1/p" "$ROOT/Directory.Packages.props"; }
VERSIONS="$(dotnet --version 2>/dev/null | head -1) (.NET SDK); $(pkg Yarp.ReverseProxy); $(pkg Grpc.AspNetCore); $(pkg Grpc.Net.Client); $(need nginx && nginx -v 2>&1 | head -1); $(haproxy -v 2>/dev/null | head -1 | cut -d' ' -f1-3); $(h2o -v 2>/dev/null | head -1); $(nghttpx -v 2>/dev/null | head -1); $(h2load --version 2>/dev/null | head -1)"
python3 - "$RAW" "$SKIPS" "$MD" "$JSON" "$MACHINE" "$VERSIONS" "$DURATION" "$WARMUP" "$KIND" "$SELECTION" "$PRIME" <<'PY'
import json, sys, datetime
raw, skips, md, js, machine, versions, dur, warm, kind, selection, prime = sys.argv[1:]
quick = "1" if kind == "quick" else "0"
rows = [json.loads(l) for l in open(raw) if l.strip()]
skipped = [json.loads(l) for l in open(skips) if l.strip()]
json.dump({"date": datetime.datetime.now().isoformat(timespec="seconds"), "machine": machine, "versions": versions,
           "duration_s": int(dur), "warmup_s": int(warm), "prime_s": int(prime), "kind": kind, "selection": selection, "quick": quick == "1",
           "results": rows, "skipped": skipped},
          open(js, "w"), indent=1)
def bad(r):
    # "bad" since the counting was fixed; rows written before it summed failed + non2xx.
    return r["bad"] if "bad" in r else (r.get("failed") or 0) + (r.get("non2xx") or 0)
skip_of = {(s["target"], s["scenario"]): s["reason"] for s in skipped}
roles = [("Server role: the same app on our server vs Kestrel", "server-ours", ["server-ours", "server-kestrel"]),
         ("Proxy role: in front of the same Kestrel backend", "proxy-ours",
          ["proxy-ours", "proxy-ours-direct", "proxy-ours-pipeline", "proxy-ours-httpclient", "proxy-ours-kestrel", "proxy-yarp", "nginx", "haproxy", "h2o", "nghttpx"]),
         ("Static file (10 MB, h2load -c8 -m1)", "static-ours", ["static-ours", "static-kestrel", "static-nginx"])]
by = {(r["target"], r["scenario"]): r for r in rows}
out = [f"# Comparison run {datetime.date.today()}", "",
       f"Machine: {machine}. Versions: {versions}.", "",
       f"Clients: h2load (HTTP and static scenarios), one thread (`-t1`), `-D {dur} --warm-up-time {warm}`, after a priming "
       f"pass of {prime} s per scenario per target (results discarded; lets .NET tier its code up); "
       "benchmarks/Proxy.Load `run` (grpcnet-*: Grpc.Net.Client, one GrpcChannel per connection and closed call loops per "
       "stream, as crank's gRPC client; sse: events counted as requests, lost events and reconnects counted as bad). Concurrency per scenario as shown "
       "(c = connections, m = streams per connection). RPS is the measured-period rate; latency percentiles come "
       "from h2load's per-request log; CPU is user+system time of every process of the target (not the backend, "
       "not the client) over the measured window (from the end of the warm-up to the client's exit). Ratio = target RPS / our RPS (above 1: the peer is faster).", ""]
if quick == "1":
    out += ["**Quick run** (short durations, few scenarios" + (f"; `{selection}`" if selection else "")
            + "): a format check, not a measurement.", ""]
elif kind == "partial":
    out += [f"**Partial run** (`{selection}`): only the selected targets and scenarios.", ""]
for title, ours, targets in roles:
    present = [t for t in targets if any(k[0] == t for k in by)]
    if not present:
        continue
    scen = []
    for r in rows:
        if r["target"] in present and r["scenario"] not in scen:
            scen.append(r["scenario"])
    out += [f"## {title}", "", "RPS (ratio to `" + ours + "`)", "",
            "| scenario | c x m | " + " | ".join(present) + " |", "|---|---|" + "---:|" * len(present)]
    for s in scen:
        base = by.get((ours, s))
        cells = []
        cm = ""
        for t in present:
            r = by.get((t, s))
            if r is None:
                # Skipped on purpose (the reason is under "Not measured"), or not run at all.
                cells.append("skipped" if (t, s) in skip_of else "-")
                continue
            cm = f'{r["clients"]}x{r["streams"]}' + (" " + r["flags"] if r["flags"] else "")
            v = f'{r["rps"]:,.0f}'
            if r.get("error"):
                v += " (failed)"
            elif bad(r):
                v += f' ({bad(r)} bad)'
            if base and base["rps"] and t != ours:
                v += f' ({r["rps"] / base["rps"]:.2f}x)'
            cells.append(v)
        out.append(f"| {s} | {cm} | " + " | ".join(cells) + " |")
    out += ["", "| target | scenario | RPS | MB/s | mean ms | p50 | p90 | p99 | max | bad | CPU s | CPU us/req | RSS MB | threads |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in scen:
        for t in present:
            r = by.get((t, s))
            if r is None:
                continue
            l = r["latency_ms"]
            out.append(f'| {t} | {s} | {r["rps"]:,.0f} | {r["mbps"]} | {l["mean"]} | {l["p50"]} | {l["p90"]} | {l["p99"]} | {l["max"]} | {bad(r)} | {r["cpu_s"]} | {r["cpu_us_per_req"]} | {r["rss_mb"]} | {r["threads"]} |')
    out.append("")
errs = [r for r in rows if r.get("error")]
if errs or skipped:
    out += ["## Not measured", ""]
    for r in errs:
        out.append(f'- {r["target"]} / {r["scenario"]}: {r["client"]} completed no request: `{r["error"]}`')
    # One line per target and reason, naming the scenarios it covers.
    grouped = {}
    for s in skipped:
        grouped.setdefault((s["target"], s["reason"]), []).append(s["scenario"])
    for (t, reason), names in grouped.items():
        names = [n for n in names if n]
        out.append(f'- {t}' + (f' ({", ".join(names)})' if names else "") + f': skipped, {reason}')
    out.append("")
open(md, "w").write("\n".join(out))
# On the console, the RPS tables only (the detail tables have 15 columns; the RPS ones at most 9).
print("\n".join(l for l in out if l.count("|") <= 10))
PY
log "wrote $MD and $JSON"
