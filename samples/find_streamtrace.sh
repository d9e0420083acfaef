# Sourced by the scripts that run public programs under capture (samples/cuda-projects/*.sh,
# samples/torch-projects/*.sh), from the repository root: `find_st` sets ST to the streamtrace binary to run,
# the GPU machine's (.gpu/bin, unpacked from what was carried) before a local build's or the PATH's, and points
# STREAMTRACE_CAPTURE_LIB at the carried capture library when the binary has none beside it. Uses the caller's
# `die` and ROOT.
find_st() {
  ST=""
  if [ ! -x .gpu/bin/streamtrace ] && [ -e benches/gpu_env.sh ] && { [ -e .gpu/streamtrace.xz ] || [ -e .gpu/streamtrace.gz ]; }; then
    # unpacks .gpu/streamtrace.xz and the capture library into .gpu/bin
    # shellcheck disable=SC1091
    source benches/gpu_env.sh
  fi
  local c
  for c in "$ROOT/.gpu/bin/streamtrace" "$ROOT/target/release/streamtrace" "$(command -v streamtrace 2>/dev/null)"; do
    if [ -n "$c" ] && [ -x "$c" ]; then ST=$c; break; fi
  done
  [ -n "$ST" ] || die "no streamtrace binary (.gpu/bin/streamtrace, target/release/streamtrace, PATH)"
  if [ ! -e "$(dirname "$ST")/libstreamtrace_capture.so" ] && [ -z "${STREAMTRACE_CAPTURE_LIB:-}" ] \
     && [ -e "$ROOT/.gpu/libstreamtrace_capture.so" ]; then
    export STREAMTRACE_CAPTURE_LIB=$ROOT/.gpu/libstreamtrace_capture.so
  fi
  echo "== streamtrace: $ST"
}
