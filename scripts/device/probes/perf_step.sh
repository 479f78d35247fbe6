# Sourced by the copy-engine graph probes (s21_ce_graph.sh, s22_ce_graph.sh).
# The caller sets `build` and `log`, and PERF_STEP_SECS (default 40).
# perf_step NAME N [ENV=V ...] -- PERF_ARGS...: one `p2pkit perf all_reduce
# -p N -n 2 -w 1` (results checked) into $log/NAME.txt, then one line: exit
# status, rows, wrong results, seconds, and the first give-up or timeout the
# library logged, followed by the flags each rank still held
# (p2pk_cep_log_flags), if any.
perf_step() {
  local name=$1 n=$2; shift 2
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  local out="$log/$name.txt" t0=$SECONDS
  env "${envs[@]}" timeout --kill-after=5 "${PERF_STEP_SECS:-40}" "$build/p2pkit" perf all_reduce \
    -p "$n" -n 2 -w 1 --repeats 1 "$@" > "$out" 2>&1
  local rc=$?
  local wrong
  wrong=$(grep -E '^ +[0-9]+ +[0-9]+ ' "$out" | awk '{w += $9 + $13} END {print w + 0}')
  printf '%-15s rc=%-3s rows=%-2s wrong=%-3s %3ss  %s\n' "$name" "$rc" \
    "$(grep -cE '^ +[0-9]+ +[0-9]+ ' "$out")" "$wrong" "$((SECONDS - t0))" \
    "$(grep -m1 -oE 'did not take part[^;]*|gave up[^;]*' "$out")"
  grep -E 'flags set in its scratch' "$out" | sed 's/^/    /' | cut -c1-400
}
