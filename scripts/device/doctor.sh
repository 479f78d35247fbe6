#!/usr/bin/env bash
# p2pkit doctor on the GPU machine: the text report, the JSON report, the
# NCCL ranks' debug log and NCCL's topology, all into LOG_DIR (copy the
# reports to bench/results/ to record them). About 30 s of GPU time.
# Usage: scripts/device/doctor.sh BUILD_DIR LOG_DIR
# Exit: the doctor's own (0 all OK, 1 a WARN, 2 a FAIL).
set -uo pipefail
build=${1:?usage: doctor.sh BUILD_DIR LOG_DIR}
log=${2:?usage: doctor.sh BUILD_DIR LOG_DIR}
mkdir -p "$log"
# Never NVLink multicast on these machines (the doctor forces it for its own
# NCCL ranks too).
export NCCL_NVLS_ENABLE=0
bin=$build/p2pkit
{ date -u +%Y-%m-%dT%H:%M:%SZ; hostname; id -un; } > "$log/doctor-run.txt"

t0=$SECONDS
timeout --kill-after=10 100 "$bin" doctor --save-nccl-log "$log/doctor-nccl.log" \
  --dump-nccl "$log/doctor-nccl-topo.xml" > "$log/doctor.txt" 2> "$log/doctor.err"
rc=$?
echo "p2pkit doctor: exit $rc in $((SECONDS - t0)) s" | tee -a "$log/doctor-run.txt"

t0=$SECONDS
timeout --kill-after=10 100 "$bin" doctor --json > "$log/doctor.json" 2> "$log/doctor-json.err"
rcj=$?
echo "p2pkit doctor --json: exit $rcj in $((SECONDS - t0)) s" | tee -a "$log/doctor-run.txt"
if command -v python3 >/dev/null; then
  python3 - "$log/doctor.json" "$rcj" <<'PY' 2>&1 | tee -a "$log/doctor-run.txt"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["exit_code"] == int(sys.argv[2]), "exit code in the JSON differs from the process's"
print("doctor --json:", d["summary"])
for f in d["findings"]:
    if f["level"] != "OK":
        print(" ", f["level"], f["subject"], f["check"], "-", f["reason"])
PY
fi
cat "$log/doctor.txt" "$log/doctor.err"
exit $rc
