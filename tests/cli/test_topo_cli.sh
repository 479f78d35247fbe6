#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# p2pkit topo / env / top-level: exit codes and one-line errors; golden
# output for every recorded machine in tests/data that has one.
set -uo pipefail
bin=$1 data=$2
fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
expect() { # desc want_rc cmd... ; stdout+stderr in $tmp/out
  local desc=$1 want=$2; shift 2
  "$@" > "$tmp/out" 2> "$tmp/err"; local rc=$?
  if [ "$rc" != "$want" ]; then echo "FAIL $desc: exit $rc, wanted $want"; cat "$tmp/err"; fail=1
  else echo "ok   $desc"; fi
}
err_lines() { grep -c . "$tmp/err"; }

expect "no arguments prints usage" 2 "$bin"
grep -q "usage: p2pkit" "$tmp/err" || { echo "FAIL usage missing"; fail=1; }
expect "--help" 0 "$bin" --help
grep -q "topo" "$tmp/out" || { echo "FAIL --help lists no topo"; fail=1; }
expect "unknown command" 2 "$bin" frobnicate
grep -q "unknown command 'frobnicate'" "$tmp/err" || { echo "FAIL unknown command message"; fail=1; }
expect "topo --help" 0 "$bin" topo --help
expect "topo unknown flag" 2 "$bin" topo --bogus
grep -q "unknown option '--bogus'" "$tmp/err" && grep -q "usage: p2pkit topo" "$tmp/err" \
  || { echo "FAIL topo usage on bad flag"; fail=1; }
expect "topo --from without a file" 2 "$bin" topo --from
expect "topo --from missing file" 2 "$bin" topo --from "$tmp/nope.p2pkit"
grep -q "nope.p2pkit" "$tmp/err" && [ "$(err_lines)" = 1 ] || { echo "FAIL missing-file error"; cat "$tmp/err"; fail=1; }
printf 'hello world\n' > "$tmp/junk.txt"
expect "topo --from unknown format" 2 "$bin" topo --from "$tmp/junk.txt"
grep -q "junk.txt:1: unknown topology format" "$tmp/err" || { echo "FAIL unknown-format error"; cat "$tmp/err"; fail=1; }

# Without a GPU: one clear line, exit 2, pointing at --from.
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  expect "topo without a GPU" 2 "$bin" topo
  [ "$(err_lines)" = 1 ] && grep -q -- "--from FILE" "$tmp/err" || { echo "FAIL no-GPU message"; cat "$tmp/err"; fail=1; }
fi

expect "env" 0 "$bin" env
grep -q "^P2PKIT_DEBUG " "$tmp/out" || { echo "FAIL env lists no P2PKIT_DEBUG"; fail=1; }
P2PKIT_STAGE_DEPTH=3 "$bin" env > "$tmp/env.txt"
grep -E -q "^P2PKIT_STAGE_DEPTH +3 +environment" "$tmp/env.txt" || { echo "FAIL env source"; fail=1; }
expect "env with a malformed value" 1 env P2PKIT_P2P_DISABLE=yes "$bin" env
[ "$(err_lines)" = 1 ] && grep -q "P2PKIT_P2P_DISABLE='yes' must be a whole number from 0 to 1" "$tmp/err" \
  || { echo "FAIL env malformed-value message"; cat "$tmp/err"; fail=1; }
grep -q "^P2PKIT_P2P_DISABLE " "$tmp/out" || { echo "FAIL env lists nothing before refusing"; fail=1; }
expect "env with a misspelt name" 0 env P2PKIT_P2P_DISABLED=1 "$bin" env
grep -q "P2PKIT_P2P_DISABLED (did you mean P2PKIT_P2P_DISABLE?)" "$tmp/err" \
  || { echo "FAIL env misspelt-name warning"; cat "$tmp/err"; fail=1; }
expect "env --json" 0 "$bin" env --json
if command -v python3 >/dev/null; then
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["schema_version"]==1 and d["settings"]' "$tmp/out" \
    || { echo "FAIL env --json"; fail=1; }
fi

# The 2x H200 device machine recorded with --save prints, here without a GPU,
# exactly the matrix `p2pkit topo -m` printed on the machine itself.
if [ -f "$data/h200x2.p2pkit" ] && [ -f "$data/h200x2.device-topo-m.txt" ]; then
  n=$(wc -l < "$data/h200x2.device-topo-m.txt")
  "$bin" topo --from "$data/h200x2.p2pkit" -m | head -n "$n" > "$tmp/h200.txt"
  if diff -u "$data/h200x2.device-topo-m.txt" "$tmp/h200.txt"; then echo "ok   h200x2 --from matches the device"
  else echo "FAIL h200x2 --from differs from the device"; fail=1; fi
  grep -q "NV18" "$tmp/h200.txt" || { echo "FAIL h200x2: no NV18"; fail=1; }
fi

# Machines recorded on GPU machines (4x H200, 1x H200): each recording
# beside tests/data/NAME.smi-topo-m.txt (what `nvidia-smi topo -m` printed
# there) prints, here without a GPU, the same GPU cells, CPU / NUMA
# affinities and GPU NUMA ID, and the same header line. p2pkit's own recordings (--save, --dump-nccl, --save-hwloc);
# NCCL's dump carries no CPU affinity, so it is not held to the last two.
if command -v python3 >/dev/null; then
  for smi in "$data"/*.smi-topo-m.txt; do
    [ -e "$smi" ] || continue
    m=$(basename "$smi" .smi-topo-m.txt) nrec=0
    for rec in "$m.p2pkit" "$m.nccl.xml" "$m.hwloc.xml"; do
      [ -f "$data/$rec" ] || continue
      nrec=$((nrec + 1))
      (cd "$data" && "$bin" topo --from "$rec" -m) > "$tmp/rec.txt" 2>&1
      if [ "$(head -n 1 "$smi")" != "$(head -n 1 "$tmp/rec.txt")" ]; then
        echo "FAIL $rec --from: the header differs from nvidia-smi's"; fail=1
      fi
      if python3 - "$smi" "$tmp/rec.txt" <<'PY'; then echo "ok   $rec --from matches nvidia-smi on the device"
import sys
def rows(path):
    out = {}
    for ln in open(path):
        f = [c.strip() for c in ln.rstrip("\n").split("\t")]
        if f and f[0].startswith("GPU"):
            out[f[0]] = f[1:]
    return out
smi, got = rows(sys.argv[1]), rows(sys.argv[2])
n = len(smi)  # GPU cells, then CPU affinity, NUMA affinity, and where nvidia-smi
# prints it (today's does) an empty field and the GPU NUMA ID
width = max(len(v) for v in smi.values()) if n else 0
sys.exit(0 if n and all(g in got and got[g][:width] == smi[g][:width] for g in smi) and len(got) == n else 1)
PY
      else echo "FAIL $rec --from differs from nvidia-smi on the device"; cat "$tmp/rec.txt"; fail=1; fi
    done
    [ "$nrec" -gt 0 ] || { echo "FAIL $m.smi-topo-m.txt: no recording of $m beside it"; fail=1; }
  done
fi

# The GPU NUMA ID (a GPU whose memory is a NUMA node, e.g. GH200's): recorded
# as numa_id, printed in the column and the JSON, kept by --save; -1 (none)
# prints N/A as nvidia-smi does, and so does a recording that never said.
sed 's/^gpu index=0 \(.*\) pci=/gpu index=0 \1 numa_id=4 pci=/; s/^gpu index=1 \(.*\) pci=/gpu index=1 \1 numa_id=-1 pci=/' \
  "$data/h200x2.p2pkit" > "$tmp/gnuma.p2pkit"
grep -q "numa_id=4" "$tmp/gnuma.p2pkit" && grep -q "numa_id=-1" "$tmp/gnuma.p2pkit" || { echo "FAIL numa_id fixture"; fail=1; }
"$bin" topo --from "$tmp/gnuma.p2pkit" --save "$tmp/gnuma2.p2pkit" -m > "$tmp/gm.txt"
if [ "$(sed -n 's/^GPU\([01]\)\t.*\t\t\(.*\)$/\1 \2/p' "$tmp/gm.txt" | tr '\n' ' ')" = "0 4 1 N/A " ] \
   && grep -q "numa_id=4" "$tmp/gnuma2.p2pkit" && grep -q "numa_id=-1" "$tmp/gnuma2.p2pkit"; then
  echo "ok   GPU NUMA ID recorded, printed and saved"
else echo "FAIL GPU NUMA ID"; cat "$tmp/gm.txt"; fail=1; fi
if command -v python3 >/dev/null; then
  "$bin" topo --from "$tmp/gnuma.p2pkit" --json > "$tmp/gm.json"
  python3 -c 'import json,sys; g=json.load(open(sys.argv[1]))["gpus"]; assert [x["gpu_numa_id"] for x in g]==[4,None] and all(x["gpu_numa_id_known"] for x in g)' "$tmp/gm.json" \
    && "$bin" topo --from "$data/h200x2.p2pkit" --json | python3 -c 'import json,sys; g=json.load(sys.stdin)["gpus"]; assert not any(x["gpu_numa_id_known"] or x["gpu_numa_id"] is not None for x in g)' \
    && echo "ok   GPU NUMA ID in the JSON" || { echo "FAIL GPU NUMA ID in the JSON"; fail=1; }
fi
sed 's/^gpu index=0 \(.*\) pci=/gpu index=0 \1 numa_id=-3 pci=/' "$data/h200x2.p2pkit" > "$tmp/gbad.p2pkit"
expect "topo --from numa_id=-3" 2 "$bin" topo --from "$tmp/gbad.p2pkit"
grep -q "numa_id" "$tmp/err" && [ "$(err_lines)" = 1 ] || { echo "FAIL numa_id=-3 message"; cat "$tmp/err"; fail=1; }

# A recorded machine without a GPU, from every source: one line naming the
# file, nothing printed, exit 2 (as a live machine without one).
printf 'p2pkit-topo 2\nend\n' > "$tmp/empty.p2pkit"
for f in "$data/bad/nogpu.nccl.xml" "$data/bad/nogpu.hwloc.xml" "$data/bad/header_only.p2pkit" \
  "$tmp/empty.p2pkit"; do
  expect "topo --from $(basename "$f") (no GPU)" 2 "$bin" topo --from "$f"
  [ "$(err_lines)" = 1 ] && grep -q "$(basename "$f"): no GPU in this machine" "$tmp/err" && [ ! -s "$tmp/out" ] \
    || { echo "FAIL no-GPU message for $f"; cat "$tmp/out" "$tmp/err"; fail=1; }
done
expect "doctor --from a file without a GPU" 2 "$bin" doctor --from "$data/bad/nogpu.nccl.xml"
grep -q "no GPU in this machine" "$tmp/err" || { echo "FAIL doctor no-GPU message"; cat "$tmp/err"; fail=1; }

# A recording cut short is refused, not read as a smaller machine: version 2
# files close with an end record; a version-1 file that lost a GPU's record
# still names a gpu node no GPU has.
"$bin" topo --from "$data/nics.p2pkit" --save "$tmp/full.p2pkit" -m > /dev/null
head -n -1 "$tmp/full.p2pkit" > "$tmp/noend.p2pkit"
head -c -7 "$tmp/full.p2pkit" > "$tmp/midline.p2pkit"
printf 'p2pkit-topo 2\n' > "$tmp/header2.p2pkit"
for f in noend midline header2; do
  expect "topo --from a truncated file ($f)" 2 "$bin" topo --from "$tmp/$f.p2pkit"
  [ "$(err_lines)" = 1 ] && grep -q "cut short" "$tmp/err" || { echo "FAIL truncation message ($f)"; cat "$tmp/err"; fail=1; }
done
head -n 9 "$data/h200x2.p2pkit" > "$tmp/cut1.p2pkit" # through GPU0's records, GPU1's lost
expect "topo --from a version-1 file cut after GPU0" 2 "$bin" topo --from "$tmp/cut1.p2pkit"
grep -q "pci id=2 is a gpu node but no gpu record has pci=2" "$tmp/err" || { echo "FAIL v1 cut message"; cat "$tmp/err"; fail=1; }

# hwloc XML from a newer hwloc: the versions and the way out, in one line.
expect "topo --from hwloc 3 XML" 2 "$bin" topo --from "$data/bad/hwloc_v3.xml"
[ "$(err_lines)" = 1 ] && grep -q "hwloc XML version 3.0" "$tmp/err" && grep -q -- "--export-xml-flags v2" "$tmp/err" \
  || { echo "FAIL hwloc v3 message"; cat "$tmp/err"; fail=1; }

# NICs: rows and columns as nvidia-smi prints them, through --save and
# --dump-nccl (NCCL has no host bridges: NODE comes back as PHB).
for f in vendor8.nccl.xml nics.p2pkit hwloc_nics.xml; do
  (cd "$data" && "$bin" topo --from "$f" -m) > "$tmp/m.txt"
  grep -q "^NIC0" "$tmp/m.txt" && grep -q "^NIC Legend:" "$tmp/m.txt" || { echo "FAIL $f: no NIC rows"; fail=1; }
  (cd "$data" && "$bin" topo --from "$f" --save "$tmp/s.p2pkit" --dump-nccl "$tmp/d.xml" -m) > /dev/null
  for rec in "$tmp/s.p2pkit" "$tmp/d.xml"; do
    "$bin" topo --from "$rec" -m > "$tmp/r.txt" 2>&1
    want=$(sed -n '/^\(GPU\|NIC\)[0-9]/p' "$tmp/m.txt")
    [ "$rec" = "$tmp/d.xml" ] && want=$(echo "$want" | sed 's/NODE/PHB/g')
    if [ "$want" = "$(sed -n '/^\(GPU\|NIC\)[0-9]/p' "$tmp/r.txt")" ]; then echo "ok   $f through $(basename "$rec")"
    else echo "FAIL $f through $(basename "$rec")"; cat "$tmp/r.txt"; fail=1; fi
  done
done

# Text from a file reaches the terminal without its control characters: a
# NIC's name and a GPU's name carrying escape sequences print as '?'.
sed "0,/^nic \(.*\)name=mlx5_0/s//nic \1name=mlx5_0$(printf '\033')[2J/" "$data/nics.p2pkit" |
  sed "0,/name=\"\([^\"]*\)\"/s//name=\"\1$(printf '\033')]0;x$(printf '\007')\"/" > "$tmp/esc.p2pkit"
grep -q "$(printf '\033')" "$tmp/esc.p2pkit" || { echo "FAIL the escape fixture has no escape"; fail=1; }
"$bin" topo --from "$tmp/esc.p2pkit" > "$tmp/esc.txt" 2>&1
"$bin" topo --from "$tmp/esc.p2pkit" --paths -m -p >> "$tmp/esc.txt" 2>&1
if grep -q "$(printf '[\033\007]')" "$tmp/esc.txt" || ! grep -q "mlx5_0?\[2J" "$tmp/esc.txt"; then
  echo "FAIL control characters from a file reach the output"; fail=1
else echo "ok   control characters from a file print as '?'"; fi

# Golden outputs: tests/data/golden/FILE.txt is `p2pkit topo --from FILE`;
# regenerate with scripts/golden.sh after a reviewed change.
for g in "$data"/golden/*.txt; do
  [ -e "$g" ] || continue
  name=$(basename "$g" .txt)
  src="$data/$name"
  [ -f "$src" ] || { echo "FAIL golden $name: no source file"; fail=1; continue; }
  (cd "$data" && "$bin" topo --from "$name" 2>&1) > "$tmp/got.txt"
  if diff -u "$g" "$tmp/got.txt" > "$tmp/diff"; then echo "ok   golden $name"
  else echo "FAIL golden $name"; cat "$tmp/diff"; fail=1; fi
done
exit $fail
