/* SPDX-License-Identifier: BSD-3-Clause */
#include "topo/nvml_dl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "core/check.h"
#include "core/param.h"

static p2pk_nvml_api api;
static p2pkit_status_t load_status = P2PKIT_ERR_INTERNAL;
static char load_error[512];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void *sym(void *lib, const char *a, const char *b) {
  void *f = a ? dlsym(lib, a) : NULL;
  if (!f && b) f = dlsym(lib, b);
  return f;
}

static void load(void) {
  const char *name = p2pk_param_str("P2PKIT_NVML_LIB");
  void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    snprintf(load_error, sizeof load_error,
             "cannot load NVML (%s): %s; is the NVIDIA driver installed?", name, dlerror());
    load_status = P2PKIT_ERR_NVML;
    return;
  }
  struct { void **slot; const char *a, *b; int required; } table[] = {
      {(void **)&api.Init, "nvmlInit_v2", "nvmlInit", 1},
      {(void **)&api.Shutdown, "nvmlShutdown", NULL, 1},
      {(void **)&api.ErrorString, "nvmlErrorString", NULL, 1},
      {(void **)&api.SystemGetDriverVersion, "nvmlSystemGetDriverVersion", NULL, 1},
      {(void **)&api.SystemGetNVMLVersion, "nvmlSystemGetNVMLVersion", NULL, 1},
      {(void **)&api.DeviceGetCount, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount", 1},
      {(void **)&api.DeviceGetHandleByIndex, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex", 1},
      {(void **)&api.DeviceGetHandleByPciBusId, "nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetHandleByPciBusId", 1},
      {(void **)&api.DeviceGetPciInfo, "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2", 1},
      {(void **)&api.DeviceGetName, "nvmlDeviceGetName", NULL, 1},
      {(void **)&api.DeviceGetUUID, "nvmlDeviceGetUUID", NULL, 1},
      {(void **)&api.DeviceGetNvLinkState, "nvmlDeviceGetNvLinkState", NULL, 1},
      {(void **)&api.DeviceGetNvLinkVersion, "nvmlDeviceGetNvLinkVersion", NULL, 1},
      {(void **)&api.DeviceGetNvLinkRemotePciInfo, "nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlDeviceGetNvLinkRemotePciInfo", 1},
      {(void **)&api.DeviceGetNvLinkRemoteDeviceType, "nvmlDeviceGetNvLinkRemoteDeviceType", NULL, 0},
      {(void **)&api.DeviceGetP2PStatus, "nvmlDeviceGetP2PStatus", NULL, 1},
      {(void **)&api.DeviceGetCurrPcieLinkGeneration, "nvmlDeviceGetCurrPcieLinkGeneration", NULL, 1},
      {(void **)&api.DeviceGetCurrPcieLinkWidth, "nvmlDeviceGetCurrPcieLinkWidth", NULL, 1},
      {(void **)&api.DeviceGetMaxPcieLinkGeneration, "nvmlDeviceGetMaxPcieLinkGeneration", NULL, 1},
      {(void **)&api.DeviceGetMaxPcieLinkWidth, "nvmlDeviceGetMaxPcieLinkWidth", NULL, 1},
      {(void **)&api.DeviceGetFieldValues, "nvmlDeviceGetFieldValues", NULL, 0},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    *table[i].slot = sym(lib, table[i].a, table[i].b);
    if (!*table[i].slot && table[i].required) {
      snprintf(load_error, sizeof load_error, "NVML (%s) lacks %s; the driver is too old", name,
               table[i].a);
      load_status = P2PKIT_ERR_NVML;
      dlclose(lib);
      return;
    }
  }
  nvmlReturn_t r = api.Init();
  if (r != NVML_SUCCESS) {
    snprintf(load_error, sizeof load_error, "nvmlInit failed: %s", api.ErrorString(r));
    load_status = P2PKIT_ERR_NVML;
    return;
  }
  /* NVML stays initialised (and loaded) for the life of the process. */
  load_status = P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_nvml_get(const p2pk_nvml_api **api_p) {
  pthread_once(&once, load);
  if (load_status != P2PKIT_SUCCESS) return p2pk_fail(load_status, "%s", load_error);
  *api_p = &api;
  return P2PKIT_SUCCESS;
}

p2pkit_p2p_code_t p2pk_nvml_p2p_code(int s) {
  switch (s) {
    case 0: return P2PKIT_P2P_OK;
    case 1: return P2PKIT_P2P_CNS;
    case 2: return P2PKIT_P2P_GNS;
    case 3: return P2PKIT_P2P_TNS;
    case 4: /* disabled by regkey: nvidia-smi shows it as not supported */
    case 5: return P2PKIT_P2P_NS;
    default: return P2PKIT_P2P_U;
  }
}
