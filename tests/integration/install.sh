#!/usr/bin/env bash
# cmake --install into a temporary prefix, then build a small program against it
# three ways: pkg-config, find_package(rdmaps) shared, find_package static;
# then examples/ and tools/ as projects of their own against that prefix
# (find_package(rdmaps)), as a user builds them, and run what they built.
#   install.sh BUILD_DIR
# RPS_CONSUMER_CFLAGS: flags the library was built with that its users need too
# (-fsanitize=... in sanitizer builds).
set -euo pipefail
export RDMAPS_SECRET=${RDMAPS_SECRET:-install-test-secret}
CFLAGS_EXTRA=${RPS_CONSUMER_CFLAGS:-}
BUILD=$1
SRC=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

cmake --install "$BUILD" --prefix "$T/prefix" >/dev/null
for f in lib/librdmaps.a lib/pkgconfig/rdmaps.pc lib/cmake/rdmaps/rdmapsConfig.cmake \
	lib/cmake/rdmaps/rdmapsConfigVersion.cmake lib/cmake/rdmaps/rdmapsTargets.cmake \
	include/rdmaps/rdmaps.h include/rdmaps/ctl.h bin/rdmaps-server bin/rdmaps-sched bin/rdmaps-launch; do
	test -e "$T/prefix/$f" || { echo "missing after install: $f"; exit 1; }
done
ls "$T"/prefix/lib/librdmaps.so* >/dev/null

mkdir "$T/app"
cat > "$T/app/main.c" <<'C'
#include <rdmaps/rdmaps.h>
#include <stdio.h>
#include <string.h>
int main(void)
{
	struct rps_worker_opts o;
	rps_worker_opts_init(&o);
	const char *s = rps_strerror(-ENOENT);
	printf("%s\n", s);
	return strcmp(s, "unknown key") != 0;
}
C
cat > "$T/app/CMakeLists.txt" <<'C'
cmake_minimum_required(VERSION 3.18)
project(app C)
find_package(rdmaps 0.1 REQUIRED)
add_executable(app main.c)
target_link_libraries(app PRIVATE rdmaps::${RPS_LIB})
C

export PKG_CONFIG_PATH="$T/prefix/lib/pkgconfig"
# shellcheck disable=SC2046
cc $CFLAGS_EXTRA "$T/app/main.c" $(pkg-config --cflags --libs rdmaps) -Wl,-rpath,"$T/prefix/lib" -o "$T/app/pc"
"$T/app/pc"
for lib in rdmaps rdmaps_static; do
	cmake -S "$T/app" -B "$T/app/b-$lib" -DCMAKE_PREFIX_PATH="$T/prefix" -DRPS_LIB=$lib \
		-DCMAKE_C_FLAGS="$CFLAGS_EXTRA" -DCMAKE_EXE_LINKER_FLAGS="$CFLAGS_EXTRA" >/dev/null
	cmake --build "$T/app/b-$lib" >/dev/null
	"$T/app/b-$lib/app"
done
echo "install: pkg-config, find_package shared and static all work"

# examples/ and tools/ against the installed package
for top in examples tools; do
	cmake -S "$SRC/$top" -B "$T/$top" -DCMAKE_PREFIX_PATH="$T/prefix" \
		-DCMAKE_C_FLAGS="$CFLAGS_EXTRA" -DCMAKE_EXE_LINKER_FLAGS="$CFLAGS_EXTRA" \
		>"$T/$top.log" 2>&1 ||
		{ cat "$T/$top.log"; echo "install: configuring $top/ against the prefix failed"; exit 1; }
	cmake --build "$T/$top" -j2 >>"$T/$top.log" 2>&1 ||
		{ cat "$T/$top.log"; echo "install: building $top/ against the prefix failed"; exit 1; }
done

# what was built links the installed librdmaps and runs. Not `prog | grep -q`:
# grep leaving early kills the writer with SIGPIPE (pipefail).
for p in examples/fmnist/fmnist-train tools/ctl/rdmaps-ctl tools/perf/rdmaps-perf \
	tools/bench/rdmaps-bench-optim examples/text/text-train tools/bench/rdmaps-bench-table; do
	grep -q "^usage: ${p##*/}" <<<"$("$T/$p" --help 2>&1)" ||
		{ echo "install: ${p##*/} --help"; exit 1; }
	grep -q "$T/prefix/lib/librdmaps.so" <<<"$(ldd "$T/$p")" ||
		{ echo "install: ${p##*/} does not use the installed librdmaps"; exit 1; }
done
ctl=$T/tools/ctl/rdmaps-ctl
# the library's control client, through the public API: no scheduler there
rc=0
"$ctl" --scheduler 127.0.0.1:1 --timeout-ms 500 status 2>"$T/ctl.err" || rc=$?
if [ $rc -ne 1 ] || ! grep -q 'cannot reach the scheduler at 127.0.0.1:1' "$T/ctl.err"; then
	cat "$T/ctl.err"
	echo "install: rdmaps-ctl status without a scheduler: exit $rc, want 1"
	exit 1
fi
rc=0
"$ctl" --scheduler nonsense status 2>/dev/null || rc=$?
[ $rc -eq 2 ] || { echo "install: rdmaps-ctl with a bad address: exit $rc, want 2"; exit 1; }
"$T/tools/launch/rdmaps-launch" --help >/dev/null ||
	{ echo "install: rdmaps-launch --help"; exit 1; }
echo "install: examples/ and tools/ build against the installed package and run"
