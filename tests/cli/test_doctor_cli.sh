#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# p2pkit doctor: options, exit codes (0 OK, 1 WARN, 2 FAIL), text and JSON on
# every recorded machine of tests/data/sysfs (topology + sysfs tree + NCCL
# log), and the run without a GPU.
set -uo pipefail
bin=$1 data=$2
fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
expect() { # desc want_rc cmd... ; stdout in $tmp/out, stderr in $tmp/err
  local desc=$1 want=$2; shift 2
  "$@" > "$tmp/out" 2> "$tmp/err"; local rc=$?
  if [ "$rc" != "$want" ]; then echo "FAIL $desc: exit $rc, wanted $want"; cat "$tmp/out" "$tmp/err"; fail=1
  else echo "ok   $desc"; fi
}
has() { # desc pattern (grep -E on $tmp/out)
  grep -E -q -- "$2" "$tmp/out" || { echo "FAIL $1: no line matching '$2'"; cat "$tmp/out"; fail=1; }
}

expect "doctor --help" 0 "$bin" doctor --help
has "help names the exit codes" "Exit code: 0 all OK, 1 a WARN, 2 a FAIL"
expect "doctor unknown flag" 2 "$bin" doctor --bogus
grep -q "unknown option '--bogus'" "$tmp/err" || { echo "FAIL unknown-flag message"; fail=1; }
expect "doctor --from without a file" 2 "$bin" doctor --from
expect "doctor --from a missing file" 2 "$bin" doctor --from "$tmp/nope.p2pkit"
[ "$(grep -c . "$tmp/err")" = 1 ] || { echo "FAIL missing-file error is not one line"; cat "$tmp/err"; fail=1; }
expect "doctor --probe-size too small" 2 "$bin" doctor --probe-size 100

command -v python3 >/dev/null || { echo "SKIP: python3 builds the recorded sysfs trees"; exit 77; }
python3 "$data/../../scripts/make_sysfs_fixtures.py" "$data/sysfs" "$tmp/fx" || { echo "FAIL fixture generator"; exit 1; }

# scenario  topology-of  exit  a line the diagnosis must contain
while read -r s topo want line; do
  args=(doctor --from "$data/sysfs/$topo/topo.p2pkit")
  [ -f "$data/sysfs/$s/nccl.log" ] && args+=(--nccl-log "$data/sysfs/$s/nccl.log")
  expect "doctor on $s" "$want" env P2PKIT_SYSFS_ROOT="$tmp/fx/$s" "$bin" "${args[@]}"
  has "$s" "$line"
  has "$s exit line" "\(exit $want\)$"
  expect "doctor --json on $s" "$want" env P2PKIT_SYSFS_ROOT="$tmp/fx/$s" "$bin" "${args[@]}" --json
  python3 - "$tmp/out" "$want" <<'EOF' || { echo "FAIL $s --json"; cat "$tmp/out"; fail=1; }
import json, sys
d = json.load(open(sys.argv[1]))
want = int(sys.argv[2])
assert d["schema_version"] == 1 and d["exit_code"] == want, d
f = d["findings"]
assert f and all(x["level"] in ("OK", "WARN", "FAIL", "SKIP") for x in f)
worst = max([0] + [{"WARN": 1, "FAIL": 2}.get(x["level"], 0) for x in f])
assert worst == want, (worst, want)
assert sum(d["summary"].values()) == len(f)
assert all(x["action"] for x in f if x["level"] in ("WARN", "FAIL")), "a WARN/FAIL without an action"
EOF
done <<'EOF'
clean            clean            0 ^OK +GPU0-GPU1 +nccl +NCCL uses P2P/CUMEM
acs_switch       acs_switch       1 ^WARN +GPU0-GPU1 +acs .*0000:02:00.0, 0000:02:01.0
acs_noroot       acs_switch       0 ^SKIP +GPU0-GPU1 +acs .*needs root
iommu_translated iommu_translated 2 ^WARN +GPU0-GPU1 +iommu .*DMA-FQ
two_sockets      two_sockets      2 ^FAIL +GPU0-GPU1 +sockets .*NUMA 0 and 1
gen3_x8          gen3_x8          1 ^WARN +GPU0 +pcie-link .*Gen3 x8
vm_h200          vm_h200          0 ^OK +system +vm +running in a virtual machine
nccl_shm         nccl_shm         2 ^FAIL +GPU0-GPU1 +nccl .*although direct P2P works
clean            clean            0 ^SKIP +system +gdr +no RDMA NIC on this machine
gdr_ok           gdr_ok           0 ^OK +GPU1 +gdr +nearest NIC NIC0 \(mlx5_0\) is PIX
gdr_dmabuf       gdr_ok           0 ^OK +system +gdr +GPUDirect RDMA through dma-buf
gdr_remote       gdr_remote       1 ^WARN +GPU0 +gdr +nearest NIC NIC0 \(mlx5_0\) is SYS, on the other CPU socket
EOF

# A recorded machine without its sysfs: this machine's /sys is not used for it.
expect "doctor --from without P2PKIT_SYSFS_ROOT" 0 env -u P2PKIT_SYSFS_ROOT "$bin" doctor \
  --from "$data/sysfs/acs_switch/topo.p2pkit"
has "sysfs checks skipped" "^SKIP +GPU0-GPU1 +acs .*P2PKIT_SYSFS_ROOT"

# A recorded machine writes NCCL's topology on request.
expect "doctor --dump-nccl" 0 env P2PKIT_SYSFS_ROOT="$tmp/fx/vm_h200" "$bin" doctor \
  --from "$data/sysfs/vm_h200/topo.p2pkit" --dump-nccl "$tmp/nccl-topo.xml"
grep -q "<system" "$tmp/nccl-topo.xml" || { echo "FAIL --dump-nccl wrote no NCCL topology"; fail=1; }
expect "doctor --nccl-log missing" 2 "$bin" doctor --from "$data/sysfs/clean/topo.p2pkit" \
  --nccl-log "$tmp/none.log"
grep -q "none.log" "$tmp/err" || { echo "FAIL --nccl-log error names the file"; fail=1; }

# Without a GPU: the checks that need none run, the others say why not; no
# driver is a FAIL (exit 2), never "no problem found".
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  expect "doctor without a GPU, recorded sysfs" 2 env P2PKIT_SYSFS_ROOT="$tmp/fx/gen3_x8" "$bin" doctor
  has "no-GPU driver line" "^FAIL +system +driver .*3 NVIDIA GPUs found in sysfs"
  has "no-GPU link from sysfs" "^WARN +GPU0 +pcie-link .*Gen3 x8.*from sysfs"
  has "no-GPU NCCL skipped" "^SKIP +NCCL +nccl .*needs the driver"
  has "no-GPU bandwidth skipped" "^SKIP +system +bandwidth .*needs the driver"
  mkdir -p "$tmp/empty"
  expect "doctor without a GPU or sysfs" 2 env P2PKIT_SYSFS_ROOT="$tmp/empty" "$bin" doctor
  has "nothing to check" "^SKIP +system +gpus +no NVIDIA GPU found"
  expect "doctor without a GPU, this machine" 2 "$bin" doctor
  has "this machine: driver fails" "^FAIL +system +driver"
  grep -q "no problem found" "$tmp/out" && { echo "FAIL no driver said no problem found"; fail=1; }
  expect "doctor --json without a GPU" 2 "$bin" doctor --json
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["exit_code"]==2' "$tmp/out" \
    || { echo "FAIL no-GPU --json"; fail=1; }
fi
exit $fail
