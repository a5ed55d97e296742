#!/bin/sh
# The one way around the include views (cmake/component.cmake): a relative
# path out of the including file's folder (#include "../worker/x.h"). Part of
# every build (target rps_check_includes); fails it when one is found.
#   check_includes.sh SOURCE_ROOT
cd "$1" || exit 1
if grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"][^">]*\.\./' \
	--include='*.c' --include='*.h' src transport control http server worker tools examples python; then
	echo "error: #include with '../' crosses the layering (HACKING.md): include by the folder name" >&2
	exit 1
fi
exit 0
