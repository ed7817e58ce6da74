#!/usr/bin/env bash
# UAIP /execute benchmark (issue 4): builds agentry and bench/uaipload,
# serves the built-in store workflow on loopback with the memory store and
# then with the default SQLite store (synchronous=FULL: every acknowledged
# call is fsynced), and prints a Markdown table of method_call throughput
# and p50/p99 latency at c=1 and c=16 next to a bare net/http handler
# doing the same JSON decode/encode (measured in the same run), plus the
# server's RSS after 10,000 sessions on the memory store.
#
# The load generator shares the machine's CPUs with the server (as it does
# with the baseline, which runs as a process of its own), so req/s is a
# floor; the server's CPU time per request (from /proc/<pid>/stat) gives
# the CPU-bound capacity: the rate the machine's CPUs would sustain were
# they the server's alone.
#
# Each row is the median of ROUNDS measurements of DURATION; the rounds
# alternate between the baseline and the server so that both see the same
# background load.
#
#   bench/uaip.sh                      # ~2 minutes
#   DURATION=5s ROUNDS=5 bench/uaip.sh
#
# Targets (2 cores): memory ≥ 20,000 req/s at c=16 and ≥ 50% of bare;
# SQLite ≥ 5,000 req/s at c=16; RSS ≤ 40 MiB after 10,000 sessions.
# The verdicts follow the table; progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-2s}
ROUNDS=${ROUNDS:-3}
SESSIONS=${SESSIONS:-10000}
CONC=${CONC:-1,16}
WORK=$(mktemp -d /tmp/agentry-bench.XXXXXX)
PID=""

cleanup() {
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
    kill -TERM "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

echo "building agentry and uaipload…" >&2
go build -o "$WORK/agentry" ./cmd/agentry
go build -o "$WORK/uaipload" ./bench/uaipload

# start_server ARGS…: runs agentry serve on a free loopback port; sets PID and URL.
start_server() {
  : >"$WORK/serve.log"
  "$WORK/agentry" serve --addr 127.0.0.1:0 --data "$WORK/data" --log-level warn "$@" 2>"$WORK/serve.log" &
  PID=$!
  for _ in $(seq 1 200); do
    URL=$(sed -n 's|^agentry: listening on \(http://[^ ]*\) .*|\1|p' "$WORK/serve.log")
    [ -n "$URL" ] && return 0
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.05
  done
  echo "agentry serve did not start:" >&2
  cat "$WORK/serve.log" >&2
  exit 1
}

stop_server() {
  kill -TERM "$PID"
  wait "$PID"
  PID=""
}

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(go version | cut -d' ' -f3), $(date -u +%F); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

OUT="$WORK/out.txt"
start_server --store memory:
"$WORK/uaipload" -url "$URL" -label memory -header -baseline -pid "$PID" -rss-sessions 10000 -target-rss-mib 40 \
  -tasks view_cart,add_to_cart -c "$CONC" -duration "$DURATION" -rounds "$ROUNDS" -sessions "$SESSIONS" -target-rps 20000 -target-ratio 0.5 >>"$OUT"
stop_server

start_server  # the default store: SQLite in --data, synchronous=FULL
"$WORK/uaipload" -url "$URL" -label "sqlite (fsync)" -baseline -pid "$PID" \
  -tasks add_to_cart,view_cart -c "$CONC" -duration "$DURATION" -rounds "$ROUNDS" -sessions "$SESSIONS" -target-rps 5000 >>"$OUT"
stop_server

echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg) (the load generator shares the machine's CPUs with the server)"
echo
grep '^|' "$OUT"
echo
grep '^- ' "$OUT"
