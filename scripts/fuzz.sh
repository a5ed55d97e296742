#!/usr/bin/env bash
# The libFuzzer targets (tests/fuzz): configure a clang build with
# RPS_FUZZ=ON (ASan + UBSan + libFuzzer) in build-fuzz/, build them all, run
# each over its seed corpus (tests/fuzz/corpus/<target>, read only: new
# inputs go to a scratch folder) for a fixed time. Exits non-zero if any
# target reports a crash, a leak, undefined behaviour, a timeout or an
# out-of-memory; its reproducer lands in build-fuzz/fuzz/artifacts/.
#
#   scripts/fuzz.sh                  every target, FUZZ_SECONDS (20) each, FUZZ_PAR (nproc) at once
#   scripts/fuzz.sh frame sched      those targets only
#   scripts/fuzz.sh --long 3600 ckpt an hour, nice 19, one at a time, keeping what it finds in
#                                    build-fuzz/fuzz/corpus-long/<target> (HACKING.md, "Fuzzing")
#   scripts/fuzz.sh --seeds          rewrite tests/fuzz/corpus with gen_corpus.c (commit the change)
#   scripts/fuzz.sh --build-only
#
# Environment: FUZZ_SECONDS, FUZZ_SEED (libFuzzer's seed in the timed run, 1: CI
# mutates the same way every time; "random" for a new one), FUZZ_RUNS (cap on inputs per target, 5000000),
# FUZZ_PAR (targets at once), CC (default clang, else clang-14), FUZZ_BUILD (build-fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${FUZZ_BUILD:-build-fuzz}
SECONDS_EACH=${FUZZ_SECONDS:-20}
SEED=${FUZZ_SEED:-1}
RUNS=${FUZZ_RUNS:-5000000}
PAR=${FUZZ_PAR:-$(nproc)}
MODE=ci
LONG=0
TARGETS=()

while [ $# -gt 0 ]; do
	case $1 in
	--long) MODE=long; LONG=$2; shift 2 ;;
	--seeds) MODE=seeds; shift ;;
	--build-only) MODE=build; shift ;;
	-h|--help) sed -n '2,20p' "$0"; exit 0 ;;
	-*) echo "fuzz.sh: unknown option $1 (--help)" >&2; exit 2 ;;
	*) TARGETS+=("$1"); shift ;;
	esac
done

if [ -z "${CC:-}" ]; then
	CC=clang
	command -v clang >/dev/null || CC=clang-14
fi
if ! command -v "$CC" >/dev/null; then
	echo "fuzz.sh: no $CC: the fuzz targets need clang and libFuzzer (scripts/deps.sh installs clang-14 and libfuzzer-14-dev)" >&2
	exit 1
fi

echo "== fuzz: build ($BUILD, $CC, RPS_FUZZ=ON: libFuzzer + ASan + UBSan)"
CC=$CC cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRPS_FUZZ=ON -DRPS_WERROR=ON \
	-DRPS_BUILD_TESTS=ON >/dev/null
cmake --build "$BUILD" --target fuzz fuzz_gen_corpus -j"$(nproc)"
BIN=$ROOT/$BUILD/fuzz

if [ "$MODE" = build ]; then
	exit 0
fi
if [ "$MODE" = seeds ]; then
	"$BIN/fuzz_gen_corpus" tests/fuzz/corpus
	git status --short tests/fuzz/corpus
	exit 0
fi

if [ ${#TARGETS[@]} -eq 0 ]; then
	for f in "$BIN"/fuzz_*; do
		t=${f##*/fuzz_}
		[ "$t" = gen_corpus ] || TARGETS+=("$t")
	done
fi
for t in "${TARGETS[@]}"; do
	if [ ! -x "$BIN/fuzz_$t" ]; then
		echo "fuzz.sh: no target $t (tests/fuzz/fuzz_$t.c, listed in tests/fuzz/CMakeLists.txt)" >&2
		exit 2
	fi
done

ART=$BIN/artifacts
mkdir -p "$ART"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# run TARGET SECONDS CORPUS_DIR LOG [NICE]: one libFuzzer run; its exit status
run() {
	local t=$1 secs=$2 work=$3 log=$4 nice=${5:-0} dict=() seed=()
	if [ -f "tests/fuzz/dict/$t.dict" ]; then
		dict=(-dict="tests/fuzz/dict/$t.dict")
	fi
	if [ "$MODE" = ci ] && [ "$SEED" != random ]; then
		seed=(-seed="$SEED")
	fi
	mkdir -p "$work"
	nice -n "$nice" "$BIN/fuzz_$t" "$work" "tests/fuzz/corpus/$t" "${dict[@]}" "${seed[@]}" \
		-max_total_time="$secs" -runs="$RUNS" -timeout=20 -rss_limit_mb=2560 \
		-artifact_prefix="$ART/$t-" -print_final_stats=1 >"$log" 2>&1
}

# the last status line of a log: inputs run, coverage, features
summary() {
	local execs cov
	execs=$(grep -E '^stat::number_of_executed_units' "$1" | awk '{print $2}')
	cov=$(grep -E '#[0-9]+.*(DONE|pulse|NEW|REDUCE|INITED)' "$1" | tail -1 |
		sed -E 's/.*(cov: [0-9]+ ft: [0-9]+).*/\1/')
	echo "${execs:-?} inputs, ${cov:-no coverage line}"
}

if [ "$MODE" = long ]; then
	LONG_FAILED=()
	for t in "${TARGETS[@]}"; do
		log=$BIN/long-$t.log
		echo "== fuzz: $t for ${LONG}s (nice 19), corpus $BIN/corpus-long/$t, log $log"
		rc=0
		RUNS=-1 run "$t" "$LONG" "$BIN/corpus-long/$t" "$log" 19 || rc=$?
		echo "   $t: exit $rc, $(summary "$log")"
		if [ $rc -ne 0 ]; then
			LONG_FAILED+=("$t")
			grep -E 'ERROR|SUMMARY|artifact' "$log" | head -5 | sed 's/^/   /'
		fi
	done
	if [ ${#LONG_FAILED[@]} -ne 0 ]; then
		echo "== fuzz: FAILED: ${LONG_FAILED[*]} (reproducers in $ART)"
		exit 1
	fi
	exit 0
fi

echo "== fuzz: ${#TARGETS[@]} target(s), ${SECONDS_EACH}s each, $PAR at a time, over tests/fuzz/corpus"
SCRATCH=$(mktemp -d /tmp/rps-fuzz-XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT
declare -A PID=()
FAILED=()
set +u # bash < 5.2 calls an empty associative array unbound
wait_one() {
	local t=$1 rc=0
	wait "${PID[$t]}" || rc=$?
	unset "PID[$t]"
	if [ $rc -ne 0 ]; then
		FAILED+=("$t")
		echo "FAIL fuzz_$t (exit $rc): $(summary "$SCRATCH/$t.log")"
		grep -E '==[0-9]+==ERROR|runtime error|SUMMARY|Test unit written|fuzz_[a-z]+: ' \
			"$SCRATCH/$t.log" | head -8 | sed 's/^/     /'
		cp "$SCRATCH/$t.log" "$ART/$t.log"
		echo "     whole log: $ART/$t.log"
	else
		echo "ok   fuzz_$t: $(summary "$SCRATCH/$t.log")"
	fi
}
for t in "${TARGETS[@]}"; do
	while [ ${#PID[@]} -ge "$PAR" ]; do
		for r in "${!PID[@]}"; do
			if ! kill -0 "${PID[$r]}" 2>/dev/null; then
				wait_one "$r"
				break
			fi
		done
		sleep 0.2
	done
	run "$t" "$SECONDS_EACH" "$SCRATCH/$t" "$SCRATCH/$t.log" &
	PID[$t]=$!
done
for r in "${!PID[@]}"; do
	wait_one "$r"
done

if [ ${#FAILED[@]} -ne 0 ]; then
	echo "== fuzz: FAILED: ${FAILED[*]} (reproduce: $BIN/fuzz_<target> $ART/<target>-crash-...; HACKING.md, \"Fuzzing\")"
	exit 1
fi
echo "== fuzz: all ${#TARGETS[@]} target(s) ran clean"
