/* SPDX-License-Identifier: BSD-3-Clause */
/* NVLink groups, PCIe link state and NVML's P2P status for the GPUs already in
 * the model (matched by bus id). */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "core/check.h"
#include "topo/nvml_dl.h"
#include "topo/topo.h"

/* nvmlDeviceGetNvLinkVersion answers an enum (1 = 1.0, 2 = 2.0, 3 = 2.2,
 * 4 = 3.0, 5 = 3.1, 6 = 4.0, 7 = 5.0); the model keeps the major version. */
static int nvlink_major(unsigned e) {
  static const int major[] = {0, 1, 2, 2, 3, 3, 4, 5};
  return e < sizeof major / sizeof major[0] ? major[e] : 0;
}

/* One link, one direction, GB/s, as `nvidia-smi nvlink -s` reports it. NVML's
 * NVLINK_SPEED_MBPS_COMMON field counts both directions at the nominal rate
 * (50000 on H200, whose links run at 26.562 GB/s each way), so the version
 * decides and the field is only a fallback. */
static double nvlink_major_gbps(int major) {
  switch (major) {
    case 1: return 20.0;
    case 2: case 3: return 25.0;
    case 4: return 26.5625;
    case 5: return 50.0;
    default: return 0;
  }
}

static void add_link(p2pk_gpu *g, p2pk_nvl_peer peer, const char *busid, int version) {
  for (int i = 0; i < g->ngroups; i++) {
    p2pk_nvl_group *x = &g->groups[i];
    if (x->peer == peer && strcmp(x->peer_busid, busid) == 0) {
      x->count++;
      return;
    }
  }
  if (g->ngroups >= P2PK_MAX_NVL_GROUPS) return;
  p2pk_nvl_group *x = &g->groups[g->ngroups++];
  x->peer = peer;
  snprintf(x->peer_busid, sizeof x->peer_busid, "%s", busid);
  x->count = 1;
  x->version = version;
}

static void read_nvlinks(const p2pk_nvml_api *n, struct p2pkit_topo *t, int gi, nvmlDevice_t dev) {
  p2pk_gpu *g = &t->gpus[gi];
  int present = 0, active = 0;
  unsigned version = 0;
  for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
    int on = 0;
    nvmlReturn_t r = n->DeviceGetNvLinkState(dev, l, &on);
    if (r != NVML_SUCCESS) continue; /* link not present on this GPU */
    present++;
    if (!on) continue;
    active++;
    unsigned v = 0;
    if (n->DeviceGetNvLinkVersion(dev, l, &v) == NVML_SUCCESS && v > version) version = v;
    nvmlPciInfo_t pci;
    memset(&pci, 0, sizeof pci);
    char busid[P2PK_BUSID_LEN] = "";
    if (n->DeviceGetNvLinkRemotePciInfo(dev, l, &pci) == NVML_SUCCESS &&
        p2pk_busid_normalize(pci.busId, busid) != 0) {
      /* Not a PCI address (NVSwitch: FFFFFFFF:FF:FF.0): keep it, lower case. */
      snprintf(busid, sizeof busid, "%.19s", pci.busId);
      for (char *c = busid; *c; c++) *c = (char)tolower((unsigned char)*c);
    }
    int type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
    if (n->DeviceGetNvLinkRemoteDeviceType) n->DeviceGetNvLinkRemoteDeviceType(dev, l, &type);
    p2pk_nvl_peer peer = P2PK_NVL_UNKNOWN;
    if (p2pk_topo_find_gpu(t, busid) >= 0) peer = P2PK_NVL_GPU;
    else if (type == NVML_NVLINK_DEVICE_TYPE_SWITCH) peer = P2PK_NVL_SWITCH;
    else if (type == NVML_NVLINK_DEVICE_TYPE_IBMNPU) peer = P2PK_NVL_CPU;
    else if (type == NVML_NVLINK_DEVICE_TYPE_GPU) peer = P2PK_NVL_GPU;
    add_link(g, peer, busid, nvlink_major(v));
  }
  g->nvlinks_present = present;
  g->nvlinks_active = active;
  g->nvlink_gbps = nvlink_major_gbps(nvlink_major(version));
  if (g->nvlink_gbps == 0 && n->DeviceGetFieldValues && active) {
    nvmlFieldValue_t fv;
    memset(&fv, 0, sizeof fv);
    fv.fieldId = NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON;
    if (n->DeviceGetFieldValues(dev, 1, &fv) == NVML_SUCCESS && fv.nvmlReturn == NVML_SUCCESS &&
        fv.value.uiVal > 0)
      g->nvlink_gbps = fv.value.uiVal / 2000.0; /* both directions, 10^6 B/s */
  }
}

p2pkit_status_t p2pk_topo_add_nvml(struct p2pkit_topo *t) {
  const p2pk_nvml_api *n;
  P2PK_CHECK(p2pk_nvml_get(&n));
  n->SystemGetDriverVersion(t->driver, sizeof t->driver);
  n->SystemGetNVMLVersion(t->nvml_version, sizeof t->nvml_version);
  nvmlDevice_t devs[P2PK_MAX_GPUS] = {0};
  for (int g = 0; g < t->ngpus; g++) {
    nvmlReturn_t r = n->DeviceGetHandleByPciBusId(t->gpus[g].busid, &devs[g]);
    if (r != NVML_SUCCESS) {
      P2PK_WARN("NVML does not know GPU%d (%s): %s; its NVLinks and P2P status are unknown", g,
                t->gpus[g].busid, n->ErrorString(r));
      devs[g] = NULL;
      continue;
    }
    if (!t->gpus[g].uuid[0]) n->DeviceGetUUID(devs[g], t->gpus[g].uuid, sizeof t->gpus[g].uuid);
    int p = t->gpus[g].pci;
    if (p >= 0) {
      unsigned v;
      p2pk_pci_node *pn = &t->pci[p];
      if (n->DeviceGetCurrPcieLinkGeneration(devs[g], &v) == NVML_SUCCESS) pn->link_gen = (int)v;
      if (n->DeviceGetCurrPcieLinkWidth(devs[g], &v) == NVML_SUCCESS) pn->link_width = (int)v;
      if (n->DeviceGetMaxPcieLinkGeneration(devs[g], &v) == NVML_SUCCESS) pn->max_gen = (int)v;
      if (n->DeviceGetMaxPcieLinkWidth(devs[g], &v) == NVML_SUCCESS) pn->max_width = (int)v;
    }
  }
  for (int g = 0; g < t->ngpus; g++)
    if (devs[g]) read_nvlinks(n, t, g, devs[g]);
  static const int idx[P2PKIT_P2P_CAPS] = {NVML_P2P_CAPS_INDEX_READ, NVML_P2P_CAPS_INDEX_WRITE,
                                           NVML_P2P_CAPS_INDEX_ATOMICS, NVML_P2P_CAPS_INDEX_NVLINK};
  for (int a = 0; a < t->ngpus; a++)
    for (int b = 0; b < t->ngpus; b++) {
      if (a == b || !devs[a] || !devs[b]) continue;
      for (int c = 0; c < P2PKIT_P2P_CAPS; c++) {
        int s = 6;
        if (n->DeviceGetP2PStatus(devs[a], devs[b], idx[c], &s) != NVML_SUCCESS) s = 6;
        t->p2p[a][b].nvml[c] = p2pk_nvml_p2p_code(s);
      }
    }
  t->known |= P2PK_KNOW_NVLINK | P2PK_KNOW_P2P | P2PK_KNOW_PCIE_LINK;
  return P2PKIT_SUCCESS;
}
