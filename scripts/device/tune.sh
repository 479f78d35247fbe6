#!/usr/bin/env bash
# Knob runs on the GPU machine: p2pkit perf at a few sizes under each setting
# of the tuning variables (P2PKIT_COLL_BLOCKS, P2PKIT_COLL_CHUNK, ...), NCCL
# measured once per size in the same call. What the table in src/coll/algo.c
# and the staged defaults are chosen from.
# Usage: scripts/device/tune.sh BUILD_DIR LOG_DIR [SPEC_FILE]
#   SPEC_FILE (default: the list below): one run per line,
#     NAME | VAR=VALUE ... | perf arguments
#   Empty VAR list: "-". Lines starting with # are skipped.
# Output: LOG_DIR/NAME.txt and .json per run, then one line per run and size:
#   name, size, p2pkit us, NCCL us (when the run had --vs-nccl), speedup.
set -uo pipefail
build=${1:?usage: tune.sh BUILD_DIR LOG_DIR [SPEC_FILE]}
log=${2:?usage: tune.sh BUILD_DIR LOG_DIR [SPEC_FILE]}
spec=${3:-}
bin=$build/p2pkit
mkdir -p "$log"
[ -x "$bin" ] || { echo "error: $bin not found; build first" >&2; exit 2; }
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

default_spec() {
  cat <<'EOF'
# -p 2 at 1 MiB (slower than NCCL at the last count) and 16-32 MiB (DDP buckets)
p2_mid_auto   | - | all_reduce -p 2 -b 512K -e 64M -f 2 -n 50 --vs-nccl
p2_1m_b16     | P2PKIT_COLL_BLOCKS=16 | all_reduce -p 2 -b 1M -e 1M -n 100
p2_1m_b64     | P2PKIT_COLL_BLOCKS=64 | all_reduce -p 2 -b 1M -e 1M -n 100
p2_1m_b128    | P2PKIT_COLL_BLOCKS=128 | all_reduce -p 2 -b 1M -e 1M -n 100
p2_1m_ll      | P2PKIT_PROTO=ll P2PKIT_BUFFER_SIZE=64M | all_reduce -p 2 -b 1M -e 1M -n 100
p2_1m_ll_b512 | P2PKIT_PROTO=ll P2PKIT_BUFFER_SIZE=64M P2PKIT_COLL_BLOCKS=512 | all_reduce -p 2 -b 1M -e 1M -n 100
p2_16m_b32    | P2PKIT_COLL_BLOCKS=32 | all_reduce -p 2 -b 16M -e 32M -n 30
p2_16m_b66    | P2PKIT_COLL_BLOCKS=66 | all_reduce -p 2 -b 16M -e 32M -n 30
p2_16m_b264   | P2PKIT_COLL_BLOCKS=264 | all_reduce -p 2 -b 16M -e 32M -n 30
p2_16m_one    | P2PKIT_ALGO=oneshot | all_reduce -p 2 -b 16M -e 32M -n 30
# staged (no P2P): blocks per side and mailbox size
nop2p_auto    | P2PKIT_P2P_DISABLE=1 NCCL_P2P_DISABLE=1 | all_reduce -g 2 -b 128M -e 128M -n 5 -w 2 --vs-nccl
nop2p_b8      | P2PKIT_P2P_DISABLE=1 P2PKIT_COLL_BLOCKS=8 | all_reduce -g 2 -b 128M -e 128M -n 5 -w 2
nop2p_b32     | P2PKIT_P2P_DISABLE=1 P2PKIT_COLL_BLOCKS=32 | all_reduce -g 2 -b 128M -e 128M -n 5 -w 2
nop2p_b64     | P2PKIT_P2P_DISABLE=1 P2PKIT_COLL_BLOCKS=64 | all_reduce -g 2 -b 128M -e 128M -n 5 -w 2
nop2p_buf256  | P2PKIT_P2P_DISABLE=1 P2PKIT_BUFFER_SIZE=256M | all_reduce -g 2 -b 128M -e 128M -n 5 -w 2
nop2p_b32_256 | P2PKIT_P2P_DISABLE=1 P2PKIT_COLL_BLOCKS=32 P2PKIT_BUFFER_SIZE=256M | all_reduce -g 2 -b 128M -e 128M -n 5 -w 2
nop2p_t1024   | P2PKIT_P2P_DISABLE=1 P2PKIT_COLL_BLOCKS=32 P2PKIT_COLL_CHUNK=1M | all_reduce -g 2 -b 128M -e 128M -n 5 -w 2
EOF
}

if [ -n "$spec" ]; then cat "$spec"; else default_spec; fi > "$log/spec.txt"
lines=()
while IFS= read -r line; do
  [[ -z "${line// }" || "$line" == \#* ]] && continue
  IFS='|' read -r name envs args <<< "$line"
  name=$(echo $name); envs=$(echo $envs); [ "$envs" = - ] && envs=
  t0=$SECONDS rc=0
  # shellcheck disable=SC2086
  env $envs timeout 180 "$bin" perf $args --json-file "$log/$name.json" > "$log/$name.txt" 2>&1 || rc=$?
  echo "=== $name ($envs) perf $args: exit $rc in $((SECONDS - t0)) s"
  grep -v '^#' "$log/$name.txt" | grep -E '^ *[0-9]' | head -n 20
  [ "$rc" = 0 ] || tail -n 5 "$log/$name.txt"
  lines+=("$name exit $rc")
done < "$log/spec.txt"
echo
echo "=== runs"
printf '%s\n' "${lines[@]}"
