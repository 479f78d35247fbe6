/* SPDX-License-Identifier: BSD-3-Clause */
/* Building, validating and classifying the topology model. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "topo/topo.h"

struct p2pkit_topo *p2pk_topo_new(const char *format, const char *source) {
  struct p2pkit_topo *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  snprintf(t->format, sizeof t->format, "%s", format ? format : "");
  snprintf(t->source, sizeof t->source, "%s", source ? source : "");
  for (int i = 0; i < P2PK_MAX_GPUS; i++)
    for (int j = 0; j < P2PK_MAX_GPUS; j++) {
      p2pk_p2p *p = &t->p2p[i][j];
      p->cuda_access = p->attr_access = p->attr_atomics = -1;
      p->attr_perf_rank = p->attr_array = -1;
      for (int c = 0; c < P2PKIT_P2P_CAPS; c++) p->nvml[c] = P2PKIT_P2P_U;
    }
  return t;
}

int p2pk_busid_normalize(const char *in, char out[P2PK_BUSID_LEN]) {
  unsigned long dom = 0, bus = 0, dev = 0, fn = 0;
  const char *p = in;
  char *end;
  while (*p == ' ') p++;
  /* Up to four hex fields: [domain:]bus:device[.function] */
  unsigned long f[4];
  int n = 0;
  for (;;) {
    if (!isxdigit((unsigned char)*p)) return -1;
    f[n++] = strtoul(p, &end, 16);
    if (end - p > 8) return -1;
    p = end;
    if (*p == ':' && n < 3) {
      p++;
      continue;
    }
    break;
  }
  if (*p == '.') {
    p++;
    if (!isxdigit((unsigned char)*p)) return -1;
    fn = strtoul(p, &end, 16);
    p = end;
  } else if (n == 2) {
    /* "dddd:bb" names a host bridge's bus: keep it as such. */
    while (*p == ' ') p++;
    if (*p) return -1;
    if (f[0] > 0xffff || f[1] > 0xff) return -1;
    snprintf(out, P2PK_BUSID_LEN, "%04lx:%02lx", f[0], f[1]);
    return 0;
  }
  while (*p == ' ') p++;
  if (*p) return -1;
  if (n == 3) {
    dom = f[0];
    bus = f[1];
    dev = f[2];
  } else if (n == 2) {
    bus = f[0];
    dev = f[1];
  } else {
    return -1;
  }
  /* NVML pads the domain to 8 digits; NCCL's switch target is ffffffff. */
  if (dom > 0xffffffffUL || bus > 0xff || dev > 0x1f || fn > 7) return -1;
  snprintf(out, P2PK_BUSID_LEN, "%04lx:%02lx:%02lx.%lx", dom & 0xffffffffUL, bus, dev, fn);
  return 0;
}

int p2pk_topo_find_pci(const struct p2pkit_topo *t, const char *busid) {
  char want[P2PK_BUSID_LEN];
  if (p2pk_busid_normalize(busid, want) != 0) return -1;
  for (int i = 0; i < t->npci; i++)
    if (strcmp(t->pci[i].busid, want) == 0) return i;
  return -1;
}

int p2pk_topo_find_gpu(const struct p2pkit_topo *t, const char *busid) {
  char want[P2PK_BUSID_LEN];
  if (p2pk_busid_normalize(busid, want) != 0) return -1;
  for (int i = 0; i < t->ngpus; i++)
    if (strcmp(t->gpus[i].busid, want) == 0) return i;
  return -1;
}

int p2pk_topo_add_pci(struct p2pkit_topo *t, p2pk_pci_kind kind, const char *busid, int parent) {
  if (t->npci >= P2PK_MAX_PCI) {
    p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "more than %d PCI devices", P2PK_MAX_PCI);
    return -1;
  }
  p2pk_pci_node *n = &t->pci[t->npci];
  memset(n, 0, sizeof *n);
  n->kind = kind;
  if (p2pk_busid_normalize(busid, n->busid) != 0) snprintf(n->busid, sizeof n->busid, "%s", busid);
  n->parent = parent;
  n->numa = -1;
  return t->npci++;
}

int p2pk_topo_add_numa(struct p2pkit_topo *t, int os_index, const char *cpus) {
  for (int i = 0; i < t->nnuma; i++)
    if (t->numa[i].os_index == os_index) return i;
  if (t->nnuma >= P2PK_MAX_NUMA) {
    p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "more than %d NUMA nodes", P2PK_MAX_NUMA);
    return -1;
  }
  p2pk_numa_node *n = &t->numa[t->nnuma];
  n->os_index = os_index;
  snprintf(n->cpus, sizeof n->cpus, "%s", cpus ? cpus : "");
  return t->nnuma++;
}

int p2pk_topo_add_gpu(struct p2pkit_topo *t, const char *busid) {
  if (t->ngpus >= P2PK_MAX_GPUS) {
    p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "more than %d GPUs", P2PK_MAX_GPUS);
    return -1;
  }
  p2pk_gpu *g = &t->gpus[t->ngpus];
  memset(g, 0, sizeof *g);
  if (p2pk_busid_normalize(busid, g->busid) != 0) snprintf(g->busid, sizeof g->busid, "%s", busid);
  g->pci = -1;
  g->nvlinks_present = g->nvlinks_active = -1;
  g->mem_numa = P2PK_GPU_NUMA_UNKNOWN;
  return t->ngpus++;
}

int p2pk_topo_add_nic(struct p2pkit_topo *t, const char *name, int pci) {
  if (t->nnics >= P2PK_MAX_NICS) {
    p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "more than %d NICs", P2PK_MAX_NICS);
    return -1;
  }
  p2pk_nic *n = &t->nics[t->nnics];
  memset(n, 0, sizeof *n);
  snprintf(n->name, sizeof n->name, "%s", name ? name : "");
  n->pci = pci;
  n->gdr = -1;
  return t->nnics++;
}

void p2pk_topo_note(struct p2pkit_topo *t, const char *fmt, ...) {
  if (t->nnotes >= P2PK_MAX_NOTES) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->notes[t->nnotes], sizeof t->notes[0], fmt, ap);
  va_end(ap);
  for (int i = 0; i < t->nnotes; i++)
    if (strcmp(t->notes[i], t->notes[t->nnotes]) == 0) return;
  t->nnotes++;
}

p2pkit_status_t p2pk_topo_validate(const struct p2pkit_topo *t) {
  for (int i = 0; i < t->npci; i++) {
    int p = t->pci[i].parent, steps = 0;
    if (p < -1 || p >= t->npci)
      return p2pk_fail(P2PKIT_ERR_PARSE, "PCI node %s: parent %d out of range", t->pci[i].busid, p);
    while (p >= 0) {
      if (++steps > t->npci)
        return p2pk_fail(P2PKIT_ERR_PARSE, "PCI node %s: its parents form a loop", t->pci[i].busid);
      p = t->pci[p].parent;
    }
  }
  for (int g = 0; g < t->ngpus; g++) {
    int p = t->gpus[g].pci;
    if (p < -1 || p >= t->npci)
      return p2pk_fail(P2PKIT_ERR_PARSE, "GPU%d: PCI node %d out of range", g, p);
    if (t->gpus[g].ngroups < 0 || t->gpus[g].ngroups > P2PK_MAX_NVL_GROUPS)
      return p2pk_fail(P2PKIT_ERR_PARSE, "GPU%d: bad NVLink group count", g);
  }
  for (int n = 0; n < t->nnics; n++)
    if (t->nics[n].pci < 0 || t->nics[n].pci >= t->npci)
      return p2pk_fail(P2PKIT_ERR_PARSE, "NIC%d: PCI node %d out of range", n, t->nics[n].pci);
  return P2PKIT_SUCCESS;
}

/* --- classification ------------------------------------------------------ */

static int host_bridge_of(const struct p2pkit_topo *t, int pci) {
  int last = pci;
  for (int p = pci; p >= 0; p = t->pci[p].parent) last = p;
  return last >= 0 && t->pci[last].kind == P2PK_PCI_HOSTBRIDGE ? last : -1;
}

int p2pk_pci_numa(const struct p2pkit_topo *t, int pci) {
  for (int p = pci; p >= 0; p = t->pci[p].parent)
    if (t->pci[p].numa >= 0) return t->pci[p].numa;
  return -1;
}

/* Switches on the way from a GPU node up to (not including) `stop`. */
static int switches_below(const struct p2pkit_topo *t, int pci, int stop) {
  int n = 0;
  for (int p = t->pci[pci].parent; p >= 0 && p != stop; p = t->pci[p].parent)
    if (t->pci[p].kind == P2PK_PCI_SWITCH) n++;
  return n;
}

/* Where the walk up from a node starts: its parent, or the node itself for
 * a host bridge standing for a device known only to hang from it. */
static int chain_start(const struct p2pkit_topo *t, int pci) {
  return t->pci[pci].kind == P2PK_PCI_HOSTBRIDGE ? pci : t->pci[pci].parent;
}

p2pkit_link_t p2pk_classify_pci(const struct p2pkit_topo *t, int pa, int pb) {
  if (pa < 0 || pb < 0 || pa >= t->npci || pb >= t->npci) return P2PKIT_LINK_UNKNOWN;
  /* Lowest common ancestor: walk a's chain, test each against b's chain. */
  int lca = -1;
  for (int x = chain_start(t, pa); x >= 0 && lca < 0; x = t->pci[x].parent)
    for (int y = chain_start(t, pb); y >= 0; y = t->pci[y].parent)
      if (x == y) {
        lca = x;
        break;
      }
  if (lca >= 0 && t->pci[lca].kind == P2PK_PCI_SWITCH) {
    /* The common switch itself plus any below it on either side. */
    int n = 1 + switches_below(t, pa, lca) + switches_below(t, pb, lca);
    return n <= 1 ? P2PKIT_LINK_PIX : P2PKIT_LINK_PXB;
  }
  if (lca >= 0) return P2PKIT_LINK_PHB;
  /* Different host bridges (or none known). */
  int na = p2pk_pci_numa(t, pa), nb = p2pk_pci_numa(t, pb);
  if (host_bridge_of(t, pa) < 0 || host_bridge_of(t, pb) < 0) return P2PKIT_LINK_UNKNOWN;
  if (na < 0 || nb < 0) return P2PKIT_LINK_UNKNOWN;
  /* Different NUMA nodes mean SYS even when the source does not separate
   * host bridges (NCCL dumps); NODE needs the bridges to be real. */
  if (na != nb) return P2PKIT_LINK_SYS;
  return (t->known & P2PK_KNOW_HOSTBRIDGES) ? P2PKIT_LINK_NODE : P2PKIT_LINK_UNKNOWN;
}

p2pkit_link_t p2pk_classify_pcie(const struct p2pkit_topo *t, int a, int b) {
  if (a == b) return P2PKIT_LINK_SELF;
  return p2pk_classify_pci(t, t->gpus[a].pci, t->gpus[b].pci);
}

p2pkit_link_t p2pk_gpu_nic_link(const struct p2pkit_topo *t, int g, int n) {
  return p2pk_classify_pci(t, t->gpus[g].pci, t->nics[n].pci);
}

p2pkit_link_t p2pk_nic_nic_link(const struct p2pkit_topo *t, int a, int b) {
  if (a == b) return P2PKIT_LINK_SELF;
  return p2pk_classify_pci(t, t->nics[a].pci, t->nics[b].pci);
}

int p2pk_nearest_nic(const struct p2pkit_topo *t, int g, p2pkit_link_t *link_p) {
  int best = -1;
  p2pkit_link_t best_link = P2PKIT_LINK_UNKNOWN;
  for (int n = 0; n < t->nnics; n++) {
    p2pkit_link_t l = p2pk_gpu_nic_link(t, g, n);
    if (best < 0 || l < best_link) {
      best = n;
      best_link = l;
    }
  }
  if (link_p) *link_p = best_link;
  return best;
}

const char *p2pk_nic_label(const struct p2pkit_topo *t, int n, char *buf, size_t len) {
  const p2pk_nic *x = &t->nics[n];
  char canon[P2PK_BUSID_LEN];
  if (x->name[0]) snprintf(buf, len, "%s", x->name);
  else if (x->pci >= 0 && x->pci < t->npci && p2pk_busid_normalize(t->pci[x->pci].busid, canon) == 0)
    snprintf(buf, len, "%s", canon);
  else snprintf(buf, len, "NIC%d", n);
  return buf;
}

static int switch_links(const p2pk_gpu *g) {
  int n = 0;
  for (int i = 0; i < g->ngroups; i++)
    if (g->groups[i].peer == P2PK_NVL_SWITCH) n += g->groups[i].count;
  return n;
}

int p2pk_nvlinks_between(const struct p2pkit_topo *t, int a, int b) {
  if (a == b) return 0;
  const p2pk_gpu *ga = &t->gpus[a], *gb = &t->gpus[b];
  int direct = 0;
  for (int i = 0; i < ga->ngroups; i++)
    if (ga->groups[i].peer == P2PK_NVL_GPU && strcmp(ga->groups[i].peer_busid, gb->busid) == 0)
      direct += ga->groups[i].count;
  if (direct) return direct;
  int sa = switch_links(ga), sb = switch_links(gb);
  return sa < sb ? sa : sb;
}

double p2pk_pcie_gbps(int gen, int width) {
  /* GB/s per lane after line coding: 8b/10b for gen1-2, 128b/130b after. */
  static const double lane[] = {0, 0.25, 0.5, 0.985, 1.969, 3.938, 7.877};
  if (gen < 1 || gen > 6 || width < 1) return 0;
  return lane[gen] * width;
}

/* Practical fraction of line rate a bulk copy reaches over NVLink, from the
 * device machine (ANCHORS.md): copy engine 395 of 478 GB/s (PCIe's is
 * P2PK_PCIE_EFFICIENCY, topo.h). */
#define NVLINK_EFFICIENCY 0.82

static double gpu_pcie_gbps(const struct p2pkit_topo *t, int g) {
  int p = t->gpus[g].pci;
  if (p < 0) return 0;
  const p2pk_pci_node *n = &t->pci[p];
  return p2pk_pcie_gbps(n->link_gen ? n->link_gen : n->max_gen,
                        n->link_width ? n->link_width : n->max_width);
}

void p2pk_pair_info(const struct p2pkit_topo *t, int a, int b, p2pkit_pair_t *out) {
  memset(out, 0, sizeof *out);
  out->src = a;
  out->dst = b;
  out->pcie = p2pk_classify_pcie(t, a, b);
  out->nvlinks = p2pk_nvlinks_between(t, a, b);
  const p2pk_p2p *p = &t->p2p[a][b];
  for (int c = 0; c < P2PKIT_P2P_CAPS; c++) out->caps[c] = a == b ? P2PKIT_P2P_OK : p->nvml[c];
  out->cuda_access = p->cuda_access;
  out->cuda_atomics = p->attr_atomics;
  out->cuda_perf_rank = p->attr_perf_rank;
  if (a == b) {
    out->link = P2PKIT_LINK_SELF;
    out->p2p = 1;
    snprintf(out->label, sizeof out->label, "X");
    return;
  }
  out->link = out->nvlinks > 0 ? P2PKIT_LINK_NVLINK : out->pcie;
  if (out->link == P2PKIT_LINK_NVLINK)
    snprintf(out->label, sizeof out->label, "NV%d", out->nvlinks);
  else
    snprintf(out->label, sizeof out->label, "%s", p2pkit_link_name(out->link));

  /* Direct access: the runtime's word first, then NVML's read+write status. */
  if (p->cuda_access >= 0) out->p2p = p->cuda_access;
  else if (p->nvml[P2PKIT_P2P_READ] != P2PKIT_P2P_U && p->nvml[P2PKIT_P2P_WRITE] != P2PKIT_P2P_U)
    out->p2p = p->nvml[P2PKIT_P2P_READ] == P2PKIT_P2P_OK && p->nvml[P2PKIT_P2P_WRITE] == P2PKIT_P2P_OK;
  else out->p2p = -1;

  double pcie = gpu_pcie_gbps(t, a), pcie_b = gpu_pcie_gbps(t, b);
  if (pcie_b > 0 && (pcie == 0 || pcie_b < pcie)) pcie = pcie_b;
  if (out->link == P2PKIT_LINK_NVLINK && out->p2p != 0) {
    double per = t->gpus[a].nvlink_gbps > 0 ? t->gpus[a].nvlink_gbps : t->gpus[b].nvlink_gbps;
    out->line_gbps = per * out->nvlinks;
    out->expected_gbps = out->line_gbps * NVLINK_EFFICIENCY;
  } else {
    /* P2P over PCIe, or staged through the host: both bound by one PCIe link
     * (a staged copy crosses two, but a pipeline overlaps them). */
    out->line_gbps = pcie;
    out->expected_gbps = pcie * P2PK_PCIE_EFFICIENCY;
  }
}

const char *p2pkit_link_name(p2pkit_link_t link) {
  static const char *names[] = {"X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS", "?"};
  if ((int)link < 0 || link > P2PKIT_LINK_UNKNOWN) return "?";
  return names[link];
}

const char *p2pkit_p2p_code_name(p2pkit_p2p_code_t code) {
  static const char *names[] = {"OK", "CNS", "GNS", "TNS", "NS", "U"};
  if ((int)code < 0 || code > P2PKIT_P2P_U) return "U";
  return names[code];
}

/* --- public accessors ---------------------------------------------------- */

int p2pkit_topo_gpu_count(p2pkit_topo_t topo) { return topo ? topo->ngpus : 0; }

p2pkit_status_t p2pkit_topo_gpu(p2pkit_topo_t t, int g, p2pkit_gpu_t *out) {
  if (!t || !out) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "topology or output is NULL");
  if (g < 0 || g >= t->ngpus)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "GPU %d does not exist (this machine has %d)", g,
                     t->ngpus);
  const p2pk_gpu *s = &t->gpus[g];
  memset(out, 0, sizeof *out);
  out->index = g;
  snprintf(out->name, sizeof out->name, "%s", s->name);
  snprintf(out->busid, sizeof out->busid, "%s", s->busid);
  out->memory_bytes = s->memory_bytes;
  out->sm_count = s->sm_count;
  out->cc_major = s->cc_major;
  out->cc_minor = s->cc_minor;
  out->numa = s->pci >= 0 ? p2pk_pci_numa(t, s->pci) : -1;
  for (int i = 0; i < t->nnuma; i++)
    if (t->numa[i].os_index == out->numa) snprintf(out->cpus, sizeof out->cpus, "%s", t->numa[i].cpus);
  if (s->pci >= 0) {
    const p2pk_pci_node *n = &t->pci[s->pci];
    out->pcie_gen = n->link_gen;
    out->pcie_width = n->link_width;
    out->pcie_max_gen = n->max_gen;
    out->pcie_max_width = n->max_width;
  }
  out->nvlinks_active = s->nvlinks_active;
  out->nvlinks_present = s->nvlinks_present;
  out->nvlink_gbps = s->nvlink_gbps;
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pkit_topo_pair(p2pkit_topo_t t, int a, int b, p2pkit_pair_t *out) {
  if (!t || !out) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "topology or output is NULL");
  if (a < 0 || a >= t->ngpus || b < 0 || b >= t->ngpus)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "GPU pair %d,%d out of range (this machine has %d)",
                     a, b, t->ngpus);
  p2pk_pair_info(t, a, b, out);
  return P2PKIT_SUCCESS;
}

int p2pkit_topo_nic_count(p2pkit_topo_t topo) { return topo ? topo->nnics : 0; }

p2pkit_status_t p2pkit_topo_nic(p2pkit_topo_t t, int n, p2pkit_nic_t *out) {
  if (!t || !out) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "topology or output is NULL");
  if (n < 0 || n >= t->nnics)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "NIC %d does not exist (this machine has %d)", n,
                     t->nnics);
  const p2pk_nic *x = &t->nics[n];
  memset(out, 0, sizeof *out);
  out->index = n;
  snprintf(out->name, sizeof out->name, "%s", x->name);
  if (t->pci[x->pci].kind != P2PK_PCI_HOSTBRIDGE)
    snprintf(out->busid, sizeof out->busid, "%s", t->pci[x->pci].busid);
  out->numa = p2pk_pci_numa(t, x->pci);
  out->speed_mbps = x->speed_mbps;
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pkit_topo_gpu_nic(p2pkit_topo_t t, int g, int n, p2pkit_link_t *link_p) {
  if (!t || !link_p) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "topology or output is NULL");
  if (g < 0 || g >= t->ngpus || n < 0 || n >= t->nnics)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT,
                     "GPU %d / NIC %d out of range (this machine has %d GPUs, %d NICs)", g, n,
                     t->ngpus, t->nnics);
  *link_p = p2pk_gpu_nic_link(t, g, n);
  return P2PKIT_SUCCESS;
}

void p2pkit_topo_destroy(p2pkit_topo_t topo) { free(topo); }
