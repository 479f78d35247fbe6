/* SPDX-License-Identifier: BSD-3-Clause */
/* Discover this machine: GPUs and peer access from the CUDA runtime, the PCI
 * tree and NUMA from hwloc, NVLink and P2P status from NVML. Only the CUDA
 * part is required; the others degrade to "unknown" with a warning. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/check.h"
#include "core/param.h"
#include "topo/topo.h"

p2pkit_status_t p2pk_gpu_count(int *n_p) {
  int n = 0;
  *n_p = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) cudaGetLastError();
  if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice || e == cudaErrorInitializationError) {
    int drv = 0;
    cudaDriverGetVersion(&drv);
    if (drv == 0)
      return p2pk_fail(P2PKIT_ERR_NO_DRIVER, "the CUDA driver (libcuda.so.1) is not installed");
    if (e == cudaErrorInsufficientDriver)
      return p2pk_fail(P2PKIT_ERR_NO_DRIVER, "the CUDA driver (version %d) is older than this "
                       "build's runtime", drv);
    return p2pk_fail(P2PKIT_ERR_NO_DEVICE, "CUDA runtime: %s", cudaGetErrorString(e));
  }
  if (e != cudaSuccess)
    return p2pk_fail(P2PKIT_ERR_CUDA, "cudaGetDeviceCount failed: %s", cudaGetErrorString(e));
  if (n == 0) return p2pk_fail(P2PKIT_ERR_NO_DEVICE, "the CUDA runtime sees no GPU");
  *n_p = n;
  return P2PKIT_SUCCESS;
}

/* nvidia-smi's "GPU NUMA ID": whether the GPU's memory is a NUMA node, and
 * which (CUDA 12.2's attributes); unknown where the driver cannot say. */
static void gpu_numa_id(int dev, p2pk_gpu *gp) {
  int cfg = 0, id = -1;
  if (cudaDeviceGetAttribute(&cfg, cudaDevAttrNumaConfig, dev) != cudaSuccess) {
    cudaGetLastError();
    return; /* P2PK_GPU_NUMA_UNKNOWN, as p2pk_topo_add_gpu left it */
  }
  if (cfg != cudaDeviceNumaConfigNumaNode) {
    gp->mem_numa = P2PK_GPU_NUMA_NONE;
  } else if (cudaDeviceGetAttribute(&id, cudaDevAttrNumaId, dev) == cudaSuccess && id >= 0) {
    gp->mem_numa = id;
  } else {
    cudaGetLastError();
  }
}

static p2pkit_status_t cuda_devices(struct p2pkit_topo *t) {
  int n = 0;
  P2PK_CHECK(p2pk_gpu_count(&n));
  if (n > P2PK_MAX_GPUS)
    return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "%d GPUs; p2pkit handles up to %d", n, P2PK_MAX_GPUS);
  cudaDriverGetVersion(&t->cuda_driver);
  cudaRuntimeGetVersion(&t->cuda_runtime);
  for (int d = 0; d < n; d++) {
    struct cudaDeviceProp p;
    P2PK_CUDA_CHECK(cudaGetDeviceProperties(&p, d));
    char busid[P2PK_BUSID_LEN];
    snprintf(busid, sizeof busid, "%04x:%02x:%02x.0", p.pciDomainID, p.pciBusID, p.pciDeviceID);
    int g = p2pk_topo_add_gpu(t, busid);
    if (g < 0) return P2PKIT_ERR_UNSUPPORTED;
    p2pk_gpu *gp = &t->gpus[g];
    snprintf(gp->name, sizeof gp->name, "%s", p.name);
    gp->memory_bytes = p.totalGlobalMem;
    gp->sm_count = p.multiProcessorCount;
    gp->cc_major = p.major;
    gp->cc_minor = p.minor;
    gpu_numa_id(d, gp);
    const unsigned char *u = (const unsigned char *)p.uuid.bytes;
    snprintf(gp->uuid, sizeof gp->uuid,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
             u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  }
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++) {
      if (a == b) continue;
      p2pk_p2p *pp = &t->p2p[a][b];
      int v = 0;
      if (cudaDeviceCanAccessPeer(&v, a, b) == cudaSuccess) pp->cuda_access = v;
      if (cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrAccessSupported, a, b) == cudaSuccess)
        pp->attr_access = v;
      if (cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrNativeAtomicSupported, a, b) == cudaSuccess)
        pp->attr_atomics = v;
      if (cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrPerformanceRank, a, b) == cudaSuccess)
        pp->attr_perf_rank = v;
      if (cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrCudaArrayAccessSupported, a, b) == cudaSuccess)
        pp->attr_array = v;
    }
  t->known |= P2PK_KNOW_CUDA;
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_topo_discover(struct p2pkit_topo **t_p) {
  char host[64] = "";
  gethostname(host, sizeof host - 1);
  struct p2pkit_topo *t = p2pk_topo_new("live", host);
  if (!t) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory");
  snprintf(t->hostname, sizeof t->hostname, "%s", host);
  p2pkit_status_t st = cuda_devices(t);
  if (st != P2PKIT_SUCCESS) {
    free(t);
    return st;
  }
  if (p2pk_topo_load_hwloc_live(t) != P2PKIT_SUCCESS) {
    P2PK_WARN("hwloc: %s; PCIe path classes and CPU affinity are unknown", p2pkit_last_error());
    p2pk_topo_note(t, "hwloc failed: the PCI tree and NUMA affinity are unknown");
  }
  if (p2pk_topo_add_nvml(t) != P2PKIT_SUCCESS) {
    P2PK_INFO(P2PK_LOG_TOPO, "NVML: %s", p2pkit_last_error());
    p2pk_topo_note(t, "NVML unavailable (%s): NVLinks and NVML P2P status are unknown",
                   p2pkit_last_error());
  }
  for (int g = 0; g < t->ngpus; g++)
    P2PK_INFO(P2PK_LOG_TOPO, "GPU%d %s %s: %d SMs, %d/%d NVLinks active at %.3f GB/s each", g,
              t->gpus[g].busid, t->gpus[g].name, t->gpus[g].sm_count, t->gpus[g].nvlinks_active,
              t->gpus[g].nvlinks_present, t->gpus[g].nvlink_gbps);
  *t_p = t;
  return P2PKIT_SUCCESS;
}

/* P2PKIT_TOPO_FILE stands in for the machine here as in the `p2pkit`
 * command: the recorded topology is loaded (p2pkit_topo_load's checks) and
 * nothing is discovered; an error names the setting. */
static p2pkit_status_t load_setting(const char *file, p2pkit_topo_t *topo_p) {
  P2PK_INFO(P2PK_LOG_TOPO, "topology from P2PKIT_TOPO_FILE=%s, not discovered", file);
  const p2pkit_status_t st = p2pkit_topo_load(file, topo_p);
  if (st == P2PKIT_SUCCESS) return st;
  char why[512];
  snprintf(why, sizeof why, "%s", p2pkit_last_error());
  return p2pk_fail(st, "P2PKIT_TOPO_FILE: %s", why);
}

p2pkit_status_t p2pkit_topo_discover(p2pkit_topo_t *topo_p) {
  if (!topo_p) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "output is NULL");
  const char *file = p2pk_param_str("P2PKIT_TOPO_FILE");
  if (file[0]) return load_setting(file, topo_p);
  struct p2pkit_topo *t = NULL;
  P2PK_CHECK(p2pk_topo_discover(&t));
  const char *dump = p2pk_param_str("P2PKIT_TOPO_DUMP_FILE");
  if (dump[0] && p2pkit_topo_write_nccl(t, dump) != P2PKIT_SUCCESS)
    P2PK_WARN("P2PKIT_TOPO_DUMP_FILE: %s", p2pkit_last_error());
  *topo_p = t;
  return P2PKIT_SUCCESS;
}
