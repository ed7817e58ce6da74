#!/usr/bin/env bash
# Screenshots of a real agentry trace in Jaeger's UI, for
# docs/observability.md (docs/images/jaeger-refund-*.png). A docs tool: CI
# does not run it.
#
# It builds Jaeger (the `jaeger` v2 binary of the Go module
# github.com/jaegertracing/jaeger, in-memory storage) and the jaeger-ui
# release it pairs with (npm ci + vite build; their UI assets are not in
# the Go module), serves them and agentry on loopback only, runs the
# example support agent's refund with a traceparent, lets it pause for
# approval, approves it with `agentry approve`, waits for the run to be
# delivered, stops agentry (which flushes its spans), and opens the trace
# in headless Chromium (e2e/browser/jaeger-trace.mjs, playwright-core) to
# save two screenshots into OUT.
#
#   docs/observability/jaeger-screenshot.sh            # ~5 minutes the first time
#   JAEGER_UI_GIT=/path/to/jaeger-ui.git docs/observability/jaeger-screenshot.sh
#
# Needs go, node (≥ 20.19) and npm, git, curl, jq and Chromium; the npm
# registry and the Go module proxy on the first run. The Jaeger binary and
# the UI build are cached in CACHE. Every process it starts is bound to
# 127.0.0.1, limited in time, and stopped on exit. Ports: OTLP on 4317 and
# 4318, the UI on 16686 (JAEGER_UI_PORT), gRPC query on 16685, health on
# 13133; agentry on a free port.
set -euo pipefail
cd "$(dirname "$0")/../.."

# The Go module version and the jaeger v2 release it builds (v1.76.0 and
# v2.13.0 were released together, with jaeger-ui v1.76.0).
JAEGER_MODULE=${JAEGER_MODULE:-v1.76.0}
JAEGER_V2=${JAEGER_V2:-v2.13.0}
JAEGER_UI_VERSION=${JAEGER_UI_VERSION:-v1.76.0}
JAEGER_UI_GIT=${JAEGER_UI_GIT:-https://github.com/jaegertracing/jaeger-ui.git}
JAEGER_UI_PORT=${JAEGER_UI_PORT:-16686}
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
OUT=${OUT:-docs/images}
CACHE=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/agentry-jaeger-screenshot}
PAUSE=${PAUSE:-3} # seconds the run waits before it is approved
# The trace id of the example in docs/observability.md.
TRACE_ID=4bf92f3577b34da6a3ce929d0e0e4736
TRACEPARENT="00-$TRACE_ID-00f067aa0ba902b7-01"

for cmd in go node npm git curl jq timeout "$CHROMIUM"; do
  command -v "$cmd" >/dev/null || { echo "jaeger-screenshot: $cmd is needed" >&2; exit 2; }
done

WORK=$(mktemp -d /tmp/agentry-jaeger-shot.XXXXXX)
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { echo "jaeger-screenshot: $*" >&2; }
fail() {
  log "$*"
  for f in "$WORK"/*.log; do [ -s "$f" ] && { echo "--- $f" >&2; tail -20 "$f" >&2; }; done
  exit 1
}

mkdir -p "$CACHE" "$OUT"
UI="$CACHE/jaeger-ui-$JAEGER_UI_VERSION"
JAEGER="$CACHE/jaeger-$JAEGER_V2"

# jaeger-ui: the release's static build. Its package.json asks for node ≥ 24
# with engine-strict; vite 7 builds it on node 20.19 as well.
if [ ! -f "$UI/index.html" ]; then
  log "building jaeger-ui $JAEGER_UI_VERSION (npm ci + vite build, a few minutes)…"
  rm -rf "$CACHE/jaeger-ui-src"
  git clone --quiet --depth 1 --branch "$JAEGER_UI_VERSION" "$JAEGER_UI_GIT" "$CACHE/jaeger-ui-src" 2>"$WORK/git.log" ||
    fail "cannot clone $JAEGER_UI_GIT at $JAEGER_UI_VERSION"
  (
    cd "$CACHE/jaeger-ui-src"
    timeout 900 npm ci --engine-strict=false --ignore-scripts --no-audit --no-fund
    timeout 1200 npm run build
  ) >"$WORK/jaeger-ui-build.log" 2>&1 || fail "the jaeger-ui build failed"
  rm -rf "$UI"
  cp -r "$CACHE/jaeger-ui-src/packages/jaeger-ui/build" "$UI"
  rm -rf "$CACHE/jaeger-ui-src"
fi

# Jaeger: built from the module's own go.mod and go.sum, in a copy outside
# this module (agentry's go.mod stays as it is).
if [ ! -x "$JAEGER" ]; then
  log "building jaeger $JAEGER_V2 (github.com/jaegertracing/jaeger@$JAEGER_MODULE)…"
  dir=$(cd "$WORK" && GOWORK=off GOFLAGS=-mod=mod timeout 600 go mod download -json "github.com/jaegertracing/jaeger@$JAEGER_MODULE" |
    jq -r .Dir) || fail "cannot download github.com/jaegertracing/jaeger@$JAEGER_MODULE"
  cp -r "$dir" "$WORK/jaeger-src"
  chmod -R u+w "$WORK/jaeger-src"
  (cd "$WORK/jaeger-src" && GOWORK=off GOFLAGS=-buildvcs=false timeout 1200 go build \
    -ldflags "-X github.com/jaegertracing/jaeger/internal/version.latestVersion=$JAEGER_V2" \
    -o "$JAEGER" ./cmd/jaeger) >"$WORK/jaeger-build.log" 2>&1 || fail "the jaeger build failed"
  rm -rf "$WORK/jaeger-src"
fi

if [ ! -f e2e/browser/node_modules/playwright-core/package.json ]; then
  log "installing playwright-core (npm ci --prefix e2e/browser)…"
  timeout 300 npm ci --prefix e2e/browser --no-audit --no-fund >"$WORK/npm.log" 2>&1 || fail "npm ci --prefix e2e/browser failed"
fi

log "building agentry…"
go build -o "$WORK/agentry" ./cmd/agentry

# Jaeger all-in-one, every listener on loopback, traces in memory.
cat >"$WORK/jaeger.yaml" <<EOF
service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    resource:
      service.name: jaeger
    metrics:
      level: none
extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:13133
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 1000
  jaeger_query:
    storage:
      traces: memstore
    ui:
      assets_path: $UI
    http:
      endpoint: 127.0.0.1:$JAEGER_UI_PORT
    grpc:
      endpoint: 127.0.0.1:16685
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:4317
      http:
        endpoint: 127.0.0.1:4318
processors:
  batch:
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
EOF
JAEGER_URL="http://127.0.0.1:$JAEGER_UI_PORT"
timeout 900 "$JAEGER" --config "$WORK/jaeger.yaml" >"$WORK/jaeger.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do
  curl -fsS -o /dev/null "$JAEGER_URL/api/services" 2>/dev/null && break
  kill -0 "${PIDS[0]}" 2>/dev/null || fail "jaeger did not start"
  sleep 0.2
done
curl -fsS "$JAEGER_URL/" | grep -q 'id="jaeger-ui-root"' || fail "jaeger does not serve the UI from $UI"

# agentry, exporting its traces to Jaeger (Jaeger takes no OTLP metrics).
"$WORK/agentry" keys create alice --dir "$WORK/data/keys" >/dev/null
OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 OTEL_SERVICE_NAME=agentry OTEL_METRICS_EXPORTER=none \
  timeout 600 "$WORK/agentry" serve --agents examples/agents --data "$WORK/data" \
  --addr 127.0.0.1:0 --tls-addr "" >"$WORK/agentry.log" 2>&1 &
AGENTRY_PID=$!
PIDS+=($AGENTRY_PID)
URL=""
for _ in $(seq 1 200); do
  URL=$(sed -n 's|^agentry: listening on \(http://[^ ]*\).*|\1|p' "$WORK/agentry.log")
  [ -n "$URL" ] && break
  kill -0 "$AGENTRY_PID" 2>/dev/null || fail "agentry serve did not start"
  sleep 0.05
done
[ -n "$URL" ] || fail "agentry serve did not start"

log "refund run (trace $TRACE_ID)…"
curl -fsS --max-time 60 "$URL/v1/runs" -H "traceparent: $TRACEPARENT" \
  -d '{"agent":"support","input":"refund o-1001","wait":true}' >"$WORK/run.json" || fail "POST /v1/runs failed"
RUN=$(jq -r .request_id "$WORK/run.json")
APPROVAL=$(jq -r '.pending_approvals[0] // empty' "$WORK/run.json")
[ "$(jq -r .status "$WORK/run.json")" = paused ] && [ -n "$APPROVAL" ] ||
  fail "the run did not pause for an approval: $(cat "$WORK/run.json")"
sleep "$PAUSE"
timeout 60 "$WORK/agentry" approve "$APPROVAL" --as alice --dir "$WORK/data/keys" --server "$URL" >"$WORK/approve.log" 2>&1 ||
  fail "agentry approve failed"
status=$(curl -fsS --max-time 60 "$URL/v1/runs/$RUN?wait=30s" | jq -r .status)
[ "$status" = delivered ] || fail "the run is $status after the approval, not delivered"

# Stopping agentry flushes its spans.
kill -TERM "$AGENTRY_PID"
wait "$AGENTRY_PID" || true
spans=0
for _ in $(seq 1 50); do
  spans=$(curl -fsS "$JAEGER_URL/api/traces/$TRACE_ID" 2>/dev/null | jq '[.data[]?.spans[]] | length' 2>/dev/null || echo 0)
  [ "$spans" -ge 8 ] && break
  sleep 0.2
done
[ "$spans" -ge 8 ] || fail "Jaeger holds $spans spans of trace $TRACE_ID, expected at least 8"
sleep 1 # the last batch

log "screenshots of $spans spans…"
(cd e2e/browser && timeout 180 node jaeger-trace.mjs "$JAEGER_URL" "$TRACE_ID" "$WORK" refund_order "$CHROMIUM") ||
  fail "the browser driver failed"
for f in jaeger-refund-trace.png jaeger-refund-tool-span.png; do
  if command -v pngquant >/dev/null; then
    pngquant --force --quality 70-95 --output "$OUT/$f" "$WORK/$f"
  else
    cp "$WORK/$f" "$OUT/$f"
  fi
  log "$OUT/$f ($(stat -c %s "$OUT/$f") bytes)"
done
log "done: jaeger $JAEGER_V2, jaeger-ui $JAEGER_UI_VERSION"
