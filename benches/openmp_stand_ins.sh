#!/usr/bin/env bash
# What the OpenMP stand-ins (capture/src/host_sync/interpose/openmp.rs) cost a program that records nothing:
# benches/openmp_stand_ins.cpp's lock pairs and empty regions, plain and with the capture library preloaded, with
# libgomp in the global scope and outside it, ROUNDS times (default 3). Needs g++ and a release build of the
# library (cargo build --release -p streamtrace-capture).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
lib=${STREAMTRACE_LIB:-$repo/target/release/deps/libstreamtrace_capture.so}
[ -e "$lib" ] || { echo "no $lib: build it first (cargo build --release -p streamtrace-capture)" >&2; exit 2; }
work=$(mktemp -d)
g++ -O2 -shared -fPIC -fopenmp -o "$work/libomp_bench.so" "$repo/benches/openmp_stand_ins.cpp"
g++ -O2 -DOPENMP_LOADER -o "$work/omp_bench" "$repo/benches/openmp_stand_ins.cpp" -ldl
for round in $(seq "${ROUNDS:-3}"); do
  for scope in local global; do
    echo "round $round plain:     $("$work/omp_bench" "$work/libomp_bench.so" $scope | tr '\n' ' ')"
    echo "round $round preloaded: $(LD_PRELOAD=$lib "$work/omp_bench" "$work/libomp_bench.so" $scope | tr '\n' ' ')"
  done
done
rm -rf "$work"
