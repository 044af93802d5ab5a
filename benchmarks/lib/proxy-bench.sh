# Sourced by the proxy benchmark scripts (sse-memory.sh, slow-peer-memory.sh, tls-storm.sh) after they set ROOT and BUILD.
# bench_build: builds Proxy.Host and the load harness unless --no-build.
# bench_workdir NAME: a temporary folder in WORK, removed at exit with the processes whose ids are added to PIDS.
# bench_certificate: a fresh ECDSA P-256 certificate for localhost/127.0.0.1 in $WORK/cert/dev-cert.pfx (pass it to the
# proxy as --ProxyServer:DevelopmentCertificateDirectory=$WORK/cert).

bench_build() {
  if [[ $BUILD == 1 ]]; then
    dotnet build -c Release "$ROOT/src/Proxy.Host" -v q -nologo >/dev/null
    dotnet build -c Release "$ROOT/benchmarks/Proxy.Load" -v q -nologo >/dev/null
  fi
}

bench_workdir() {
  WORK=$(mktemp -d "/tmp/$1.XXXXXX")
  PIDS=()
  trap bench_cleanup EXIT
}

bench_cleanup() {
  for p in "${PIDS[@]:-}"; do [[ -n "$p" ]] && kill "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}

bench_certificate() {
  mkdir -p "$WORK/cert"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
  openssl pkcs12 -export -in "$WORK/cert.pem" -inkey "$WORK/key.pem" -out "$WORK/cert/dev-cert.pfx" -passout pass:
}
