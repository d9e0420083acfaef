#!/usr/bin/env bash
# What the `syscall` stand-in (capture/src/host_sync/interpose/futex.rs) costs a program that records nothing:
# benches/futex_stand_in.cpp's system calls, futex wakes and semaphore turns, plain and with the capture library
# preloaded, ROUNDS times (default 3). Needs g++ with C++20 and a release build of the library (cargo build
# --release -p streamtrace-capture).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
lib=${STREAMTRACE_LIB:-$repo/target/release/deps/libstreamtrace_capture.so}
[ -e "$lib" ] || { echo "no $lib: build it first (cargo build --release -p streamtrace-capture)" >&2; exit 2; }
work=$(mktemp -d)
g++ -O2 -std=c++20 -pthread -o "$work/futex_bench" "$repo/benches/futex_stand_in.cpp"
for round in $(seq "${ROUNDS:-3}"); do
  echo "round $round plain:     $("$work/futex_bench" | tr '\n' ' ')"
  echo "round $round preloaded: $(LD_PRELOAD=$lib "$work/futex_bench" | tr '\n' ' ')"
done
rm -rf "$work"
