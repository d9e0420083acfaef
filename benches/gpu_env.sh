# Sourced by the benches/gpu_*.sh scripts on the GPU machine: unpacks the streamtrace binary and the capture
# library carried in .gpu/ (built on the development machine) into .gpu/bin, and puts nvcc on the PATH.
# Once per carried build: the scripts source this from each other.
# The binary comes as streamtrace.xz (8 MB smaller than gzip's, room in the carry for more) or streamtrace.gz;
# xz is unpacked by Python's lzma (the machine may lack the xz tool).
packed=.gpu/streamtrace.xz
[ -e $packed ] || packed=.gpu/streamtrace.gz
if [ ! .gpu/bin/streamtrace -nt $packed ] || [ ! .gpu/bin/libstreamtrace_capture.so -nt .gpu/libstreamtrace_capture.so ]; then
  mkdir -p .gpu/bin
  case $packed in
    *.xz) python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
      $packed .gpu/bin/streamtrace ;;
    *) gunzip -c $packed > .gpu/bin/streamtrace ;;
  esac
  chmod +x .gpu/bin/streamtrace
  cp .gpu/libstreamtrace_capture.so .gpu/bin/
fi
export PATH=/usr/local/cuda/bin:$PATH

# Sets `no_site` to benches/torch_train_loop.py run under `python -S`: no site, so the capture's sitecustomize is
# never imported and capture stays at tier T1; torch is found by its path (gpu_loop_parts.sh, gpu_perf_profile.sh).
set_loop_without_site() {
  local site_packages
  site_packages=$(python3 -c 'import site; print(site.getsitepackages()[0])')
  no_site=(python3 -S -c "import sys; sys.path.append('$site_packages'); sys.argv = ['benches/torch_train_loop.py']; exec(compile(open('benches/torch_train_loop.py').read(), 'benches/torch_train_loop.py', 'exec'))")
}
# The scripts collect their traces as trace.*.json: they record JSON unless a script asks for binary
# (gpu_binary_trace.sh does). `streamtrace capture --trace-format` and the capture library read this variable.
export STREAMTRACE_TRACE_FORMAT=${STREAMTRACE_TRACE_FORMAT:-json}

# A text report without what names the trace or times the run (the capture-cost line, the lines naming the trace
# file or process, paths) and without what differs between two runs of one program (stream handles and
# addresses, in hex): what stays is each finding's kind, ops, streams by number, sizes and source lines. For
# comparing two reports of one program (gpu_online.sh, gpu_binary_trace.sh).
normalized_report() {
  # A directory's analysis adds a heading per trace and a job summary.
  grep -vE '^(Capture cost|streamtrace: (/|process|PROC)|== [^=]|JOB SUMMARY)' "$1" |
    sed -E 's/process [0-9]+( \(image [0-9]+\))?/TRACE/g; s#[^ ]*trace\.[0-9]+(\.[0-9]+)?\.(json|stbin)#TRACE#g' |
    sed -E 's/0x[0-9a-f]+/0x_/g' |
    grep -vE '^streamtrace: (cannot|the )|^ +TRACE$'
}

# A normalized report as one word per line: the two reports wrap their lines at different places where a stream
# handle or a path differs in length, which says nothing about their findings; and the two runs' host threads
# have other ids (joined first: a wrap may fall between "thread" and its id).
report_words() {
  tr '\n' ' ' | tr -s ' ' | sed -E 's/thread [0-9]+/thread N/g' | tr ' ' '\n'
}

# The report in a capture's log (the program's own output comes first: the report starts at its first report
# line), as report_words has it.
captured_report_words() {
  normalized_report "$1" | sed -n '/^\(Capture cost\|Access tier\|Host watch\|Host order\|SUMMARY\|RACE\|==\)/,$p' | report_words
}

# Runs a command with its output dropped, under STEP_TIMEOUT seconds (default 300), and says its wall time, process
# start to exit, and its exit status: "1.234 s (exit 0)" (awk: the GPU machine has no bc).
wall() {
  local t0 t1 rc
  t0=$(date +%s.%N)
  timeout "${STEP_TIMEOUT:-300}" "$@" > /dev/null 2>&1
  rc=$?
  t1=$(date +%s.%N)
  echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }') s (exit $rc)"
}
