#!/usr/bin/env bash
# Measures the bench/peers runners (issue 17) and prints a markdown table:
# instructions per op under callgrind when valgrind is installed, otherwise
# ns/op as the median of interleaved rounds; each with its ratio to the
# floor. No network once the modules are in the module cache.
#
#   bench/peers/run.sh            # all runners
#   PEERS_RUN='floor|agentry' bench/peers/run.sh
#   PEERS_NATIVE=1 bench/peers/run.sh   # ns/op even when valgrind is there
#
# Under callgrind each runner runs twice, N1 and N2 ops (N2 = 5 × N1, sized
# from a native pass so that N2 ops are about PEERS_BUDGET instructions),
# and instructions/op = (Ir(N2) − Ir(N1)) / (N2 − N1): the difference takes
# away the process start, module init and the runner's construction.
# Instruction counts are those of all threads (the GC included), with
# GOMAXPROCS=1, and do not depend on the other load of the machine (they
# repeat within about 1%), which is why they are preferred.
set -euo pipefail
cd "$(dirname "$0")"

budget=${PEERS_BUDGET:-400000000} # instructions in the N2 run
rounds=${PEERS_ROUNDS:-5}         # native mode: interleaved rounds
match=${PEERS_RUN:-.}

work=$(mktemp -d /tmp/peers.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "building the test binaries" >&2
go test -c -o "$work/peers.test" .
(cd adkgo && go test -c -o "$work/adkgo.test" .)
bins=("$work/peers.test" "$work/adkgo.test")

# Each runner does the whole scenario before it is measured.
for bin in "${bins[@]}"; do
	"$bin" -test.run '^TestPeers$' -test.count=1 >"$work/test.out" 2>&1 || { cat "$work/test.out" >&2; exit 1; }
done

# bench BIN NAME ARGS... prints the benchmark's result line.
bench() {
	local bin=$1 name=$2
	shift 2
	"$bin" -test.run '^$' -test.bench "^BenchmarkPeers/${name}\$" -test.benchmem "$@" | grep "^BenchmarkPeers/"
}

# Native pass: names, ns/op (sizes the callgrind runs), B/op and allocs/op.
: >"$work/runners"
for bin in "${bins[@]}"; do
	"$bin" -test.run '^$' -test.bench '^BenchmarkPeers/' -test.benchmem -test.benchtime=200ms |
		awk -v bin="$bin" '/^BenchmarkPeers\// { n = $1; sub(/^BenchmarkPeers\//, "", n); sub(/-[0-9]+$/, "", n);
			print n, bin, $3, $5, $7 }' >>"$work/runners"
done
grep '^floor ' "$work/runners" >"$work/selected"
grep -v '^floor ' "$work/runners" | grep -E "^($match)" >>"$work/selected" || { echo "no runner matches $match" >&2; exit 1; }

mode=native
if [ -z "${PEERS_NATIVE:-}" ] && command -v valgrind >/dev/null; then
	mode=callgrind
fi

# measure NAME BIN NS: prints the figure for one runner.
measure_callgrind() {
	local name=$1 bin=$2 ns=$3 n1 n2 ir1 ir2
	# about 2 instructions per native ns; at least 50 and at most 200000 ops
	n2=$(awk -v b="$budget" -v ns="$ns" 'BEGIN { n = int(b / (2 * ns)); if (n < 50) n = 50; if (n > 200000) n = 200000; print n }')
	n1=$((n2 / 5))
	for n in "$n1" "$n2"; do
		# GOMAXPROCS=1: with more Ps, idle Ms spin looking for work while
		# valgrind runs one thread at a time, and the counts vary up to 5×.
		# Async preemption signals trip callgrind (and add nothing here).
		GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
			"$bin" -test.run '^$' -test.bench "^BenchmarkPeers/${name}\$" -test.benchtime="${n}x" \
			>"$work/cg.out" 2>"$work/cg.err" || { cat "$work/cg.err" >&2; exit 1; }
		grep -q "^BenchmarkPeers/${name}" "$work/cg.out" || { cat "$work/cg.out" "$work/cg.err" >&2; exit 1; }
		sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$work/cg.err" >"$work/ir.$n"
	done
	ir1=$(cat "$work/ir.$n1")
	ir2=$(cat "$work/ir.$n2")
	echo "  $name: N=$n1 → $ir1 Ir, N=$n2 → $ir2 Ir" >&2
	awk -v a="$ir1" -v b="$ir2" -v n1="$n1" -v n2="$n2" 'BEGIN { printf "%.0f\n", (b - a) / (n2 - n1) }'
}

echo "measuring ($mode)" >&2
: >"$work/figures"
if [ "$mode" = callgrind ]; then
	while read -r name bin ns bytes allocs; do
		echo "$name $(measure_callgrind "$name" "$bin" "$ns") $bytes $allocs" >>"$work/figures"
	done <"$work/selected"
else
	for round in $(seq "$rounds"); do
		echo "  round $round/$rounds" >&2
		while read -r name bin ns bytes allocs; do
			bench "$bin" "$name" -test.benchtime=300ms | awk -v n="$name" '{ print n, $3 }' >>"$work/rounds"
		done <"$work/selected"
	done
	while read -r name bin ns bytes allocs; do
		median=$(awk -v n="$name" '$1 == n { print $2 }' "$work/rounds" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
		echo "$name $median $bytes $allocs" >>"$work/figures"
	done <"$work/selected"
fi

unit="instructions/op"
[ "$mode" = native ] && unit="time/op (median of $rounds interleaved rounds)"
echo
echo "$(date -u +%Y-%m-%d), $(go env GOVERSION), $(nproc) CPUs: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
echo
echo "| runner | $unit | ÷ floor | B/op | allocs/op |"
echo "|---|---|---|---|---|"
awk -v mode="$mode" '
	function human(v) {
		if (mode == "native") return sprintf(v >= 1e6 ? "%.2f ms" : "%.1f µs", v >= 1e6 ? v / 1e6 : v / 1e3)
		if (v >= 1e6) return sprintf(v >= 1e7 ? "%.1fM" : "%.2fM", v / 1e6)
		if (v >= 1e3) return sprintf("%.0fk", v / 1e3)
		return sprintf("%.0f", v)
	}
	{ name[NR] = $1; v[NR] = $2; b[NR] = $3; a[NR] = $4; if ($1 == "floor") floor = $2 }
	END {
		for (i = 1; i <= NR; i++) {
			r = v[i] / floor
			printf "| %s | %s | %s | %s | %s |\n", name[i], human(v[i]), sprintf(r >= 10 ? "%.0f" : "%.1f", r), b[i], a[i]
		}
	}' "$work/figures"
echo
echo "versions:"
go list -m github.com/cloudwego/eino github.com/tmc/langchaingo github.com/firebase/genkit/go | sed 's/^/  /'
(cd adkgo && go list -m google.golang.org/adk/v2) | sed 's/^/  /'
