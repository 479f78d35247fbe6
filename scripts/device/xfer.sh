#!/usr/bin/env bash
# The copy layer on the 2x H200 device machine: GPU tests, then every speed
# target of the copy/bench issue at 256 MiB, each ratio from one run, with raw
# text, JSON, CSV and SVG kept in LOG_DIR and a summary printed last.
#
# Usage: scripts/device/xfer.sh BUILD_DIR LOG_DIR
#   BUILD_DIR: a configured and built tree (cmake -S . -B BUILD_DIR && cmake --build BUILD_DIR)
#   LOG_DIR:   created if missing; everything is written there
#   XFER_FULL_SWEEP=1: time every SM kernel configuration (180, push and pull)
#   instead of the ~20 most promising (--sm-sweep=short); a few seconds more.
# Well under 90 s of GPU time (run6, the first run: 32 s, most of it the GPU
# tests). Reads the GPUs' state only (never changes clocks, never resets); the
# caller sets NCCL_* and the like.
set -uo pipefail
build=${1:?usage: xfer.sh BUILD_DIR LOG_DIR}
logs=${2:?usage: xfer.sh BUILD_DIR LOG_DIR}
bin="$build/p2pkit"
[ -x "$bin" ] || { echo "xfer.sh: $bin not found; build first" >&2; exit 2; }
mkdir -p "$logs"
summary="$logs/summary.txt"
: >"$summary"
status=0

step() { # step NAME CMD...: stdout -> NAME.txt, stderr -> NAME.err, timing in the summary
  local name=$1
  shift
  local t0=$SECONDS
  "$@" >"$logs/$name.txt" 2>"$logs/$name.err"
  local rc=$?
  printf '%-12s rc=%d %4ds  %s\n' "$name" "$rc" $((SECONDS - t0)) "$*" | tee -a "$summary"
  [ "$rc" = 0 ] || { status=1; tail -5 "$logs/$name.err" | sed 's/^/    /'; }
  return 0
}

# The machine as found (read-only queries).
nvidia-smi --query-gpu=index,name,pci.bus_id,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu,pcie.link.gen.current,pcie.link.gen.max \
  --format=csv >"$logs/gpus.csv" 2>&1
nvidia-smi topo -m >"$logs/nvidia-smi-topo.txt" 2>&1
step topo "$bin" topo

# 1. Correctness: every method x {1, 3, 4 KiB+1, 1 GiB+7} B x offsets x both
#    directions, P2P on and disabled; the bench engine, its OOM handling, the CLI.
step gpu-tests ctest --test-dir "$build" -L gpu -R copy --output-on-failure

# 2. Every method one way and both ways at 256 MiB, the cudaMemcpyPeerAsync
#    anchor in the same run (ratios: x memcpy-peer).
step b256 "$bin" bench --methods all --mode oneway,both -b 256M -n 20 -w 5 \
  --json="$logs/b256.json" --csv="$logs/b256.csv"

# 3. P2P disabled: p2pkit's staged pipeline vs the driver's own fallback
#    (peer access off) vs naive staging, one run.
P2PKIT_P2P_DISABLE=1 step nop2p "$bin" bench --methods staged,driver,staged-serial -b 256M -n 20 -w 5 \
  --json="$logs/nop2p.json"

# 4. Small transfers: back-to-back copies and the SM write + flag ping-pong.
step latency "$bin" bench --latency --lat-bytes 8 --lat-iters 1000 -n 20 --json="$logs/latency.json"

# 5. Sizes 8 B .. 1 GiB by 8, every method, for the plot.
step sweep "$bin" bench --methods all -b 8 -e 1G -f 8 -n 10 -w 3 \
  --json="$logs/sweep.json" --csv="$logs/sweep.csv" --plot "$logs/sweep.svg"

# 6. SM kernel shapes, push and pull: the short list (the fastest of the full
#    sweep so far, the default, TMA tiles x stages x blocks) or, with
#    XFER_FULL_SWEEP=1, every stride/chunk x hint x blocks x threads x unroll and
#    TMA blocks x tile x stages; then staging chunk x depth x ramp. A
#    configuration that fails is listed with its reason and the sweep goes on.
sm_sweep=--sm-sweep=short
[ "${XFER_FULL_SWEEP:-0}" = 1 ] && sm_sweep=--sm-sweep=full
step smsweep "$bin" bench --pairs 0:1 "$sm_sweep" -b 256M -n 10 --json="$logs/smsweep.json"
step stagesweep "$bin" bench --pairs 0:1 --stage-sweep -b 256M -n 10 --json="$logs/stagesweep.json"

# 7. The fastest SM configuration found, both directions, same run as the anchor.
best=""
if command -v python3 >/dev/null; then
  best=$(python3 - "$logs/smsweep.json" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
    push = d["best"].get("p2p-sm-push", {}).get("median_gbps", 0)
    pull = d["best"].get("p2p-sm-pull", {}).get("median_gbps", 0)
    # the configuration whose slower direction is fastest
    by = {}
    for s in d["sweeps"]:
        if s.get("status") == "ok" and s.get("verified") and s["method"] in ("p2p-sm-push", "p2p-sm-pull"):
            by.setdefault(s["config"], {})[s["method"]] = s["median_gbps"]
    both = [(min(v.values()), c) for c, v in by.items() if len(v) == 2]
    print(max(both)[1] if both else "")
except Exception:
    print("")
EOF
)
fi
if [ -n "$best" ]; then
  echo "best SM configuration (both directions): $best" | tee -a "$summary"
  P2PKIT_SM_COPY_CONFIG="$best" step smbest "$bin" bench --methods memcpy-peer,push,pull -b 256M -n 20 -w 5 \
    --json="$logs/smbest.json"
fi

# Summary: each target against its same-run measurement.
if command -v python3 >/dev/null; then
  python3 - "$logs" <<'EOF' | tee -a "$summary"
import json, os, sys
logs = sys.argv[1]
def load(name):
    try:
        return json.load(open(os.path.join(logs, name)))
    except Exception:
        return None
def rows(d, method, mode="oneway", total=False):
    if not d:
        return []
    return [r for r in d["results"] if r["method"] == method and r["mode"] == mode
            and r["total"] == total and r["status"] == "ok"]
def med(d, method, mode="oneway", total=False):
    v = sorted(r["median_gbps"] for r in rows(d, method, mode, total))
    return v[len(v) // 2] if v else None
out = []
def target(name, value, ok, unit=""):
    if value is None:
        out.append(f"  {name:58s} {'(not measured)':>14s}  MISSING")
    else:
        out.append(f"  {name:58s} {value:12.3f}{unit:2s}  {'ok' if ok(value) else 'MISS'}")
b = load("b256.json")
for r in rows(b, "p2p-ce"):
    target(f"p2p-ce / memcpy-peer, one way {r['src']}->{r['dst']} (>= 0.98)", r.get("ratio_to_memcpy_peer"), lambda v: v >= 0.98)
t = rows(b, "p2p-ce", "both", True)
target("p2p-ce both ways at once, GB/s (>= 760)", t[0]["median_gbps"] if t else None, lambda v: v >= 760)
for m in ("p2p-sm-push", "p2p-sm-pull"):
    for r in rows(b, m):
        target(f"{m} {r['src']}->{r['dst']}, default config, GB/s (>= 380)", r["median_gbps"], lambda v: v >= 380)
sb = load("smbest.json")
for m in ("p2p-sm-push", "p2p-sm-pull"):
    for r in rows(sb, m):
        target(f"{m} {r['src']}->{r['dst']}, best config, GB/s (>= 380)", r["median_gbps"], lambda v: v >= 380)
n = load("nop2p.json")
st, drv, ser = med(n, "staged"), med(n, "driver"), med(n, "staged-serial")
target("P2P disabled: staged / driver fallback (>= 1.3)", st / drv if st and drv else None, lambda v: v >= 1.3)
target("P2P disabled: staged / staged-serial (>= 1.75)", st / ser if st and ser else None, lambda v: v >= 1.75)
for name, v in (("staged", st), ("driver", drv), ("staged-serial", ser)):
    target(f"  P2P disabled: {name}, GB/s", v, lambda v: True)
lat = load("latency.json")
for l in (lat or {}).get("latency", []):
    if l["method"] == "sm-flag" and l["status"] == "ok":
        target(f"8-byte SM write + flag, one way {l['src']}->{l['dst']}, us (<= 1.5)", l["median_us"], lambda v: v <= 1.5)
    elif l["status"] == "ok":
        target(f"  {l['method']} back to back {l['src']}->{l['dst']}, us per copy", l["median_us"], lambda v: True)
sw = load("stagesweep.json")
if sw and sw.get("best", {}).get("staged"):
    out.append(f"  fastest staging: {sw['best']['staged']['config']} at {sw['best']['staged']['median_gbps']:.1f} GB/s")
sm = load("smsweep.json")
if sm:
    sw = [s for s in sm.get("sweeps", []) if s["method"] in ("p2p-sm-push", "p2p-sm-pull")]
    bad = [s for s in sw if s.get("status") != "ok" or not s.get("verified")]
    out.append(f"  SM sweep: {len(sw)} measurements, {len(bad)} failed or unverified")
    for s in bad[:5]:
        out.append(f"    {s['method']} {s['config']}: {s.get('status')} {s.get('note', '')}")
for m in ("p2p-sm-push", "p2p-sm-pull"):
    if sm and sm.get("best", {}).get(m):
        out.append(f"  fastest {m}: {sm['best'][m]['config']} at {sm['best'][m]['median_gbps']:.1f} GB/s")
print("\ntargets (same-run ratios):")
print("\n".join(out))
EOF
fi
echo "logs: $logs (summary.txt; *.txt tables, *.json, *.csv, sweep.svg)"
exit $status
