# SPDX-License-Identifier: BSD-3-Clause
# The device suites' shared library (record.sh, sanitize.sh, one_gpu.sh,
# multi.sh, sweep.sh source it from the repository root). The caller sets
# `log` (the log folder) before sourcing; optional: `budget` (seconds for
# the whole suite, used by fit), STEP_TAIL (lines of each step shown).
#
# Every suite: NVLink multicast off (it can take the host's GPUs out of
# service), a Release build in build-dev without -Werror (the device's gcc
# warns where CI's does not), machine.txt first, one summary line a step,
# logs under $log, exit 1 when any step failed.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=$PATH:/usr/local/cuda/bin
export P2PKIT_TIMEOUT=${P2PKIT_TIMEOUT:-20}
export build=${BUILD:-build-dev}
bin=$build/p2pkit
mkdir -p "$log"
status=0
summary=()

# machine_info: what the run ran on, for the log and scripts/baseline.py.
# The device's copy of the tree may carry a stale .git, so the caller names
# the commit it sent (RECORD_COMMIT).
machine_info() {
  { date -u +%FT%TZ
    echo "commit: ${RECORD_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
    nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total --format=csv
    nvidia-smi topo -m
    nvcc --version | tail -n 1
    pkg-config --modversion hwloc
    ls -l /usr/lib/x86_64-linux-gnu/libnccl.so* 2>&1
  } > "$log/machine.txt" 2>&1
  export ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
}

# skips_judged ARGS...: scripts/device/skips.py on a GPU run's output for this
# machine's $ngpu GPUs (0, when nvidia-smi saw none, is itself a failure):
# a skip passes only where its reason names more GPUs than the machine has
# (or, with P2PKIT_SHARE_GPUS=1, only what sharing does not lift).
skips_judged() {
  local share=()
  [ "${P2PKIT_SHARE_GPUS:-0}" = 1 ] && share=(--share-gpus)
  python3 scripts/device/skips.py --gpus "${ngpu:-0}" ${share[@]+"${share[@]}"} "$@"
}
export -f skips_judged

# step NAME LIMIT_S CMD...: stdout and stderr -> $log/NAME.txt, its tail
# shown, a summary line kept; a failure sets status=1 and the suite goes on.
# Returns the command's exit status.
step() {
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS rc=0
  echo "=== $name: $*"
  timeout --kill-after=10 "$limit" "$@" > "$log/$name.txt" 2>&1 || rc=$?
  tail -n "${STEP_TAIL:-20}" "$log/$name.txt"
  summary+=("$(printf '%-26s rc=%-3s %4ss' "$name" "$rc" "$((SECONDS - t0))")")
  [ "$rc" = 0 ] || status=1
  return "$rc"
}

# fit NAME LIMIT CMD...: step, when LIMIT fits in what is left of `budget`
# (seconds since the suite started); a smaller rest of at least MIN_S
# (default 30) becomes the limit, less skips the step and says so (a failure).
fit() {
  local name=$1 limit=$2 left=$((${budget:-540} - SECONDS)); shift 2
  if [ "$left" -lt "${MIN_S:-30}" ]; then
    summary+=("$(printf '%-26s skipped (%ss left)' "$name" "$left")"); status=1; return
  fi
  [ "$left" -lt "$limit" ] && limit=$left
  step "$name" "$limit" "$@"
}

# build_tree [TARGET...]: configure and build build-dev (only the targets
# named, if any) within BUILD_SECS (default 400); the suite stops when it fails.
build_tree() {
  local targets=${*:+--target $*}
  step build "${BUILD_SECS:-400}" bash -c "cmake -S . -B $build -DCMAKE_BUILD_TYPE=Release -DP2PKIT_WERROR=OFF \
    && cmake --build $build -j\$(nproc) $targets" || { step_summary "build failed; logs in $log"; exit 1; }
  echo "compiler warnings: $(grep -c 'warning:' "$log/build.txt")"
}

# run_cases DIR ITEM...: each case of the collective GPU tests as its own
# process, with its own limit (CASE_SECS, default 150) and log, so a hang
# names its case. ITEM: a test (every case of it) or test:case. Exit 77
# (the machine lacks what the case needs; the test says which) is a skip,
# a failure unless skips_judged expects it on this machine.
run_cases() {
  local dir=$1 rc=0 item t cases c t0 crc args; shift
  mkdir -p "$dir"
  for item in "$@"; do
    t=${item%%:*}
    if [ "$item" != "$t" ]; then cases=${item#*:}
    else cases=$(grep -o 'T_CASE([a-z0-9_]*)' "tests/gpu/$t.c" | sed 's/T_CASE(\(.*\))/\1/' | grep -v '^quick')
    fi
    for c in ${cases:-ALL}; do
      t0=$SECONDS
      args=(); [ "$c" = ALL ] || args=("$c")
      timeout --kill-after=5 "${CASE_SECS:-150}" "$build/tests/$t" ${args[@]+"${args[@]}"} > "$dir/$t.$c.txt" 2>&1
      crc=$?
      printf 'ranks %-3s %-24s %-40s rc=%-3s %4ss\n' "${P2PKIT_TEST_NRANKS:-all}" "$t" "$c" "$crc" "$((SECONDS - t0))"
      if [ "$crc" = 77 ]; then
        grep -m1 SKIP "$dir/$t.$c.txt" | sed 's/^/    /'
        skips_judged --output "$dir/$t.$c.txt" | sed 's/^/    /'
        [ "${PIPESTATUS[0]}" = 0 ] || rc=1
      elif [ "$crc" != 0 ]; then rc=1; tail -n 15 "$dir/$t.$c.txt" | sed 's/^/    /'; fi
    done
  done
  return $rc
}
export -f run_cases # steps run it under their time limit: bash -c 'run_cases "$@"' _ DIR ITEM...

# ctest_gpu NAME LIMIT CTEST_ARGS...: the GPU tests through ctest (a fit
# step), then a step NAME.skips judging every skip they printed, from the
# run's LastTest.log (kept as $log/NAME.LastTest.log) and ctest's console
# (CTest counts a skipped test as passed).
ctest_gpu() {
  local name=$1 limit=$2 last=$build/Testing/Temporary/LastTest.log; shift 2
  rm -f "$last"
  fit "$name" "$limit" ctest --test-dir "$build" "$@"
  [ -f "$last" ] || return 0 # the step did not run: fit said so
  cp "$last" "$log/$name.LastTest.log"
  step "$name.skips" 30 bash -c 'skips_judged "$@"' _ "$log/$name.LastTest.log" "$log/$name.txt"
}

# perf_table NAME [VAR=VALUE ...] -- PERF_ARGS...: one `p2pkit perf` table
# into $log/perf/NAME.{txt,json} (the JSON is what scripts/baseline.py reads).
perf_table() {
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  mkdir -p "$log/perf"
  fit "perf.$name" "${PERF_SECS:-240}" env ${envs[@]+"${envs[@]}"} "$bin" perf "$@" \
    --json-file "$log/perf/$name.json"
}

# sweep SPEC_FILE DIR: one `p2pkit perf` per spec line, NAME | VAR=V ... | ARGS
# ("-" for no variables; # comments), then one line per run. NCCL is timed
# in the same call where the line says --vs-nccl.
sweep() {
  local spec=$1 dir=$2 rc=0 line name envs args
  mkdir -p "$dir"
  while IFS= read -r line; do
    [[ -z "${line// }" || "$line" == \#* ]] && continue
    IFS='|' read -r name envs args <<< "$line"
    name=$(echo $name); envs=$(echo $envs); [ "$envs" = - ] && envs=
    # shellcheck disable=SC2086
    env $envs timeout 180 "$bin" perf $args --json-file "$dir/$name.json" > "$dir/$name.txt" 2>&1 || rc=1
    echo "=== $name ($envs) perf $args"
    grep -E '^ *[0-9]' "$dir/$name.txt" | head -n 20
  done < "$spec"
  return $rc
}

# step_summary TITLE: the summary lines under a heading.
step_summary() {
  echo
  echo "=== summary ($1)"
  printf '%s\n' "${summary[@]}"
}
