/* SPDX-License-Identifier: BSD-3-Clause */
/* The doctor's checks: pure functions of the inputs (topology model, sysfs
 * root, measured rates, parsed NCCL log) that append findings. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor.h"
#include "doctor/nccl_log.h"
#include "doctor/sysfs.h"
#include "topo/topo.h"

#define MAXG P2PK_SYSFS_MAX_GPUS

/* One GPU as the checks see it: from the topology when there is one, else
 * from sysfs alone. */
typedef struct {
  char busid[20];
  char name[96];
  int numa;                      /* -1 unknown */
  int gen, width;                /* current PCIe link, 0 unknown */
  int max_gen, max_width;        /* the GPU's capability, 0 unknown */
  int rest_gen;                  /* reading at rest when re-read under load, else 0 */
  const char *link_from;         /* "NVML", "sysfs" */
  char slot[20];                 /* the bridge above the GPU, "" unknown */
  int slot_gen, slot_width;      /* that bridge's capability, 0 unknown */
  int nvl_present, nvl_active;   /* -1 unknown */
  double nvl_gbps;
  char iommu[24];                /* IOMMU group type, "" none */
} dgpu;

typedef struct {
  const p2pk_doc_input *in;
  const char *root;
  int n;
  dgpu g[MAXG];
  p2pk_host_facts host;
} view;

static void gpu_name(char *buf, size_t len, int i) { snprintf(buf, len, "GPU%d", i); }
static void pair_name(char *buf, size_t len, int a, int b) { snprintf(buf, len, "GPU%d-GPU%d", a, b); }

static void slot_of(const char *root, dgpu *g) {
  char chain[P2PK_SYSFS_MAX_CHAIN][20];
  int n = p2pk_sysfs_pci_chain(root, g->busid, chain, P2PK_SYSFS_MAX_CHAIN);
  if (n <= 0) return;
  snprintf(g->slot, sizeof g->slot, "%s", chain[n - 1]);
  p2pk_sysfs_link l;
  if (p2pk_sysfs_pci_link(root, g->slot, &l) == 0) {
    g->slot_gen = l.max_gen;
    g->slot_width = l.max_width;
  }
}

static void fill_from_sysfs(const char *root, dgpu *g) {
  p2pk_sysfs_link l;
  if (p2pk_sysfs_pci_link(root, g->busid, &l) != 0) return;
  if (!g->gen && !g->max_gen) {
    g->gen = l.gen;
    g->width = l.width;
    g->max_gen = l.max_gen;
    g->max_width = l.max_width;
    g->link_from = "sysfs";
  }
  if (g->numa < 0) g->numa = l.numa;
}

static void build_view(const p2pk_doc_input *in, view *v) {
  memset(v, 0, sizeof *v);
  v->in = in;
  v->root = in->sysfs_root ? in->sysfs_root : "";
  if (in->sysfs_missing) v->host.iommu_units = -1;
  else p2pk_sysfs_host(v->root, &v->host);
  const struct p2pkit_topo *t = in->topo;
  if (t) {
    v->n = t->ngpus < MAXG ? t->ngpus : MAXG;
    for (int i = 0; i < v->n; i++) {
      dgpu *g = &v->g[i];
      const p2pk_gpu *tg = &t->gpus[i];
      snprintf(g->busid, sizeof g->busid, "%s", tg->busid);
      snprintf(g->name, sizeof g->name, "%s", tg->name);
      g->numa = tg->pci >= 0 ? p2pk_pci_numa(t, tg->pci) : -1;
      if (tg->pci >= 0) {
        const p2pk_pci_node *pn = &t->pci[tg->pci];
        g->gen = pn->link_gen;
        g->width = pn->link_width;
        g->max_gen = pn->max_gen;
        g->max_width = pn->max_width;
        if (g->gen || g->max_gen) g->link_from = strcmp(t->format, "live") == 0 ? "NVML" : "recorded";
      }
      g->nvl_present = tg->nvlinks_present;
      g->nvl_active = tg->nvlinks_active;
      g->nvl_gbps = tg->nvlink_gbps;
      if (in->load && in->load[i].measured) {
        if (in->load[i].gen != g->gen) g->rest_gen = g->gen;
        g->gen = in->load[i].gen;
        if (in->load[i].width) g->width = in->load[i].width;
      }
    }
  } else {
    char ids[MAXG][20];
    int n = p2pk_sysfs_nvidia_gpus(v->root, ids, MAXG);
    v->n = n > 0 ? n : 0;
    for (int i = 0; i < v->n; i++) {
      snprintf(v->g[i].busid, sizeof v->g[i].busid, "%s", ids[i]);
      v->g[i].numa = -1;
      v->g[i].nvl_present = v->g[i].nvl_active = -1;
    }
  }
  for (int i = 0; i < v->n && !in->sysfs_missing; i++) {
    dgpu *g = &v->g[i];
    fill_from_sysfs(v->root, g);
    slot_of(v->root, g);
    char type[24];
    if (p2pk_sysfs_iommu_type(v->root, g->busid, type, sizeof type) == 0)
      snprintf(g->iommu, sizeof g->iommu, "%s", type);
  }
}

/* --- system ----------------------------------------------------------------- */

static void version_str(int v, char *buf, size_t len) {
  if (v <= 0) snprintf(buf, len, "?");
  else snprintf(buf, len, "%d.%d", v / 1000, v % 1000 / 10);
}

static void check_driver(const view *v, p2pk_findings *f) {
  const p2pk_doc_input *in = v->in;
  const struct p2pkit_topo *t = in->topo;
  if (!t) {
    const char *why = in->topo_error && in->topo_error[0] ? in->topo_error : "no NVIDIA driver";
    if (v->n > 0 && in->live && !v->root[0])
      p2pk_finding_add(f, P2PK_DOC_FAIL, "driver", "system",
                       "load the NVIDIA driver: `nvidia-smi` must list the GPUs; `dmesg | grep "
                       "NVRM` tells why it did not",
                       "the PCI bus shows %d NVIDIA GPU%s but CUDA cannot use them (%s); the checks "
                       "that need the driver are skipped",
                       v->n, v->n == 1 ? "" : "s", why);
    else /* nothing here can move data between GPUs: never "no problem found" */
      p2pk_finding_add(f, P2PK_DOC_FAIL, "driver", "system",
                       "install or load the NVIDIA driver (`nvidia-smi` must list the GPUs); to "
                       "analyse another machine: p2pkit doctor --from FILE",
                       "%s; skipped: P2P status, NVLink, bandwidth probe and NCCL (they need the "
                       "driver); %d NVIDIA GPU%s found in sysfs%s",
                       why, v->n, v->n == 1 ? "" : "s", v->n ? "" : " either");
    return;
  }
  char drv[16], rt[16], names[160] = "";
  version_str(t->cuda_driver, drv, sizeof drv);
  version_str(t->cuda_runtime, rt, sizeof rt);
  /* "2x NVIDIA H200": GPUs of one model counted together. */
  size_t o = 0;
  for (int i = 0; i < t->ngpus; i++) {
    int seen = 0, count = 0;
    for (int j = 0; j < i; j++) seen |= strcmp(t->gpus[j].name, t->gpus[i].name) == 0;
    if (seen) continue;
    for (int j = i; j < t->ngpus; j++) count += strcmp(t->gpus[j].name, t->gpus[i].name) == 0;
    int w = snprintf(names + o, sizeof names - o, "%s%dx %s", o ? ", " : "", count,
                     t->gpus[i].name[0] ? t->gpus[i].name : "GPU");
    if (w > 0 && (size_t)w < sizeof names - o) o += (size_t)w;
  }
  p2pk_finding_add(f, t->ngpus > 0 ? P2PK_DOC_OK : P2PK_DOC_FAIL, "driver", "system",
                   t->ngpus > 0 ? NULL : "check that the driver sees the GPUs (nvidia-smi)",
                   "%sdriver %s, CUDA driver %s, runtime %s, NVML %s; %d GPU%s: %s%s",
                   in->live ? "" : "recorded machine: ", t->driver[0] ? t->driver : "?", drv, rt,
                   t->nvml_version[0] ? t->nvml_version : "?", t->ngpus, t->ngpus == 1 ? "" : "s",
                   names, t->ngpus == 1 ? " (one GPU: nothing to move between GPUs)" : "");
}

static void check_vm(const view *v, p2pk_findings *f) {
  const p2pk_host_facts *h = &v->host;
  if (v->in->sysfs_missing)
    p2pk_finding_add(f, P2PK_DOC_SKIP, "vm", "system", NULL, "whether it is a VM is unknown: %s",
                     v->in->sysfs_missing);
  else if (h->vm)
    p2pk_finding_add(f, P2PK_DOC_OK, "vm", "system", NULL,
                     "running in a virtual machine (%s; %s): PCIe P2P depends on what the "
                     "hypervisor exposes, NVLink P2P does not",
                     h->vm_name[0] ? h->vm_name : "hypervisor not named", h->vm_evidence);
  else if (!h->cpuinfo_read)
    p2pk_finding_add(f, P2PK_DOC_SKIP, "vm", "system", NULL,
                     "could not read /proc/cpuinfo or DMI: whether this is a VM is unknown");
  else
    p2pk_finding_add(f, P2PK_DOC_OK, "vm", "system", NULL, "bare metal: no hypervisor");
}

static void check_iommu(const view *v, p2pk_findings *f) {
  const p2pk_host_facts *h = &v->host;
  char params[200] = "";
  if (h->cmdline_iommu[0]) snprintf(params, sizeof params, "; kernel parameters: %s", h->cmdline_iommu);
  if (v->in->sysfs_missing) {
    p2pk_finding_add(f, P2PK_DOC_SKIP, "iommu", "system", NULL, "the IOMMU mode is unknown: %s",
                     v->in->sysfs_missing);
    return;
  }
  if (h->iommu_units < 0) {
    p2pk_finding_add(f, P2PK_DOC_SKIP, "iommu", "system", NULL,
                     "could not read /sys/class: the IOMMU mode is unknown%s", params);
    return;
  }
  if (h->iommu_units == 0) {
    p2pk_finding_add(f, P2PK_DOC_OK, "iommu", "system", NULL,
                     "no IOMMU in use: the GPUs' DMA addresses are not translated%s", params);
    return;
  }
  int translated = 0, identity = 0, other = 0;
  char first_other[24] = "";
  for (int i = 0; i < v->n; i++) {
    if (!v->g[i].iommu[0]) continue;
    if (p2pk_iommu_type_translated(v->g[i].iommu)) translated++;
    else if (strcmp(v->g[i].iommu, "identity") == 0) identity++;
    else if (!other++) snprintf(first_other, sizeof first_other, "%s", v->g[i].iommu);
  }
  const char *mode = translated ? "translated (DMA addresses remapped)"
                     : identity ? "passthrough (identity)"
                     : other    ? first_other
                                : "unknown for the GPUs (no IOMMU group)";
  p2pk_finding_add(f, P2PK_DOC_OK, "iommu", "system", NULL,
                   "IOMMU on (%s); GPU DMA mode: %s%s", h->iommu_names, mode, params);
}

void p2pk_doc_check_system(const p2pk_doc_input *in, p2pk_findings *f) {
  view *v = calloc(1, sizeof *v);
  if (!v) {
    f->oom = 1;
    return;
  }
  build_view(in, v);
  check_driver(v, f);
  check_vm(v, f);
  check_iommu(v, f);
  free(v);
}

/* --- per GPU ---------------------------------------------------------------- */

static void link_str(int gen, int width, char *buf, size_t len) {
  char g[8] = "Gen?", w[8] = "x?";
  if (gen) snprintf(g, sizeof g, "Gen%d", gen);
  if (width) snprintf(w, sizeof w, "x%d", width);
  snprintf(buf, len, "%s %s", g, w);
}

static void check_pcie_link(const view *v, int i, p2pk_findings *f) {
  const dgpu *g = &v->g[i];
  char subj[24], now[24], max[24], slot[24];
  gpu_name(subj, sizeof subj, i);
  if (!g->gen && !g->max_gen) {
    p2pk_finding_add(f, P2PK_DOC_SKIP, "pcie-link", subj, NULL,
                     "PCIe link state of %s unknown (neither NVML nor sysfs report it)", g->busid);
    return;
  }
  link_str(g->gen, g->width, now, sizeof now);
  link_str(g->max_gen, g->width && !g->max_width ? g->width : g->max_width, max, sizeof max);
  int low_gen = g->gen && g->max_gen && g->gen < g->max_gen;
  int low_width = g->width && g->max_width && g->width < g->max_width;
  char rest[64] = "";
  if (g->rest_gen) snprintf(rest, sizeof rest, " (Gen%d at rest: power saving)", g->rest_gen);
  if (!low_gen && !low_width) {
    p2pk_finding_add(f, P2PK_DOC_OK, "pcie-link", subj, NULL, "%s: PCIe link %s, %s%s (from %s)",
                     g->busid, now,
                     g->max_gen || g->max_width ? "the GPU's maximum" : "its maximum not reported",
                     rest, g->link_from);
    return;
  }
  double have = p2pk_pcie_gbps(g->gen, g->width), full = p2pk_pcie_gbps(g->max_gen, g->max_width);
  char rate[96] = "";
  if (have > 0 && full > 0) snprintf(rate, sizeof rate, ": %.0f of %.0f GB/s each way", have, full);
  const char *when = "";
  if (v->in->load && v->in->load[i].measured) when = " under load";
  else if (low_gen && !v->in->live)
    when = " (a reading at rest, and idle GPUs may slow the link to save power)";
  /* The slot above may be the limit: a Gen4 GPU in a Gen3 slot trains at Gen3. */
  int slot_gen_limit = g->slot_gen && g->slot_gen < g->max_gen && g->gen >= g->slot_gen;
  int slot_width_limit = g->slot_width && g->slot_width < g->max_width && g->width >= g->slot_width;
  char action[384];
  if ((!low_gen || slot_gen_limit) && (!low_width || slot_width_limit)) {
    link_str(g->slot_gen ? g->slot_gen : g->gen, g->slot_width ? g->slot_width : g->width, slot,
             sizeof slot);
    snprintf(action, sizeof action,
             "the slot (bridge %s) supports only %s: move the GPU to a slot that supports %s",
             g->slot, slot, max);
  } else {
    snprintf(action, sizeof action,
             "reseat the GPU (and its riser/cable), check that the slot is wired x%d and that the "
             "BIOS PCIe speed is Auto or Gen%d; `lspci -vv -s %s | grep LnkSta` shows the link",
             g->max_width ? g->max_width : 16, g->max_gen ? g->max_gen : 4, g->busid);
  }
  p2pk_finding_add(f, P2PK_DOC_WARN, "pcie-link", subj, action,
                   "%s: PCIe link trained at %s%s, below the GPU's %s%s (from %s)", g->busid, now,
                   when, max, rate, g->link_from);
}

static void check_nvlink(const view *v, int i, p2pk_findings *f) {
  const dgpu *g = &v->g[i];
  char subj[24], action[256];
  gpu_name(subj, sizeof subj, i);
  if (!v->in->topo) {
    p2pk_finding_add(f, P2PK_DOC_SKIP, "nvlink", subj, NULL, "NVLink state needs the driver (NVML)");
    return;
  }
  if (g->nvl_present < 0 || g->nvl_active < 0) {
    p2pk_finding_add(f, P2PK_DOC_SKIP, "nvlink", subj, NULL,
                     "NVLink state unknown (NVML did not report it)");
    return;
  }
  if (g->nvl_present == 0) {
    p2pk_finding_add(f, P2PK_DOC_OK, "nvlink", subj, NULL, "no NVLink on this GPU: it talks over PCIe");
    return;
  }
  char rate[48] = "";
  if (g->nvl_gbps > 0) snprintf(rate, sizeof rate, " at %.1f GB/s each way", g->nvl_gbps);
  if (g->nvl_active == g->nvl_present) {
    p2pk_finding_add(f, P2PK_DOC_OK, "nvlink", subj, NULL, "%d/%d NVLinks active%s",
                     g->nvl_active, g->nvl_present, rate);
    return;
  }
  if (g->nvl_active == 0) {
    snprintf(action, sizeof action,
             "`nvidia-smi nvlink -s -i %d`; on NVSwitch systems start nvidia-fabricmanager; on "
             "PCIe cards check the NVLink bridge",
             i);
    p2pk_finding_add(f, P2PK_DOC_WARN, "nvlink", subj, action,
                     "none of the GPU's %d NVLinks is active: traffic falls back to PCIe",
                     g->nvl_present);
    return;
  }
  snprintf(action, sizeof action,
           "`nvidia-smi nvlink -s -i %d` shows which, `nvidia-smi nvlink -e -i %d` their errors; "
           "reset the GPU or reboot; if it stays down, it is a hardware fault (bridge, baseboard)",
           i, i);
  p2pk_finding_add(f, P2PK_DOC_FAIL, "nvlink", subj, action,
                   "%d of %d NVLinks are down (%d active): P2P bandwidth drops to %d/%d", 
                   g->nvl_present - g->nvl_active, g->nvl_present, g->nvl_active, g->nvl_active,
                   g->nvl_present);
}

void p2pk_doc_check_gpus(const p2pk_doc_input *in, p2pk_findings *f) {
  view *v = calloc(1, sizeof *v);
  if (!v) {
    f->oom = 1;
    return;
  }
  build_view(in, v);
  if (v->n == 0)
    p2pk_finding_add(f, P2PK_DOC_SKIP, "gpus", "system", NULL,
                     "no NVIDIA GPU found: per-GPU and per-pair checks skipped");
  for (int i = 0; i < v->n; i++) {
    check_pcie_link(v, i, f);
    check_nvlink(v, i, f);
  }
  free(v);
}

/* --- per pair ----------------------------------------------------------------- */

/* ACS on the bridges between two GPUs (below their lowest common bridge; a
 * common bridge turns the traffic around and does not redirect it). */
static void check_acs(const view *v, int a, int b, int p2p, p2pk_findings *f) {
  char subj[24];
  pair_name(subj, sizeof subj, a, b);
  if (v->in->sysfs_missing) {
    p2pk_finding_add(f, P2PK_DOC_SKIP, "acs", subj, NULL, "ACS on the PCIe path not checked: %s",
                     v->in->sysfs_missing);
    return;
  }
  char ca[P2PK_SYSFS_MAX_CHAIN][20], cb[P2PK_SYSFS_MAX_CHAIN][20];
  int na = p2pk_sysfs_pci_chain(v->root, v->g[a].busid, ca, P2PK_SYSFS_MAX_CHAIN);
  int nb = p2pk_sysfs_pci_chain(v->root, v->g[b].busid, cb, P2PK_SYSFS_MAX_CHAIN);
  if (na < 0 || nb < 0) {
    p2pk_finding_add(f, P2PK_DOC_SKIP, "acs", subj, NULL,
                     "GPU %s is not in sysfs: the PCIe path and its ACS settings are unknown",
                     na < 0 ? v->g[a].busid : v->g[b].busid);
    return;
  }
  int common = 0;
  while (common < na && common < nb && strcmp(ca[common], cb[common]) == 0) common++;
  char path[P2PK_SYSFS_MAX_CHAIN * 2][20];
  int np = 0;
  for (int i = common; i < na; i++) snprintf(path[np++], 20, "%s", ca[i]);
  for (int i = common; i < nb; i++) snprintf(path[np++], 20, "%s", cb[i]);
  if (np == 0) {
    p2pk_finding_add(f, P2PK_DOC_OK, "acs", subj, NULL,
                     "no PCIe bridge between the GPUs: nothing on the path can redirect P2P");
    return;
  }
  char bad[160] = "", noroot[20] = "", setpci[320] = "";
  unsigned bad_bits = 0;
  int nbad = 0, checked = 0;
  const char *bad_port = "bridge";
  size_t ob = 0, os = 0;
  for (int i = 0; i < np; i++) {
    p2pk_acs acs;
    p2pk_sysfs_acs(v->root, path[i], &acs);
    if (acs.state == P2PK_ACS_NO_ROOT || acs.state == P2PK_ACS_UNREADABLE) {
      if (!noroot[0]) snprintf(noroot, sizeof noroot, "%s", path[i]);
      continue;
    }
    checked++;
    if (acs.state != P2PK_ACS_PRESENT || !(acs.ctrl & P2PK_ACS_REDIRECTS)) continue;
    bad_bits |= acs.ctrl;
    if (!nbad++) bad_port = p2pk_pcie_port_name(acs.port_type);
    int w = snprintf(bad + ob, sizeof bad - ob, "%s%s", ob ? ", " : "", path[i]);
    if (w > 0 && (size_t)w < sizeof bad - ob) ob += (size_t)w;
    w = snprintf(setpci + os, sizeof setpci - os, "%ssetpci -s %s ECAP_ACS+0x6.w=0000",
                 os ? "; " : "", path[i]);
    if (w > 0 && (size_t)w < sizeof setpci - os) os += (size_t)w;
  }
  if (nbad) {
    char bits[48], action[384];
    p2pk_acs_bits_str(bad_bits, bits, sizeof bits);
    snprintf(action, sizeof action,
             "disable ACS redirection on the path: as root `%s` (until reboot), or switch ACS off "
             "(or P2P on) in the BIOS; keep iommu=pt if an IOMMU is on",
             setpci);
    p2pk_finding_add(f, p2p == 0 ? P2PK_DOC_FAIL : P2PK_DOC_WARN, "acs", subj, action,
                     "PCIe ACS redirects peer-to-peer traffic (%s) on %d %s%s (%s): P2P requests go "
                     "up to the root complex instead of across the switch%s",
                     bits, nbad, bad_port, nbad == 1 ? "" : "s", bad,
                     p2p == 0 ? ", which is why direct P2P is off or blocked"
                              : ": slower, and it hangs or fails where the root complex or IOMMU "
                                "does not forward it");
    return;
  }
  if (noroot[0]) {
    char hint[200] = "";
    int ga = p2pk_sysfs_iommu_group(v->root, v->g[a].busid);
    int gb = p2pk_sysfs_iommu_group(v->root, v->g[b].busid);
    if (ga >= 0 && gb >= 0 && ga != gb && common > 0)
      snprintf(hint, sizeof hint,
               " (hint: the GPUs sit in different IOMMU groups, %d and %d, although they share a "
               "bridge; Linux splits groups that way when ACS isolates the ports)",
               ga, gb);
    p2pk_finding_add(f, P2PK_DOC_SKIP, "acs", subj,
                     "run `sudo p2pkit doctor` to read the ACS settings",
                     "reading ACS from bridge %s's config space needs root (others get 64 of its "
                     "4096 bytes)%s",
                     noroot, hint);
    return;
  }
  p2pk_finding_add(f, P2PK_DOC_OK, "acs", subj, NULL,
                   "ACS does not redirect P2P on the %d bridge%s between the GPUs", checked,
                   checked == 1 ? "" : "s");
}

static int is_consumer(const char *name) {
  return strstr(name, "GeForce") != NULL || strstr(name, "RTX 40") != NULL ||
         strstr(name, "RTX 50") != NULL;
}

static const char *code_words(p2pkit_p2p_code_t c) {
  switch (c) {
    case P2PKIT_P2P_CNS: return "CNS (chipset not supported)";
    case P2PKIT_P2P_GNS: return "GNS (GPU not supported)";
    case P2PKIT_P2P_TNS: return "TNS (topology not supported)";
    case P2PKIT_P2P_NS: return "NS (not supported or disabled)";
    case P2PKIT_P2P_OK: return "OK";
    default: return "unknown";
  }
}

/* "NVML read/write CNS (chipset not supported)" or both spelled out. */
static void nvml_words(const p2pkit_pair_t *p, char *buf, size_t len) {
  p2pkit_p2p_code_t r = p->caps[P2PKIT_P2P_READ], w = p->caps[P2PKIT_P2P_WRITE];
  if (r == w) snprintf(buf, len, "NVML read/write %s", code_words(r));
  else snprintf(buf, len, "NVML read %s, write %s", code_words(r), code_words(w));
}

static int via_switch(const struct p2pkit_topo *t, int a) {
  for (int i = 0; i < t->gpus[a].ngroups; i++)
    if (t->gpus[a].groups[i].peer == P2PK_NVL_SWITCH) return 1;
  return 0;
}

/* Why P2P is off between a and b: every cause the machine shows, in order of
 * likelihood. Returns how many were found. */
static int p2p_causes(const view *v, int a, int b, const p2pkit_pair_t *p, p2pk_findings *f) {
  const struct p2pkit_topo *t = v->in->topo;
  char subj[24];
  pair_name(subj, sizeof subj, a, b);
  int n = 0;
  const dgpu *ga = &v->g[a], *gb = &v->g[b];
  int gns = p->caps[P2PKIT_P2P_READ] == P2PKIT_P2P_GNS || p->caps[P2PKIT_P2P_WRITE] == P2PKIT_P2P_GNS;
  if (gns || is_consumer(ga->name) || is_consumer(gb->name)) {
    const char *model = is_consumer(ga->name) || !is_consumer(gb->name) ? ga->name : gb->name;
    p2pk_finding_add(f, P2PK_DOC_FAIL, "gpu-model", subj,
                     "nothing to fix in software: copies go through host memory; direct P2P needs "
                     "data-center GPUs (or an NVLink bridge where the model has one)",
                     "the GPU model (%s) does not support P2P%s", model[0] ? model : "?",
                     gns ? " (NVML: GNS)" : " over PCIe (consumer GPU)");
    n++;
  }
  if (p->link == P2PKIT_LINK_NVLINK) {
    if (via_switch(t, a))
      p2pk_finding_add(f, P2PK_DOC_FAIL, "nvswitch", subj,
                       "start the fabric manager (`systemctl start nvidia-fabricmanager`) and check "
                       "`nvidia-smi -q | grep -A2 Fabric` says Completed",
                       "the GPUs are joined through NVSwitch (%s) but P2P is off: the NVSwitch "
                       "fabric is not set up",
                       p->label);
    else
      p2pk_finding_add(f, P2PK_DOC_FAIL, "nvlink", subj,
                       "`nvidia-smi nvlink -s` for the links' state; reset the GPUs or reboot",
                       "the GPUs share %d NVLinks (%s) but the driver does not allow P2P over them",
                       p->nvlinks, p->label);
    return n + 1;
  }
  /* Over PCIe from here on. */
  if (p->pcie == P2PKIT_LINK_SYS) {
    p2pk_finding_add(f, P2PK_DOC_FAIL, "sockets", subj,
                     "put GPUs that exchange data under the same CPU socket (one PCIe switch is "
                     "best); otherwise copies are staged through host memory",
                     "the GPUs hang off different CPU sockets (NUMA %d and %d): PCIe P2P across "
                     "the CPU interconnect is not supported on most platforms",
                     ga->numa, gb->numa);
    n++;
  } else if (p->pcie == P2PKIT_LINK_NODE) {
    p2pk_finding_add(f, P2PK_DOC_WARN, "hostbridge", subj,
                     "move both GPUs under one PCIe switch or host bridge, or look for a BIOS "
                     "option allowing P2P between root complexes",
                     "the GPUs are under different PCIe host bridges of one socket: many chipsets do "
                     "not route P2P between root complexes");
    n++;
  }
  if (v->host.vm) {
    p2pk_finding_add(f, P2PK_DOC_WARN, "vm", subj,
                     "QEMU/KVM: give both GPUs' vfio-pci devices the same x-nv-gpudirect-clique=N "
                     "and place them behind one virtual PCIe switch; in a cloud, pick an instance "
                     "type that offers P2P (or NVLink)",
                     "running in a VM (%s): PCIe P2P inside a VM works only when the hypervisor "
                     "exposes it; the guest sees a virtual PCI tree",
                     v->host.vm_name[0] ? v->host.vm_name : "hypervisor not named");
    n++;
  }
  const char *ty = p2pk_iommu_type_translated(ga->iommu) ? ga->iommu
                   : p2pk_iommu_type_translated(gb->iommu) ? gb->iommu
                                                            : NULL;
  if (ty) {
    p2pk_finding_add(f, P2PK_DOC_WARN, "iommu", subj,
                     "boot with iommu=pt (passthrough: intel_iommu=on iommu=pt or amd_iommu=on "
                     "iommu=pt), or turn the IOMMU off if nothing needs it",
                     "the IOMMU translates the GPUs' DMA (group type %s): PCIe P2P through a "
                     "translating IOMMU is blocked or slow on most platforms",
                     ty);
    n++;
  }
  return n;
}

static void check_pair(const view *v, int a, int b, p2pk_findings *f) {
  const struct p2pkit_topo *t = v->in->topo;
  char subj[24];
  pair_name(subj, sizeof subj, a, b);
  if (!t) {
    p2pk_finding_add(f, P2PK_DOC_SKIP, "p2p", subj, NULL, "P2P status needs the driver");
    check_acs(v, a, b, -1, f);
    return;
  }
  p2pkit_pair_t ab, ba;
  p2pk_pair_info(t, a, b, &ab);
  p2pk_pair_info(t, b, a, &ba);
  int p2p = ab.p2p == 0 || ba.p2p == 0 ? 0 : ab.p2p == 1 && ba.p2p == 1 ? 1 : -1;
  const char *over = ab.link == P2PKIT_LINK_NVLINK ? "NVLink" : "PCIe";
  if (p2p == 1) {
    p2pk_finding_add(f, P2PK_DOC_OK, "p2p", subj, NULL, "direct P2P both ways over %s (%s)", over,
                     ab.label);
  } else if (p2p < 0) {
    p2pk_finding_add(f, P2PK_DOC_SKIP, "p2p", subj, NULL,
                     "P2P status not recorded for this pair (%s)", ab.label);
  } else {
    const p2pkit_pair_t *off = ab.p2p == 0 ? &ab : &ba;
    char who[24], nvml[96];
    snprintf(who, sizeof who, "GPU%d->GPU%d", off->src, off->dst);
    nvml_words(off, nvml, sizeof nvml);
    size_t mark = (size_t)f->n;
    p2pk_finding *x = p2pk_finding_add(
        f, P2PK_DOC_FAIL, "p2p", subj, NULL,
        "no direct P2P (%s: cudaDeviceCanAccessPeer %d, %s; path %s): copies are staged through "
        "host memory at PCIe speed",
        who, off->cuda_access, nvml, ab.label);
    if (!x) return;
    int causes = p2p_causes(v, a, b, &ab, f);
    x = &f->v[mark]; /* the array may have moved */
    if (causes)
      snprintf(x->action, sizeof x->action, "see the cause%s below", causes == 1 ? "" : "s");
    else
      snprintf(x->action, sizeof x->action,
               "nothing this machine shows explains it; look for a BIOS option enabling PCIe P2P, "
               "and check `nvidia-smi topo -p2p r`");
  }
  if (ab.link != P2PKIT_LINK_NVLINK) check_acs(v, a, b, p2p, f);
}

void p2pk_doc_check_pairs(const p2pk_doc_input *in, p2pk_findings *f) {
  view *v = calloc(1, sizeof *v);
  if (!v) {
    f->oom = 1;
    return;
  }
  build_view(in, v);
  for (int a = 0; a < v->n; a++)
    for (int b = a + 1; b < v->n; b++) check_pair(v, a, b, f);
  free(v);
}

/* --- each GPU's link to host memory --------------------------------------------- */

/* The link a GPU should train to: its own maximum, unless the slot above
 * supports less (the pcie-link finding says which); the current reading when
 * neither is known. */
static void host_link_of(const dgpu *g, int *gen, int *width) {
  *gen = g->max_gen ? g->max_gen : g->gen;
  *width = g->max_width ? g->max_width : g->width;
  if (g->slot_gen && g->slot_gen < *gen) *gen = g->slot_gen;
  if (g->slot_width && g->slot_width < *width) *width = g->slot_width;
}

static void check_host_link(const view *v, const p2pk_doc_host_bw *r, p2pk_findings *f) {
  char subj[24];
  gpu_name(subj, sizeof subj, r->gpu);
  if (r->verified == 0) {
    p2pk_finding_add(f, P2PK_DOC_FAIL, "host-link", subj,
                     "do not trust this GPU's PCIe path: look for AER and Xid errors in `dmesg`, "
                     "reseat the GPU, check the IOMMU finding above",
                     "bytes copied from host memory to the GPU and back came back changed");
    return;
  }
  if (r->error[0]) {
    p2pk_finding_add(f, P2PK_DOC_FAIL, "host-link", subj,
                     "look for Xid errors in `dmesg` and at `nvidia-smi -q -d PCIE`",
                     "copies between host memory and the GPU failed (%s)", r->error);
    return;
  }
  const dgpu *g = r->gpu >= 0 && r->gpu < v->n ? &v->g[r->gpu] : NULL;
  int gen = 0, width = 0;
  if (g) host_link_of(g, &gen, &width);
  double expect = p2pk_pcie_gbps(gen, width) * P2PK_PCIE_EFFICIENCY;
  double one = r->h2d_gbps < r->d2h_gbps ? r->h2d_gbps : r->d2h_gbps;
  char rates[160];
  snprintf(rates, sizeof rates, "host to GPU %.1f GB/s, GPU to host %.1f, both ways at once %.1f",
           r->h2d_gbps, r->d2h_gbps, r->both_gbps);
  p2pk_finding *x;
  if (expect <= 0) {
    x = p2pk_finding_add(f, P2PK_DOC_OK, "host-link", subj, NULL,
                         "%s; no expected rate (the PCIe link is not known)", rates);
  } else {
    /* With several NUMA nodes, pinned memory on another node than the GPU's
     * crosses the socket link on every copy. */
    char numa[160] = "";
    if (v->in->topo && v->in->topo->nnuma > 1) {
      if (g && g->numa >= 0)
        snprintf(numa, sizeof numa, "; run on the GPU's NUMA node (numactl --cpunodebind=%d "
                 "--membind=%d): memory on another node crosses the socket link", g->numa, g->numa);
      else
        snprintf(numa, sizeof numa, "; run on the GPU's NUMA node (numactl): memory on another "
                 "node crosses the socket link");
    }
    int low_one = one < P2PK_DOC_BW_OK_FRACTION * expect;
    int low_both = r->both_gbps < P2PK_DOC_BW_OK_FRACTION * 2 * expect;
    char action[384];
    if (low_one) {
      snprintf(action, sizeof action, "see the pcie-link and IOMMU findings above%s", numa);
      x = p2pk_finding_add(f, P2PK_DOC_WARN, "host-link", subj, action,
                           "%s: only %.0f%% of the %.1f GB/s a direction expected over PCIe Gen%d "
                           "x%d; copies staged through host memory (P2P off) are bound by it",
                           rates, 100 * one / expect, expect, gen, width);
    } else if (low_both) {
      snprintf(action, sizeof action,
               "look for other traffic on the host's memory or the GPU's root port: the staged "
               "fallback (P2P off) moves data both ways at once%s",
               numa);
      x = p2pk_finding_add(f, P2PK_DOC_WARN, "host-link", subj, action,
                           "%s: each way alone is %.0f%% of the %.1f GB/s expected over PCIe "
                           "Gen%d x%d, but both at once only %.0f%% of twice that",
                           rates, 100 * one / expect, expect, gen, width, 100 * r->both_gbps / (2 * expect));
    } else {
      x = p2pk_finding_add(f, P2PK_DOC_OK, "host-link", subj, NULL,
                           "%s: %.0f%% of the %.1f GB/s a direction expected over PCIe Gen%d x%d, "
                           "%.0f%% of twice that both ways",
                           rates, 100 * one / expect, expect, gen, width, 100 * r->both_gbps / (2 * expect));
    }
  }
  if (x) {
    x->value = one;
    x->expected = expect > 0 ? expect : NAN;
  }
}

void p2pk_doc_check_host_links(const p2pk_doc_input *in, p2pk_findings *f) {
  if (!in->host_bw) {
    p2pk_finding_add(f, P2PK_DOC_SKIP, "host-link", "system", NULL, "host-link probe not run: %s",
                     in->host_bw_skip && in->host_bw_skip[0] ? in->host_bw_skip : "no measurement");
    return;
  }
  view *v = calloc(1, sizeof *v);
  if (!v) {
    f->oom = 1;
    return;
  }
  build_view(in, v);
  for (int i = 0; i < in->nhost_bw; i++) check_host_link(v, &in->host_bw[i], f);
  free(v);
}

/* --- bandwidth ---------------------------------------------------------------- */

void p2pk_doc_check_bandwidth(const p2pk_doc_input *in, p2pk_findings *f) {
  const struct p2pkit_topo *t = in->topo;
  if (!in->bw || !t) {
    p2pk_finding_add(f, P2PK_DOC_SKIP, "bandwidth", "system", NULL, "bandwidth probe not run: %s",
                     in->bw_skip && in->bw_skip[0] ? in->bw_skip : "no measurement");
    return;
  }
  for (int a = 0; a < t->ngpus; a++)
    for (int b = 0; b < t->ngpus; b++) {
      if (a == b) continue;
      const p2pk_doc_bw *best = NULL, *corrupt = NULL, *err = NULL;
      char others[160] = "";
      size_t o = 0;
      int any = 0;
      for (int i = 0; i < in->nbw; i++) {
        const p2pk_doc_bw *r = &in->bw[i];
        if (r->src != a || r->dst != b) continue;
        any = 1;
        if (r->verified == 0) corrupt = corrupt ? corrupt : r;
        else if (r->error[0] || r->gbps <= 0) err = err ? err : r;
        else if (!best || r->gbps > best->gbps) best = r;
      }
      if (!any) continue;
      for (int i = 0; i < in->nbw; i++) {
        const p2pk_doc_bw *r = &in->bw[i];
        if (r->src != a || r->dst != b || r == best || r->error[0] || r->verified == 0) continue;
        int w = snprintf(others + o, sizeof others - o, "%s%s %.1f", o ? ", " : "; also ",
                         r->method, r->gbps);
        if (w > 0 && (size_t)w < sizeof others - o) o += (size_t)w;
      }
      char subj[24];
      snprintf(subj, sizeof subj, "GPU%d->GPU%d", a, b);
      p2pkit_pair_t p;
      p2pk_pair_info(t, a, b, &p);
      if (corrupt) {
        p2pk_finding_add(f, P2PK_DOC_FAIL, "bandwidth", subj,
                         "do not use this path: set P2PKIT_P2P_DISABLE=1 and NCCL_P2P_DISABLE=1 "
                         "until it is fixed; check the ACS and IOMMU findings above",
                         "data arrived corrupted over %s: the path loses or reorders writes",
                         corrupt->method);
        continue;
      }
      if (!best) {
        p2pk_finding_add(f, P2PK_DOC_FAIL, "bandwidth", subj,
                         "rerun with P2PKIT_DEBUG=INFO for the details",
                         "every copy failed (%s: %s)", err ? err->method : "?",
                         err ? err->error : "?");
        continue;
      }
      p2pk_finding *x;
      if (p.expected_gbps <= 0) {
        x = p2pk_finding_add(f, P2PK_DOC_OK, "bandwidth", subj, NULL,
                             "%.1f GB/s (%s)%s; no expected rate (link rates unknown)", best->gbps,
                             best->method, others);
      } else if (best->gbps >= P2PK_DOC_BW_OK_FRACTION * p.expected_gbps) {
        x = p2pk_finding_add(f, P2PK_DOC_OK, "bandwidth", subj, NULL,
                             "%.1f GB/s (%s), %.0f%% of the %.0f GB/s expected over %s%s",
                             best->gbps, best->method, 100 * best->gbps / p.expected_gbps,
                             p.expected_gbps, p.label, others);
      } else {
        x = p2pk_finding_add(
            f, P2PK_DOC_WARN, "bandwidth", subj,
            p.p2p == 0 ? "direct P2P is off (see above): copies are staged through host memory"
                       : "see the link, ACS and IOMMU findings above; `p2pkit bench` gives the "
                         "full picture",
            "only %.1f GB/s (%s), %.0f%% of the %.0f GB/s expected over %s%s", best->gbps,
            best->method, 100 * best->gbps / p.expected_gbps, p.expected_gbps, p.label, others);
      }
      if (x) {
        x->value = best->gbps;
        x->expected = p.expected_gbps > 0 ? p.expected_gbps : NAN;
      }
    }
}

/* --- NCCL -------------------------------------------------------------------------- */

const char *p2pk_doc_nccl_level(const p2pkit_pair_t *p) {
  if (p->link == P2PKIT_LINK_NVLINK) return "NVL";
  switch (p->pcie) {
    case P2PKIT_LINK_PIX: return "PIX";
    case P2PKIT_LINK_PXB: return "PXB";
    case P2PKIT_LINK_PHB:
    case P2PKIT_LINK_NODE: return "PHB";
    default: return "SYS";
  }
}

static void nccl_fallback(const p2pk_nccl_log *log, const p2pkit_pair_t *p, const char *subj,
                          const char *used, unsigned kinds, p2pk_findings *f) {
  char action[384];
  const char *dis = p2pk_nccl_log_env(log, "NCCL_P2P_DISABLE");
  const char *lvl = p2pk_nccl_log_env(log, "NCCL_P2P_LEVEL");
  const char *level = p2pk_doc_nccl_level(p);
  const char *topo_fix = "p2pkit topo --dump-nccl nccl-topo.xml && export "
                         "NCCL_TOPO_FILE=$PWD/nccl-topo.xml";
  char why[200];
  if (dis && strcmp(dis, "0") != 0) {
    snprintf(why, sizeof why, "NCCL_P2P_DISABLE=%s is set in the environment", dis);
    snprintf(action, sizeof action, "unset NCCL_P2P_DISABLE");
  } else if (lvl) {
    snprintf(why, sizeof why, "NCCL_P2P_LEVEL=%s is set and stops short of this pair's path (%s)",
             lvl, level);
    snprintf(action, sizeof action, "export NCCL_P2P_LEVEL=%s (or unset it)", level);
  } else if (p->link == P2PKIT_LINK_NVLINK) {
    snprintf(why, sizeof why,
             "NCCL does not see the NVLink between them (in VMs it often cannot read the "
             "topology)");
    snprintf(action, sizeof action, "give NCCL the real topology: %s; or export NCCL_P2P_LEVEL=NVL",
             topo_fix);
  } else {
    snprintf(why, sizeof why,
             "NCCL's default P2P level does not reach this pair's PCIe path (%s; on Intel CPUs NCCL "
             "stops at PXB)",
             level);
    snprintf(action, sizeof action, "export NCCL_P2P_LEVEL=%s, or give NCCL the real topology: %s",
             level, topo_fix);
  }
  const char *shm = p2pk_nccl_log_env(log, "NCCL_SHM_DISABLE");
  if ((kinds & P2PK_NT_NET) && shm && strcmp(shm, "0") != 0) {
    size_t l = strlen(action);
    snprintf(action + l, sizeof action - l, "; also unset NCCL_SHM_DISABLE");
  }
  p2pk_finding_add(f, P2PK_DOC_FAIL, "nccl", subj, action,
                   "NCCL sends this pair's traffic %s (%s) although direct P2P works here: %s",
                   kinds & P2PK_NT_NET ? "through the network stack" : "through host memory", used,
                   why);
}

static void check_nccl_pair(const p2pk_doc_input *in, const p2pk_nccl_log *log, int a, int b,
                            p2pk_findings *f) {
  int n = log->count[a][b] + log->count[b][a];
  if (n == 0) return; /* NCCL's rings and trees did not connect this pair */
  unsigned kinds = log->kinds[a][b] | log->kinds[b][a];
  const char *used = log->count[a][b] ? log->first[a][b] : log->first[b][a];
  /* Name the fallback when one direction used it. */
  for (int d = 0; d < 2; d++) {
    int s = d ? b : a, t = d ? a : b;
    if (log->kinds[s][t] & (P2PK_NT_SHM | P2PK_NT_NET)) used = log->first[s][t];
  }
  char subj[24];
  pair_name(subj, sizeof subj, a, b);
  int p2p = -1;
  p2pkit_pair_t p;
  memset(&p, 0, sizeof p);
  if (in->topo && a < in->topo->ngpus && b < in->topo->ngpus) {
    p2pkit_pair_t q;
    p2pk_pair_info(in->topo, a, b, &p);
    p2pk_pair_info(in->topo, b, a, &q);
    p2p = p.p2p == 1 && q.p2p == 1 ? 1 : p.p2p == 0 || q.p2p == 0 ? 0 : -1;
  }
  if (!(kinds & (P2PK_NT_SHM | P2PK_NT_NET))) {
    p2pk_finding_add(f, P2PK_DOC_OK, "nccl", subj, NULL, "NCCL uses %s (%d connection%s)", used, n,
                     n == 1 ? "" : "s");
    return;
  }
  if (p2p == 1) {
    nccl_fallback(log, &p, subj, used, kinds, f);
    return;
  }
  if (kinds & P2PK_NT_NET) {
    const char *shm = p2pk_nccl_log_env(log, "NCCL_SHM_DISABLE");
    p2pk_finding_add(f, P2PK_DOC_WARN, "nccl", subj,
                     shm ? "unset NCCL_SHM_DISABLE"
                         : "give NCCL shared memory: in containers use --ipc=host or a larger "
                           "--shm-size (1g or more)",
                     "NCCL sends traffic between GPUs of one machine through the network stack (%s): "
                     "slower than host shared memory%s",
                     used, shm ? " (NCCL_SHM_DISABLE is set)" : "");
    return;
  }
  p2pk_finding_add(f, p2p == 0 ? P2PK_DOC_OK : P2PK_DOC_WARN, "nccl", subj,
                   p2p == 0 ? NULL : "record the P2P status (p2pkit topo --save on the machine)",
                   "NCCL uses host shared memory (%s)%s", used,
                   p2p == 0 ? ": right, direct P2P is not available here (see above)"
                            : "; whether P2P could work is not recorded");
}

void p2pk_doc_check_nccl(const p2pk_doc_input *in, p2pk_findings *f) {
  if (in->nccl_error && in->nccl_error[0]) {
    p2pk_finding_add(f, P2PK_DOC_FAIL, "nccl", "NCCL",
                     "run the job with NCCL_DEBUG=INFO and read the first WARN line; check "
                     "/dev/shm space and that no other process holds the GPUs",
                     "the NCCL all-reduce failed: %s", in->nccl_error);
    return;
  }
  const p2pk_nccl_log *log = in->nccl;
  if (!log) {
    p2pk_finding_add(f, P2PK_DOC_SKIP, "nccl", "NCCL", NULL, "NCCL not checked: %s",
                     in->nccl_skip && in->nccl_skip[0] ? in->nccl_skip : "not run");
    return;
  }
  if (log->nconn == 0) {
    p2pk_finding_add(f, P2PK_DOC_WARN, "nccl", "NCCL",
                     "collect the log with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P,SHM,NET",
                     "the NCCL log%s names no connection, so its transports are unknown%s%s",
                     log->version[0] ? "" : " (no NCCL version line either)",
                     log->nwarn ? "; NCCL warned: " : "", log->nwarn ? log->warn[0] : "");
    return;
  }
  int ngpus = in->topo ? in->topo->ngpus : 0;
  char env[200] = "";
  size_t o = 0;
  for (int i = 0; i < log->nenv; i++) {
    int w = snprintf(env + o, sizeof env - o, "%s%s", o ? ", " : "; settings from the environment: ",
                     log->env[i]);
    if (w > 0 && (size_t)w < sizeof env - o) o += (size_t)w;
  }
  p2pk_finding_add(f, P2PK_DOC_OK, "nccl", "NCCL", NULL,
                   "NCCL %s: %d rank%s, %d connections read (rank i is GPU i)%s",
                   log->version[0] ? log->version : "(version not logged)", log->nranks,
                   log->nranks == 1 ? "" : "s", log->nconn, env);
  /* A log that names GPUs this machine lacks is another machine's or job's. */
  if (in->topo && log->max_rank >= ngpus)
    p2pk_finding_add(f, P2PK_DOC_WARN, "nccl", "NCCL",
                     "give the NCCL log of a job on this machine (one rank per GPU)",
                     "the NCCL log names rank %ld, but this machine has %d GPU%s (0..%d): %d of its "
                     "%d connections are between ranks it does not have, and are not checked",
                     log->max_rank, ngpus, ngpus == 1 ? "" : "s", ngpus - 1,
                     p2pk_nccl_log_conns_beyond(log, ngpus),
                     log->nconn);
  const int n = in->topo && ngpus < log->nranks ? ngpus : log->nranks;
  for (int a = 0; a < n; a++)
    for (int b = a + 1; b < n; b++) check_nccl_pair(in, log, a, b, f);
}

p2pkit_status_t p2pk_doctor_analyze(const p2pk_doc_input *in, p2pk_findings *f) {
  p2pk_doc_check_system(in, f);
  p2pk_doc_check_gpus(in, f);
  p2pk_doc_check_pairs(in, f);
  p2pk_doc_check_gdr(in, f);
  p2pk_doc_check_settings(in, f);
  p2pk_doc_check_host_links(in, f);
  p2pk_doc_check_bandwidth(in, f);
  p2pk_doc_check_nccl(in, f);
  if (f->oom) return P2PKIT_ERR_NO_MEMORY;
  return P2PKIT_SUCCESS;
}
