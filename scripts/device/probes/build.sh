# Sourced by the probe scripts once they set `log` (their log folder) and
# `here` (this folder): makes the folder, builds build-dev (try.sh, its
# output in try.txt; a failed build ends the probe with that output's tail)
# and keeps NVLink multicast off for whatever the probe runs next (the
# device rules).
mkdir -p "$log"
"$here/../try.sh" "$log" - > "$log/try.txt" 2>&1 || { tail -n 20 "$log/try.txt"; exit 1; }
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
