/* SPDX-License-Identifier: BSD-3-Clause */
/* Printing a topology: nvidia-smi's matrices, one sentence per pair, and the
 * versioned JSON document (schema: docs/topo-json.md). */
#include <stdio.h>
#include <string.h>

#include "core/check.h"
#include "core/json.h"
#include "topo/topo.h"

#define TOPO_JSON_SCHEMA_VERSION 1

static const char *cpus_of(const struct p2pkit_topo *t, int numa) {
  for (int i = 0; i < t->nnuma; i++)
    if (t->numa[i].os_index == numa) return t->numa[i].cpus;
  return "";
}

static int gpu_numa(const struct p2pkit_topo *t, int g) {
  return t->gpus[g].pci >= 0 ? p2pk_pci_numa(t, t->gpus[g].pci) : -1;
}

/* GPU a's cell in column c (GPUs first, then NICs). */
static const char *cell(const struct p2pkit_topo *t, int a, int c, char *buf, size_t len) {
  if (c < t->ngpus) {
    p2pkit_pair_t p;
    p2pk_pair_info(t, a, c, &p);
    snprintf(buf, len, "%s", a == c ? " X " : p.label);
  } else {
    snprintf(buf, len, "%s", p2pkit_link_name(p2pk_gpu_nic_link(t, a, c - t->ngpus)));
  }
  return buf;
}

/* NIC n's cell in column c: its class to a GPU or another NIC. */
static const char *nic_cell(const struct p2pkit_topo *t, int n, int c) {
  if (c < t->ngpus) return p2pkit_link_name(p2pk_gpu_nic_link(t, c, n));
  return c - t->ngpus == n ? " X " : p2pkit_link_name(p2pk_nic_nic_link(t, n, c - t->ngpus));
}

static void print_matrix(const struct p2pkit_topo *t, FILE *out) {
  int ncols = t->ngpus + t->nnics;
  char buf[16];
  fputs("\t", out);
  for (int g = 0; g < t->ngpus; g++) fprintf(out, "GPU%d\t", g);
  for (int n = 0; n < t->nnics; n++) fprintf(out, "NIC%d\t", n);
  fputs("CPU Affinity\tNUMA Affinity\tGPU NUMA ID\n", out);
  for (int a = 0; a < t->ngpus; a++) {
    fprintf(out, "GPU%d\t", a);
    for (int c = 0; c < ncols; c++) fprintf(out, "%s\t", cell(t, a, c, buf, sizeof buf));
    int numa = gpu_numa(t, a);
    const char *cpus = cpus_of(t, numa);
    if (numa >= 0) fprintf(out, "%s\t%d\t\t", cpus[0] ? cpus : "N/A", numa);
    else fputs("N/A\tN/A\t\t", out);
    /* As nvidia-smi: an empty field, then the GPU's own NUMA node or N/A
     * (none, or not recorded: older recordings and the XML sources). */
    if (t->gpus[a].mem_numa >= 0) fprintf(out, "%d\n", t->gpus[a].mem_numa);
    else fputs("N/A\n", out);
  }
  /* As nvidia-smi: NIC rows end after their cells (no affinity columns). */
  for (int n = 0; n < t->nnics; n++) {
    fprintf(out, "NIC%d", n);
    for (int c = 0; c < ncols; c++) fprintf(out, "\t%s", nic_cell(t, n, c));
    fputc('\n', out);
  }
  fputs("\nLegend:\n\n"
        "  X    = Self\n"
        "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n"
        "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node\n"
        "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
        "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n"
        "  PIX  = Connection traversing at most a single PCIe bridge\n"
        "  NV#  = Connection traversing a bonded set of # NVLinks\n",
        out);
  if (!t->nnics) return;
  fputs("\nNIC Legend:\n\n", out);
  char name[P2PK_NIC_NAME_LEN];
  for (int n = 0; n < t->nnics; n++) fprintf(out, "  NIC%d: %s\n", n, p2pk_nic_label(t, n, name, sizeof name));
}

static void print_p2p(const struct p2pkit_topo *t, FILE *out) {
  static const char *title[P2PKIT_P2P_CAPS] = {"read", "write", "atomics", "NVLink"};
  static const char flag[P2PKIT_P2P_CAPS] = {'r', 'w', 'a', 'n'};
  for (int c = 0; c < P2PKIT_P2P_CAPS; c++) {
    fprintf(out, "\nP2P %s (nvidia-smi topo -p2p %c):\n", title[c], flag[c]);
    fputs(" \t", out);
    for (int g = 0; g < t->ngpus; g++) fprintf(out, "GPU%d\t", g);
    fputc('\n', out);
    for (int a = 0; a < t->ngpus; a++) {
      fprintf(out, " GPU%d\t", a);
      for (int b = 0; b < t->ngpus; b++)
        fprintf(out, "%s\t", a == b ? "X" : p2pkit_p2p_code_name(t->p2p[a][b].nvml[c]));
      fputc('\n', out);
    }
  }
  fputs("\nLegend:\n\n"
        "  X    = Self\n"
        "  OK   = Status Ok\n"
        "  CNS  = Chipset not supported\n"
        "  GNS  = GPU not supported\n"
        "  TNS  = Topology not supported\n"
        "  NS   = Not supported\n"
        "  U    = Unknown\n",
        out);
}

static const char *path_words(p2pkit_link_t l) {
  switch (l) {
    case P2PKIT_LINK_PIX: return "through one PCIe switch";
    case P2PKIT_LINK_PXB: return "through several PCIe switches";
    case P2PKIT_LINK_PHB: return "through the PCIe host bridge";
    case P2PKIT_LINK_NODE: return "between PCIe host bridges of one NUMA node";
    case P2PKIT_LINK_SYS: return "across the CPU interconnect between NUMA nodes";
    default: return "over an unknown PCIe path";
  }
}

static const char *why_words(p2pkit_p2p_code_t c) {
  switch (c) {
    case P2PKIT_P2P_CNS: return "the chipset does not support it";
    case P2PKIT_P2P_GNS: return "this GPU model does not support it";
    case P2PKIT_P2P_TNS: return "the topology does not allow it (e.g. GPUs on different CPUs)";
    case P2PKIT_P2P_NS: return "not supported or disabled by the driver";
    default: return "the driver does not allow it";
  }
}

/* One plain sentence: how data travels from a to b and what to expect. */
void p2pk_pair_sentence(const struct p2pkit_topo *t, int a, int b, char *buf, size_t len) {
  p2pkit_pair_t p;
  p2pk_pair_info(t, a, b, &p);
  int o = snprintf(buf, len, "GPU%d -> GPU%d: ", a, b);
  if (o < 0 || (size_t)o >= len) return;
  char *s = buf + o;
  size_t n = len - (size_t)o;
  char rate[64] = "";
  if (p.expected_gbps > 0) snprintf(rate, sizeof rate, ", about %.0f GB/s expected", p.expected_gbps);
  if (p.p2p == 1 && p.link == P2PKIT_LINK_NVLINK)
    snprintf(s, n, "direct P2P over %d NVLink%s (%s)%s", p.nvlinks, p.nvlinks == 1 ? "" : "s",
             p.label, rate);
  else if (p.p2p == 1)
    snprintf(s, n, "direct P2P over PCIe %s (%s)%s", path_words(p.pcie), p.label, rate);
  else if (p.p2p == 0) {
    char cap[64] = "";
    if (p.expected_gbps > 0) snprintf(cap, sizeof cap, " (about %.0f GB/s)", p.expected_gbps);
    snprintf(s, n,
             "no P2P (%s: %s): staged through host memory, crossing PCIe twice, at most the "
             "PCIe rate%s",
             p.label, why_words(p.caps[P2PKIT_P2P_READ]), cap);
  } else if (p.link == P2PKIT_LINK_NVLINK)
    snprintf(s, n, "joined by %d NVLinks (%s); P2P status not recorded%s", p.nvlinks, p.label, rate);
  else
    snprintf(s, n, "PCIe path %s (%s); P2P status not recorded, so direct access is not known",
             path_words(p.pcie), p.label);
}

/* GPUDirect RDMA over a GPU-NIC path of class l, in a few words. */
static const char *gdr_words(p2pkit_link_t l) {
  switch (l) {
    case P2PKIT_LINK_PIX:
    case P2PKIT_LINK_PXB: return "good for GPUDirect RDMA";
    case P2PKIT_LINK_PHB:
    case P2PKIT_LINK_NODE:
    case P2PKIT_LINK_SYS:
      return "GPUDirect RDMA would cross the CPU (NCCL uses it only up to PXB by default)";
    default: return "whether GPUDirect RDMA suits it is unknown";
  }
}

void p2pk_nic_sentence(const struct p2pkit_topo *t, int g, char *buf, size_t len) {
  p2pkit_link_t l;
  int n = p2pk_nearest_nic(t, g, &l);
  if (n < 0) {
    if (len) buf[0] = '\0';
    return;
  }
  char name[P2PK_NIC_NAME_LEN];
  snprintf(buf, len, "GPU%d -> NIC%d (%s): the nearest NIC, %s (%s): %s", g, n,
           p2pk_nic_label(t, n, name, sizeof name), path_words(l), p2pkit_link_name(l), gdr_words(l));
}

static void print_sentences(const struct p2pkit_topo *t, FILE *out) {
  fputs("\nPaths:\n", out);
  char buf[512];
  for (int a = 0; a < t->ngpus; a++)
    for (int b = 0; b < t->ngpus; b++) {
      if (a == b) continue;
      p2pk_pair_sentence(t, a, b, buf, sizeof buf);
      fprintf(out, "  %s\n", buf);
    }
  if (!t->nnics) return;
  fputs("\nNearest NIC:\n", out);
  for (int g = 0; g < t->ngpus; g++) {
    p2pk_nic_sentence(t, g, buf, sizeof buf);
    fprintf(out, "  %s\n", buf);
  }
}

static void print_notes(const struct p2pkit_topo *t, FILE *out) {
  if (strcmp(t->format, "live") != 0)
    fprintf(out, "\nRecorded machine: %s (%s format)\n", t->source, t->format);
  for (int i = 0; i < t->nnotes; i++) fprintf(out, "Note: %s\n", t->notes[i]);
}

static void json_nearest_nic(p2pk_json *j, const struct p2pkit_topo *t, int g) {
  p2pkit_link_t l;
  int n = p2pk_nearest_nic(t, g, &l);
  if (n < 0) {
    p2pk_json_null(j, "nearest_nic");
    return;
  }
  char name[P2PK_NIC_NAME_LEN], sentence[512];
  p2pk_nic_sentence(t, g, sentence, sizeof sentence);
  p2pk_json_obj(j, "nearest_nic");
  p2pk_json_int(j, "index", n);
  p2pk_json_str(j, "label", p2pk_nic_label(t, n, name, sizeof name));
  p2pk_json_str(j, "link", p2pkit_link_name(l));
  p2pk_json_str(j, "summary", sentence);
  p2pk_json_obj_end(j);
}

static void json_nic(p2pk_json *j, const struct p2pkit_topo *t, int n) {
  p2pkit_nic_t info;
  p2pkit_topo_nic((p2pkit_topo_t)t, n, &info);
  char name[P2PK_NIC_NAME_LEN];
  p2pk_json_obj(j, NULL);
  p2pk_json_int(j, "index", n);
  p2pk_json_str(j, "name", info.name[0] ? info.name : NULL);
  p2pk_json_str(j, "label", p2pk_nic_label(t, n, name, sizeof name));
  p2pk_json_str(j, "busid", info.busid[0] ? info.busid : NULL);
  if (info.numa >= 0) p2pk_json_int(j, "numa", info.numa);
  else p2pk_json_null(j, "numa");
  p2pk_json_int(j, "speed_mbps", info.speed_mbps);
  if (t->nics[n].gdr < 0) p2pk_json_null(j, "nccl_gdr");
  else p2pk_json_bool(j, "nccl_gdr", t->nics[n].gdr);
  p2pk_json_arr(j, "gpu_links");
  for (int g = 0; g < t->ngpus; g++) p2pk_json_str(j, NULL, p2pkit_link_name(p2pk_gpu_nic_link(t, g, n)));
  p2pk_json_arr_end(j);
  p2pk_json_obj_end(j);
}

static void json_gpu(p2pk_json *j, const struct p2pkit_topo *t, int g) {
  static const char *peer[] = {"gpu", "switch", "cpu", "unknown"};
  const p2pk_gpu *gp = &t->gpus[g];
  p2pkit_gpu_t info;
  p2pkit_topo_gpu((p2pkit_topo_t)t, g, &info);
  p2pk_json_obj(j, NULL);
  p2pk_json_int(j, "index", g);
  p2pk_json_str(j, "name", gp->name);
  p2pk_json_str(j, "busid", gp->busid);
  p2pk_json_str(j, "uuid", gp->uuid);
  p2pk_json_int(j, "memory_bytes", (int64_t)gp->memory_bytes);
  p2pk_json_int(j, "sm_count", gp->sm_count);
  char cc[16];
  snprintf(cc, sizeof cc, "%d.%d", gp->cc_major, gp->cc_minor);
  p2pk_json_str(j, "compute_capability", gp->cc_major ? cc : NULL);
  if (info.numa >= 0) p2pk_json_int(j, "numa", info.numa);
  else p2pk_json_null(j, "numa");
  p2pk_json_str(j, "cpu_affinity", info.cpus[0] ? info.cpus : NULL);
  if (gp->mem_numa >= 0) p2pk_json_int(j, "gpu_numa_id", gp->mem_numa);
  else p2pk_json_null(j, "gpu_numa_id");
  p2pk_json_bool(j, "gpu_numa_id_known", gp->mem_numa != P2PK_GPU_NUMA_UNKNOWN);
  p2pk_json_obj(j, "pcie");
  p2pk_json_int(j, "gen", info.pcie_gen);
  p2pk_json_int(j, "width", info.pcie_width);
  p2pk_json_int(j, "max_gen", info.pcie_max_gen);
  p2pk_json_int(j, "max_width", info.pcie_max_width);
  p2pk_json_obj_end(j);
  p2pk_json_obj(j, "nvlink");
  p2pk_json_int(j, "present", gp->nvlinks_present);
  p2pk_json_int(j, "active", gp->nvlinks_active);
  p2pk_json_num(j, "gbps_per_link", gp->nvlink_gbps);
  p2pk_json_arr(j, "groups");
  for (int i = 0; i < gp->ngroups; i++) {
    p2pk_json_obj(j, NULL);
    p2pk_json_str(j, "peer", peer[gp->groups[i].peer]);
    p2pk_json_str(j, "busid", gp->groups[i].peer_busid);
    p2pk_json_int(j, "count", gp->groups[i].count);
    p2pk_json_int(j, "version", gp->groups[i].version);
    p2pk_json_obj_end(j);
  }
  p2pk_json_arr_end(j);
  p2pk_json_obj_end(j);
  json_nearest_nic(j, t, g);
  p2pk_json_obj_end(j);
}

static void json_pair(p2pk_json *j, const struct p2pkit_topo *t, int a, int b) {
  static const char *cap_names[P2PKIT_P2P_CAPS] = {"read", "write", "atomics", "nvlink"};
  p2pkit_pair_t p;
  p2pk_pair_info(t, a, b, &p);
  char sentence[512];
  p2pk_pair_sentence(t, a, b, sentence, sizeof sentence);
  p2pk_json_obj(j, NULL);
  p2pk_json_int(j, "src", a);
  p2pk_json_int(j, "dst", b);
  p2pk_json_str(j, "link", p.label);
  p2pk_json_str(j, "pcie_path", p2pkit_link_name(p.pcie));
  p2pk_json_int(j, "nvlinks", p.nvlinks);
  if (p.p2p < 0) p2pk_json_null(j, "p2p");
  else p2pk_json_bool(j, "p2p", p.p2p);
  p2pk_json_obj(j, "nvml_p2p");
  for (int c = 0; c < P2PKIT_P2P_CAPS; c++) p2pk_json_str(j, cap_names[c], p2pkit_p2p_code_name(p.caps[c]));
  p2pk_json_obj_end(j);
  p2pk_json_obj(j, "cuda");
  p2pk_json_int(j, "can_access_peer", p.cuda_access);
  p2pk_json_int(j, "native_atomics", p.cuda_atomics);
  p2pk_json_int(j, "performance_rank", p.cuda_perf_rank);
  p2pk_json_obj_end(j);
  p2pk_json_num(j, "line_gbps", p.line_gbps);
  p2pk_json_num(j, "expected_gbps", p.expected_gbps);
  p2pk_json_str(j, "summary", sentence);
  p2pk_json_obj_end(j);
}

static void print_json(const struct p2pkit_topo *t, FILE *out) {
  p2pk_json j;
  p2pk_json_init(&j, out);
  p2pk_json_obj(&j, NULL);
  p2pk_json_str(&j, "schema", "p2pkit-topo");
  p2pk_json_int(&j, "schema_version", TOPO_JSON_SCHEMA_VERSION);
  p2pk_json_obj(&j, "source");
  p2pk_json_str(&j, "format", t->format);
  p2pk_json_str(&j, "name", t->source);
  p2pk_json_obj_end(&j);
  p2pk_json_str(&j, "hostname", t->hostname);
  p2pk_json_str(&j, "driver", t->driver[0] ? t->driver : NULL);
  p2pk_json_str(&j, "nvml_version", t->nvml_version[0] ? t->nvml_version : NULL);
  p2pk_json_int(&j, "cuda_driver", t->cuda_driver);
  p2pk_json_int(&j, "cuda_runtime", t->cuda_runtime);
  p2pk_json_arr(&j, "notes");
  for (int i = 0; i < t->nnotes; i++) p2pk_json_str(&j, NULL, t->notes[i]);
  p2pk_json_arr_end(&j);
  p2pk_json_arr(&j, "numa_nodes");
  for (int i = 0; i < t->nnuma; i++) {
    p2pk_json_obj(&j, NULL);
    p2pk_json_int(&j, "os_index", t->numa[i].os_index);
    p2pk_json_str(&j, "cpus", t->numa[i].cpus);
    p2pk_json_obj_end(&j);
  }
  p2pk_json_arr_end(&j);
  p2pk_json_arr(&j, "gpus");
  for (int g = 0; g < t->ngpus; g++) json_gpu(&j, t, g);
  p2pk_json_arr_end(&j);
  p2pk_json_arr(&j, "nics");
  for (int n = 0; n < t->nnics; n++) json_nic(&j, t, n);
  p2pk_json_arr_end(&j);
  p2pk_json_arr(&j, "pairs");
  for (int a = 0; a < t->ngpus; a++)
    for (int b = 0; b < t->ngpus; b++)
      if (a != b) json_pair(&j, t, a, b);
  p2pk_json_arr_end(&j);
  p2pk_json_obj_end(&j);
  p2pk_json_finish(&j);
}

p2pkit_status_t p2pkit_topo_print(p2pkit_topo_t t, FILE *out, int flags) {
  if (!t || !out) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "topology or stream is NULL");
  if (flags & P2PKIT_PRINT_JSON) {
    print_json(t, out);
    return P2PKIT_SUCCESS;
  }
  if (flags & P2PKIT_PRINT_MATRIX) print_matrix(t, out);
  if (flags & P2PKIT_PRINT_P2P) print_p2p(t, out);
  if (flags & P2PKIT_PRINT_SENTENCES) print_sentences(t, out);
  print_notes(t, out);
  return ferror(out) ? p2pk_fail(P2PKIT_ERR_IO, "error writing the topology") : P2PKIT_SUCCESS;
}
