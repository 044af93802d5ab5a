#!/usr/bin/env bash
# Interleaved A/B of our proxy: two Proxy.Host processes side by side in front of one Kestrel backend, measured in turn
# (A, B, A, B, ...), so a VM whose speed drifts over minutes moves both alike. Prints, per run: RPS, proxy CPU per
# request in µs (user + system ticks over the measured period only) and its two parts (user=, sys=), the backend's CPU
# per request over the same window (backend=: what the proxy's way of talking to it costs the backend), and with `perf`
# installed the proxy's syscalls per request (all, sends, receives, epoll waits, futex, sched_yield) and context switches.
# --b-peer nghttpx|haproxy|nginx|yarp puts that proxy on side B instead (its config from benchmarks/peers, as
# run-comparison.sh renders it; CPU summed over its processes; yarp is benchmarks/peers/yarp-app, Yarp.ReverseProxy on
# Kestrel with our proxy.json, built unless --no-build): ours against a peer minute by minute, where
# run-comparison.sh gives each target its own slot and the VM's drift between slots lands in the ratios.
#
#   benchmarks/proxy-ab.sh [--a-env "K=V ..."] [--b-env "K=V ..."] [--a-dll PATH] [--b-dll PATH] [--b-peer NAME]
#                          [--rounds 3] [--duration 6] [--warmup 2] [--prime 20] [--no-build] SCENARIO...
#
# SCENARIO: get-1k-h1 / get-100b-h1 / get-1k-h1-tls (h2load --h1 64x1), get-100k-h1 (16x1), get-100k-h2c / get-100k-h2 (8x8),
# get-1k-h2c / get-10k-h2c / get-1k-h2 / post-1k-h2c (h2load 16x16), post-1k-h1 (64x1), grpc-1x70-h2c /
# grpc-1x70-h2 / grpc-4x70-h2 (Proxy.Load, Grpc.Net.Client unary), grpc-stream-1x70-h2c (server streaming, 1 KB
# messages: a request is a message), grpc-pingpong-1x70-h2c (bidirectional streaming, one message each way in turn).
# Both proxies run the main build unless --a-dll/--b-dll name another Proxy.Host.dll (e.g. a `git worktree` build of an
# older commit). Ports: 19001/19002 (backend), A 18080/18081/18083, B 18090/18091/18093, admin 9901/9902 (the admin
# endpoint is off unless an --a-env/--b-env turns it on).
# Example (what the inline-completions row of the README came from):
#   benchmarks/proxy-ab.sh --b-env DOTNET_SYSTEM_NET_SOCKETS_INLINE_COMPLETIONS=0 grpc-1x70-h2c get-1k-h2c get-1k-h1
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
A_ENV=""; B_ENV=""; A_DLL=""; B_DLL=""; B_PEER=""; ROUNDS=3; DURATION=6; WARMUP=2; PRIME=20; BUILD=1; SCENARIOS=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --a-env) A_ENV=$2; shift 2 ;; --b-env) B_ENV=$2; shift 2 ;;
    --a-dll) A_DLL=$2; shift 2 ;; --b-dll) B_DLL=$2; shift 2 ;; --b-peer) B_PEER=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;; --duration) DURATION=$2; shift 2 ;; --warmup) WARMUP=$2; shift 2 ;;
    --prime) PRIME=$2; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) SCENARIOS+=("$1"); shift ;;
  esac
done
[[ ${#SCENARIOS[@]} -gt 0 ]] || { echo "name at least one scenario" >&2; exit 2; }
command -v h2load >/dev/null || { echo "h2load is needed (Debian: nghttp2-client)" >&2; exit 2; }
HOST_DLL=$ROOT/src/Proxy.Host/bin/Release/net10.0/Proxy.Host.dll
LOAD_DLL=$ROOT/benchmarks/Proxy.Load/bin/Release/net10.0/Proxy.Load.dll
YARP_DLL=$ROOT/benchmarks/peers/yarp-app/bin/Release/net10.0/YarpApp.dll
if [[ $BUILD == 1 ]]; then
  dotnet build -c Release "$ROOT/src/Proxy.Host" -v q -nologo >/dev/null
  dotnet build -c Release "$ROOT/benchmarks/Proxy.Load" -v q -nologo >/dev/null
  [[ $B_PEER == yarp ]] && dotnet build -c Release "$ROOT/benchmarks/peers/yarp-app" -v q -nologo >/dev/null
fi
WORK=$(mktemp -d /tmp/proxy-ab.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done; }
trap cleanup EXIT
export DOTNET_CLI_TELEMETRY_OPTOUT=1 ASPNETCORE_ENVIRONMENT=Production
sed -e "s#@BH1@#19001#g" -e "s#@BH2C@#19002#g" "$ROOT/benchmarks/peers/proxy.json" > "$WORK/proxy.json"
wait_port() { until (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; do sleep 0.2; done; }
# A port already answering before we start would be measured in place of our side (and its CPU read as 0): refuse.
for p in 19001 19002 18080 18081 18083 18090 18091 18093 9901 9902; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
    echo "port $p is already in use (a proxy or backend left running?): stop it first" >&2; exit 2
  fi
done

setsid dotnet "$LOAD_DLL" serve --server kestrel --urls http://127.0.0.1:19001 --h2c-port 19002 >"$WORK/backend.log" 2>&1 </dev/null &
PIDS+=($!); BACKEND_PID=$!
start() { # name env dll base-port admin-port
  # Admin endpoint off, as run-comparison.sh runs ours: its metrics listeners cost CPU per request the peers do not
  # pay (--a-env/--b-env "Admin__Enabled=true" turns it on, on its own port).
  env Admin__Enabled=false Admin__Url="http://127.0.0.1:$5" $2 setsid dotnet "$3" --config "$WORK/proxy.json" \
    --urls "http://127.0.0.1:$4;http://127.0.0.1:$(($4 + 1));https://127.0.0.1:$(($4 + 3))" \
    --ProxyServer:DevelopmentCertificateDirectory="$WORK/cert" >"$WORK/proxy-$1.log" 2>&1 </dev/null &
  PIDS+=($!); echo $! >"$WORK/$1.pid"
}
start_peer() { # name peer base-port: the peer's template from benchmarks/peers, ports as ours (h1, h2c, TLS)
  local conf
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
  if [[ $2 == yarp ]]; then
    [[ -f $YARP_DLL ]] || { echo "benchmarks/peers/yarp-app is not built (run without --no-build once)" >&2; exit 2; }
    openssl pkcs12 -export -passout pass: -inkey "$WORK/key.pem" -in "$WORK/cert.pem" -out "$WORK/cert.pfx"
    setsid dotnet "$YARP_DLL" --config "$WORK/proxy.json" --h1 "$3" --h2c "$(($3 + 1))" --tls "$(($3 + 3))" \
      --cert "$WORK/cert.pfx" >"$WORK/proxy-$1.log" 2>&1 </dev/null &
    PIDS+=($!); echo $! >"$WORK/$1.pid"; return
  fi
  cat "$WORK/cert.pem" "$WORK/key.pem" >"$WORK/cert+key.pem"
  case $2 in nghttpx) conf=nghttpx.conf ;; haproxy) conf=haproxy.cfg ;; nginx) conf=nginx.conf ;;
    *) echo "unknown peer $2 (nghttpx, haproxy, nginx, yarp)" >&2; exit 2 ;; esac
  command -v "$2" >/dev/null || { echo "$2 is not installed" >&2; exit 2; }
  sed -e "s#@TMP@#$WORK#g" -e "s#@H1@#$3#g" -e "s#@H2C@#$(($3 + 1))#g" -e "s#@TLS@#$(($3 + 3))#g" \
      -e "s#@BH1@#19001#g" -e "s#@BH2C@#19002#g" -e "s#@CERT@#$WORK/cert.pem#g" -e "s#@KEY@#$WORK/key.pem#g" \
      -e "s#@PEM@#$WORK/cert+key.pem#g" "$ROOT/benchmarks/peers/$conf" >"$WORK/$conf"
  case $2 in
    nghttpx) setsid nghttpx --conf="$WORK/$conf" >"$WORK/proxy-$1.log" 2>&1 </dev/null & ;;
    haproxy) setsid haproxy -db -f "$WORK/$conf" >"$WORK/proxy-$1.log" 2>&1 </dev/null & ;;
    nginx) setsid nginx -c "$WORK/$conf" -e "$WORK/nginx-error.log" >"$WORK/proxy-$1.log" 2>&1 </dev/null & ;;
  esac
  PIDS+=($!); echo $! >"$WORK/$1.pid"
}
start A "$A_ENV" "${A_DLL:-$HOST_DLL}" 18080 9901
if [[ -n $B_PEER ]]; then start_peer B "$B_PEER" 18090; else start B "$B_ENV" "${B_DLL:-$HOST_DLL}" 18090 9902; fi
for p in 19001 19002 18080 18081 18083 18090 18091 18093; do wait_port $p; done

# user and system clock ticks (utime, stime) of every process in the session the side started (setsid: the session
# id is its pid; a peer's master and workers are all in it), as "USER,SYS"
ticks() {
  local p s u=0 y=0
  for p in $(pgrep -s "$1"); do
    s=$(cat "/proc/$p/stat" 2>/dev/null) || continue; s=${s##*) }; read -r -a f <<<"$s"
    u=$((u + f[11])); y=$((y + f[12]))
  done
  echo "$u,$y"
}
# the session's processes, for perf stat -p
session_pids() { pgrep -s "$1" | paste -sd, -; }
run() { # side scenario duration -> "rps us/req [perf counts]"
  local side=$1 s=$2 d=$3 pid base out
  pid=$(cat "$WORK/$side.pid"); base=$([[ $side == A ]] && echo 18080 || echo 18090); out=$WORK/out-$side.txt
  case $s in
    get-1k-h1) h2load --h1 -c64 -m1 -D "$d" --warm-up-time="$WARMUP" "http://127.0.0.1:$base/size/1024" >"$out" 2>&1 & ;;
    get-1k-h1-tls) h2load --h1 -c64 -m1 -D "$d" --warm-up-time="$WARMUP" "https://127.0.0.1:$((base + 3))/size/1024" >"$out" 2>&1 & ;;
    get-100b-h1) h2load --h1 -c64 -m1 -D "$d" --warm-up-time="$WARMUP" "http://127.0.0.1:$base/size/100" >"$out" 2>&1 & ;;
    get-100k-h1) h2load --h1 -c16 -m1 -D "$d" --warm-up-time="$WARMUP" "http://127.0.0.1:$base/size/102400" >"$out" 2>&1 & ;;
    get-100k-h2c) h2load -c8 -m8 -D "$d" --warm-up-time="$WARMUP" "http://127.0.0.1:$((base + 1))/size/102400" >"$out" 2>&1 & ;;
    get-100k-h2) h2load -c8 -m8 -D "$d" --warm-up-time="$WARMUP" "https://127.0.0.1:$((base + 3))/size/102400" >"$out" 2>&1 & ;;
    get-1k-h2c) h2load -c16 -m16 -D "$d" --warm-up-time="$WARMUP" "http://127.0.0.1:$((base + 1))/size/1024" >"$out" 2>&1 & ;;
    get-10k-h2c) h2load -c16 -m16 -D "$d" --warm-up-time="$WARMUP" "http://127.0.0.1:$((base + 1))/size/10240" >"$out" 2>&1 & ;;
    get-1k-h2) h2load -c16 -m16 -D "$d" --warm-up-time="$WARMUP" "https://127.0.0.1:$((base + 3))/size/1024" >"$out" 2>&1 & ;;
    post-1k-h1) head -c 1024 /dev/zero | tr '\0' p >"$WORK/post1k"
      h2load --h1 -c64 -m1 -D "$d" --warm-up-time="$WARMUP" -d "$WORK/post1k" -H 'content-type: application/octet-stream' \
        "http://127.0.0.1:$base/echo" >"$out" 2>&1 & ;;
    post-1k-h2c) head -c 1024 /dev/zero | tr '\0' p >"$WORK/post1k"
      h2load -c16 -m16 -D "$d" --warm-up-time="$WARMUP" -d "$WORK/post1k" -H 'content-type: application/octet-stream' \
        "http://127.0.0.1:$((base + 1))/echo" >"$out" 2>&1 & ;;
    grpc-1x70-h2c|grpc-1x70-h2|grpc-4x70-h2|grpc-stream-1x70-h2c|grpc-pingpong-1x70-h2c)
      local c=1 url="http://127.0.0.1:$((base + 1))" kind=grpcnet-unary extra=()
      [[ $s == grpc-4x70-h2 ]] && { c=4; url="https://127.0.0.1:$((base + 3))"; }
      [[ $s == grpc-1x70-h2 ]] && url="https://127.0.0.1:$((base + 3))"
      [[ $s == grpc-stream-1x70-h2c ]] && { kind=grpcnet-serverstreaming; extra=(--payload 1024); }
      [[ $s == grpc-pingpong-1x70-h2c ]] && kind=grpcnet-pingpong
      dotnet "$LOAD_DLL" run --scenario "$kind" --url "$url" --connections $c --streams 70 "${extra[@]}" --warmup "$WARMUP" \
        --duration "$d" --json "$WORK/load-$side.jsonl" --no-header --no-progress >"$out" 2>&1 & ;;
    *) echo "unknown scenario $s" >&2; exit 2 ;;
  esac
  local load=$! perf=""
  sleep "$WARMUP"; [[ $s == grpc-* ]] && sleep 0.6 # the gRPC client connects before its warm-up starts
  if command -v perf >/dev/null; then
    local ev=raw_syscalls:sys_enter,context-switches sc
    for sc in sendto sendmsg write writev recvfrom recvmsg read readv epoll_wait epoll_pwait futex sched_yield; do ev+=",syscalls:sys_enter_$sc"; done
    perf stat -x, -o "$WORK/perf-$side.txt" -e "$ev" \
      -p "$(session_pids "$pid")" -- sleep "$d" 2>/dev/null &
    perf=$!
  fi
  local b bb; b=$(ticks "$pid"); bb=$(ticks "$BACKEND_PID"); sleep "$d"; local a ba; a=$(ticks "$pid"); ba=$(ticks "$BACKEND_PID")
  wait $load || true; [[ -n $perf ]] && { wait $perf || true; }
  local n
  if [[ $s == grpc-* ]]; then n=$(tail -1 "$WORK/load-$side.jsonl" | python3 -c "import json,sys; print(json.load(sys.stdin)['requests'])")
  else n=$(grep -Eo '[0-9]+ succeeded' "$out" | awk '{print $1}'); fi
  python3 - "$n" "$a" "$b" "$d" "$WORK/perf-$side.txt" "$ba" "$bb" <<'PY'
import os, sys
n, d, perf = int(sys.argv[1]), float(sys.argv[4]), sys.argv[5]
backend = sum(map(int, sys.argv[6].split(","))) - sum(map(int, sys.argv[7].split(",")))
(au, asys), (bu, bsys) = (map(int, sys.argv[2].split(",")), map(int, sys.argv[3].split(",")))
per = lambda ticks: ticks / 100 * 1e6 / max(n, 1)
# user: our code, the runtime and libraries; sys: the kernel (syscalls, wakeups, loopback TCP)
line = f"rps={n / d:,.0f} cpu_us_per_req={per(au - bu + asys - bsys):.1f} user={per(au - bu):.1f} sys={per(asys - bsys):.1f}"
# the backend's CPU per request over the same window: what the proxy's way of talking to it costs the backend
line += f" backend={per(backend):.1f}"
if os.path.exists(perf):
    counts = {}
    for row in open(perf):
        parts = row.strip().split(",")
        if len(parts) > 2 and parts[0].replace(".", "").isdigit():
            counts[parts[2].replace("syscalls:sys_enter_", "").replace("raw_syscalls:sys_enter", "syscalls")] = float(parts[0]) / max(n, 1)
    # Per request: all syscalls; sends and receives whatever call the proxy uses for them (ours sendto/recvfrom,
    # nghttpx and nginx writev/read...); epoll waits; futex and sched_yield (thread wakeups); context switches.
    groups = {"syscalls": ["syscalls"], "send": ["sendto", "sendmsg", "write", "writev"], "recv": ["recvfrom", "recvmsg", "read", "readv"],
              "epoll_wait": ["epoll_wait", "epoll_pwait"], "futex": ["futex"], "sched_yield": ["sched_yield"], "cs": ["context-switches"]}
    for name, members in groups.items():
        if any(m in counts for m in members):
            line += f" {name}={sum(counts.get(m, 0) for m in members):.2f}"
print(line)
PY
}

# Prime both on every scenario first: a fresh proxy needs about 25-30 s of load on a path before its CPU per request
# settles (tier 0 -> instrumented -> tier-1 code with PGO; GET h2c 122 -> 30 µs per request over the first 30 s).
for s in "${SCENARIOS[@]}"; do run A "$s" "$PRIME" >/dev/null; run B "$s" "$PRIME" >/dev/null; done
echo "A: ${A_ENV:-default env} ${A_DLL:-main build}"
if [[ -n $B_PEER ]]; then echo "B: $B_PEER (benchmarks/peers)"; else echo "B: ${B_ENV:-default env} ${B_DLL:-main build}"; fi
for r in $(seq "$ROUNDS"); do
  for s in "${SCENARIOS[@]}"; do
    for side in A B; do echo "round $r $side $s $(run $side "$s" "$DURATION")"; done
  done
done
