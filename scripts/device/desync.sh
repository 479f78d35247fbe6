#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Desync reports on one GPU (nvidia-h200 or -h100), in one device call, both
# halves of issue 48: the C API's jobs and torch.distributed's. In order,
# each with its limit and the time it should take on a fresh 16-core machine
# (estimates until the first run: the summary's seconds replace them):
#   build        test_desync, bench_trace, the CLI                      ~150 s
#   jobs         tests/gpu/test_desync: three ranks sharing the GPU
#                (P2PKIT_SHARE_GPUS=1), a process each; a rank skips a
#                call, one passes another count, one dies, one hangs and a
#                signal dumps them; each job's reports judged by the library
#                and by `p2pkit trace`, which must name the rank and the
#                call; each case its own process and log (run_cases: a skip
#                is judged)                                              ~60 s
#   torch_build  the PyTorch backend (p2pkit._c10d) in the same build tree
#                (P2PKIT_TORCH_BACKEND=ON) against the machine's torch, and
#                a package of it for the jobs (PYTHONPATH, P2PKIT_LIB)  ~60 s
#   torch.*      python/tests/torch_desync_case.py: the same four faults
#                through init_process_group("cuda:p2pkit", timeout=), three
#                ranks sharing the GPU; the reports the library and the
#                backend's watchdog leave judged by `p2pkit trace` (the C
#                jobs' words), and each report's trigger; idle: rank 1 skips
#                the call and makes no other (no report of its own: the
#                verdict names it, still running); die twice more, with
#                P2PKIT_TORCH_ASYNC_ERROR_HANDLING=0 (the watchdog records)
#                and 3 (it ends the process), no abort either way: its own
#                finding dumps through p2pkit_comm_dump_trace
#                                                          ~10-15 s each, ~90 s
#   verdicts     `p2pkit trace` on each job's reports (kept under
#                LOG_DIR/jobs: recordings of real dumps to replace
#                tests/data/trace's; torch-* the torch jobs')            ~5 s
#   cost         bench_trace: the host time per 8-byte all-reduce (two ranks
#                sharing the GPU, one process) with the ring of last calls on
#                and off in turns, one run, and p2pk_trace_record alone  ~60 s
#   torch.nccl-* the four faults on ProcessGroupNCCL (one simulated host per
#                rank: NCCL_HOSTID, loopback), judged from its flight
#                recorder dumps (on its timeout; the hang by SIGUSR2 through
#                the job's handler), each job its own verdict; kept in
#                LOG_DIR/jobs/torch-nccl-*                 ~15-35 s each, ~100 s
# Usage: RECORD_COMMIT=<sha> scripts/device/desync.sh LOG_DIR   (e.g. "$OUT")
#   BUDGET_S (default 560), DS_SKIP="jobs torch nccl cost ..." leaves parts out;
#   DS_PYTHON=VENV/bin/python: the torch jobs on the package installed there
#   (torch.sh's wheel) and its `p2pkit`, no build (with DS_SKIP="jobs cost").
set -uo pipefail
cd "$(dirname "$0")/../.."
log=${1:?usage: desync.sh LOG_DIR}
budget=${BUDGET_S:-560}
STEP_TAIL=${STEP_TAIL:-12}
. scripts/device/lib.sh
export P2PKIT_SHARE_GPUS=1
want() { [[ " ${DS_SKIP:-} " != *" $1 "* ]]; }
machine_info
py=python3
if [ -n "${DS_PYTHON:-}" ]; then
  py=$DS_PYTHON bin=$(dirname "$DS_PYTHON")/p2pkit
  [ -x "$bin" ] || { echo "DS_PYTHON: no p2pkit beside $DS_PYTHON (install the wheel there)"; exit 1; }
fi
if [ -z "${DS_PYTHON:-}" ] || want jobs || want cost; then
  BUILD_SECS=300 build_tree test_desync bench_trace p2pkit_cli
fi
if want jobs; then
  rm -rf "$log/jobs"
  fit jobs 240 env DESYNC_KEEP_DIR="$log/jobs" CASE_SECS=100 bash -c 'run_cases "$@"' _ "$log/cases" \
    test_desync
fi
# tjob NAME LIMIT ARGS...: one torch job (its own limit 15 s under the
# step's, so it reports itself), its reports kept in $log/jobs/torch-NAME.
tjob() {
  local name=$1 limit=$2; shift 2
  fit "torch.$name" "$limit" "$py" python/tests/torch_desync_case.py "$@" --cli "$bin" \
    --limit "$((limit - 15))" --keep "$log/jobs/torch-$name"
}
torch_jobs() {
  for m in skip count die hang idle; do tjob "$m" 60 "$m"; done
  tjob die.h0 60 die --handling 0
  tjob die.h3 60 die --handling 3
}
if want torch && [ -n "${DS_PYTHON:-}" ]; then
  torch_jobs
elif want torch; then
  fit torch_build 240 bash -c "cmake -S . -B $build -DP2PKIT_TORCH_BACKEND=ON \
    -DPython_EXECUTABLE=\$(command -v python3) && cmake --build $build -j\$(nproc) --target p2pkit_c10d"
  grep -m1 -E "PyTorch backend|torch not found|torch .* is (older|built for)" "$log/torch_build.txt"
  stage=$(mktemp -d) # the package as a wheel holds it: p2pkit/*.py, the backend beside them
  if mkdir "$stage/p2pkit" && cp python/p2pkit/*.py "$build"/python/p2pkit/csrc/_c10d*.so "$stage/p2pkit/"; then
    export PYTHONPATH=$stage P2PKIT_LIB=$PWD/$build/libp2pkit.so
    torch_jobs
  else
    summary+=("torch.*                    not run: no backend to run (torch_build.txt)"); status=1
  fi
fi
if want verdicts; then
  for d in "$log"/jobs/*/; do
    [ -d "$d" ] && fit "verdict.$(basename "$d")" 20 "$bin" trace "$d"
  done
fi
if want cost; then
  fit cost 90 "$build/tests/bench_trace" --iters 200 --reps 21
fi
if want nccl; then
  for m in skip count die hang; do tjob "nccl-$m" 75 "$m" --backend nccl; done
fi
step_summary "desync reports on $(nvidia-smi -L 2>/dev/null | wc -l) GPU(s); logs in $log"
exit "$status"
