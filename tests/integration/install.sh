#!/usr/bin/env bash
# cmake --install into a temporary prefix, then build a small program against it
# three ways: pkg-config, find_package(rdmaps) shared, find_package static.
#   install.sh BUILD_DIR
# RPS_CONSUMER_CFLAGS: flags the library was built with that its users need too
# (-fsanitize=... in sanitizer builds).
set -euo pipefail
CFLAGS_EXTRA=${RPS_CONSUMER_CFLAGS:-}
BUILD=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

cmake --install "$BUILD" --prefix "$T/prefix" >/dev/null
for f in lib/librdmaps.a lib/pkgconfig/rdmaps.pc lib/cmake/rdmaps/rdmapsConfig.cmake \
	include/rdmaps/rdmaps.h bin/rdmaps-server bin/rdmaps-sched bin/rdmaps-launch; do
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
