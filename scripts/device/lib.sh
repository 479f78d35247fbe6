# Sourced by the device scripts that run named steps into one log folder
# (ddp.sh, multi.sh). The caller sets `log` (the folder) and STEP_TAIL (lines
# of each step's output to show, default 20).
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

# step_summary TITLE: the summary lines under a heading.
step_summary() {
  echo
  echo "=== summary ($1)"
  printf '%s\n' "${summary[@]}"
}
