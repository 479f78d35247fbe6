# Sourced by the device scripts that run named steps into one log folder
# (ddp.sh, multi.sh, one_gpu.sh, record.sh, try.sh, ...). The caller sets
# `log` (the folder) and STEP_TAIL (lines of each step's output to show,
# default 20).
status=0
summary=()

# step NAME LIMIT_S CMD...: stdout and stderr -> $log/NAME.txt, its tail
# shown, a summary line kept; a failure sets status=1 and the script goes on.
step() {
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS rc=0
  echo "=== $name: $*"
  timeout --kill-after=10 "$limit" "$@" > "$log/$name.txt" 2>&1 || rc=$?
  tail -n "${STEP_TAIL:-20}" "$log/$name.txt"
  summary+=("$(printf '%-22s rc=%-3s %4ss' "$name" "$rc" "$((SECONDS - t0))")")
  [ "$rc" = 0 ] || status=1
}

# fit NAME LIMIT CMD...: step, when LIMIT fits in what is left of the
# caller's `budget` (seconds of the script, bash's SECONDS); a smaller rest
# of at least MIN_S (default 30) becomes the limit, less skips the step and
# says so (a failure).
fit() {
  local name=$1 limit=$2 left=$((budget - SECONDS)); shift 2
  if [ "$left" -lt "${MIN_S:-30}" ]; then
    summary+=("$(printf '%-22s skipped (%ss left)' "$name" "$left")"); status=1; return
  fi
  [ "$left" -lt "$limit" ] && limit=$left
  step "$name" "$limit" "$@"
}

# step_summary TITLE: the summary lines under a heading.
step_summary() {
  echo
  echo "=== summary ($1)"
  printf '%s\n' "${summary[@]}"
}
