/* SPDX-License-Identifier: BSD-3-Clause */
/* GPUDirect RDMA, for jobs across machines: can the NICs reach GPU memory
 * (a peer-memory module or dma-buf), and how far is each GPU's nearest NIC?
 * NCCL uses GPUDirect RDMA by default only when the GPU and the NIC share a
 * PCIe switch (NCCL_NET_GDR_LEVEL defaults to PXB); farther apart, it stages
 * network traffic through host memory. */
#include <stdio.h>
#include <string.h>

#include "doctor/doctor.h"
#include "doctor/sysfs.h"
#include "topo/topo.h"

/* NCCL's own verdict, from the gdr attribute of its topology dump: 1 some
 * NIC said yes, 0 those that said anything said no, -1 none recorded.
 * `name` gets the NIC that decided. */
static int nccl_verdict(const struct p2pkit_topo *t, char *name, size_t len) {
  int no = -1;
  for (int n = 0; n < t->nnics; n++) {
    if (t->nics[n].gdr == 1) {
      p2pk_nic_label(t, n, name, len);
      return 1;
    }
    if (t->nics[n].gdr == 0 && no < 0) no = n;
  }
  if (no < 0) return -1;
  p2pk_nic_label(t, no, name, len);
  return 0;
}

static void why_no_dmabuf(const p2pk_gdr_facts *g, char *buf, size_t len) {
  if (g->open_module < 0)
    snprintf(buf, len, "the NVIDIA kernel module's flavour is unknown (no /proc/driver/nvidia/version)");
  else if (!g->open_module)
    snprintf(buf, len, "dma-buf needs NVIDIA's open kernel module, this is the proprietary one%s%s",
             g->nvidia_version[0] ? " " : "", g->nvidia_version);
  else
    snprintf(buf, len, "dma-buf needs Linux 5.12 or later, this is %d.%d", g->kernel_major,
             g->kernel_minor);
}

/* Whether a NIC can read and write GPU memory at all on this machine. */
static void check_support(const p2pk_doc_input *in, const struct p2pkit_topo *t, p2pk_findings *f) {
  char name[P2PK_NIC_NAME_LEN] = "";
  if (in->sysfs_missing) {
    int v = nccl_verdict(t, name, sizeof name);
    if (v < 0)
      p2pk_finding_add(f, P2PK_DOC_SKIP, "gdr", "system", NULL,
                       "whether a NIC can reach GPU memory (peer-memory module or dma-buf) is unknown: %s",
                       in->sysfs_missing);
    else
      p2pk_finding_add(f, v ? P2PK_DOC_OK : P2PK_DOC_WARN, "gdr", "system",
                       v ? NULL : "load nvidia-peermem (`sudo modprobe nvidia-peermem`) on that machine",
                       "NCCL recorded GPUDirect RDMA as %s (gdr=%d on %s)", v ? "working" : "not working",
                       v, name);
    return;
  }
  p2pk_gdr_facts g;
  p2pk_sysfs_gdr(in->sysfs_root, &g);
  char kernel[48] = "";
  if (g.kernel_major) snprintf(kernel, sizeof kernel, " on Linux %d.%d", g.kernel_major, g.kernel_minor);
  if (g.peermem[0]) {
    p2pk_finding_add(f, P2PK_DOC_OK, "gdr", "system", NULL,
                     "%s is loaded: the NICs' drivers can read and write GPU memory (GPUDirect RDMA)",
                     g.peermem);
  } else if (p2pk_gdr_dmabuf(&g)) {
    p2pk_finding_add(f, P2PK_DOC_OK, "gdr", "system", NULL,
                     "GPUDirect RDMA through dma-buf: NVIDIA's open kernel module %s%s (no peer-memory "
                     "module needed)",
                     g.nvidia_version, kernel);
  } else if (!g.modules_read) {
    p2pk_finding_add(f, P2PK_DOC_SKIP, "gdr", "system", NULL,
                     "could not read /proc/modules: whether nvidia-peermem is loaded is unknown");
  } else {
    char why[160];
    why_no_dmabuf(&g, why, sizeof why);
    p2pk_finding_add(f, P2PK_DOC_WARN, "gdr", "system",
                     "`sudo modprobe nvidia-peermem` (and list it in /etc/modules-load.d/ to keep it), "
                     "or use NVIDIA's open kernel modules on Linux 5.12+ for dma-buf",
                     "no GPUDirect RDMA: nvidia-peermem (or nv_peer_mem) is not loaded and %s; the NICs "
                     "cannot reach GPU memory, so traffic between machines is staged through host memory",
                     why);
  }
}

/* The NCCL_NET_GDR_LEVEL that admits a path of class l. */
static const char *gdr_level(p2pkit_link_t l) {
  return l == P2PKIT_LINK_SYS ? "SYS" : "PHB"; /* NCCL counts NODE as PHB */
}

static void check_path(const struct p2pkit_topo *t, int g, p2pk_findings *f) {
  char subj[24], name[P2PK_NIC_NAME_LEN], nic[96], action[320];
  snprintf(subj, sizeof subj, "GPU%d", g);
  p2pkit_link_t l;
  int n = p2pk_nearest_nic(t, g, &l);
  snprintf(nic, sizeof nic, "NIC%d (%s)", n, p2pk_nic_label(t, n, name, sizeof name));
  const char *code = p2pkit_link_name(l);
  switch (l) {
    case P2PKIT_LINK_PIX:
    case P2PKIT_LINK_PXB:
      p2pk_finding_add(f, P2PK_DOC_OK, "gdr", subj, NULL,
                       "nearest NIC %s is %s, %s: GPUDirect RDMA takes the direct path", nic, code,
                       l == P2PKIT_LINK_PIX ? "behind the GPU's PCIe switch" : "within its PCIe switches");
      return;
    case P2PKIT_LINK_PHB:
    case P2PKIT_LINK_NODE:
      snprintf(action, sizeof action,
               "put a NIC under the GPU's PCIe switch; or let NCCL use GPUDirect RDMA that far "
               "(NCCL_NET_GDR_LEVEL=%s) and measure",
               gdr_level(l));
      p2pk_finding_add(f, P2PK_DOC_WARN, "gdr", subj, action,
                       "nearest NIC %s is %s: RDMA to this GPU crosses %s; NCCL uses GPUDirect RDMA only "
                       "up to PXB by default and stages this GPU's network traffic through host memory",
                       nic, code,
                       l == P2PKIT_LINK_PHB ? "the CPU's PCIe host bridge"
                                            : "between PCIe host bridges of its CPU socket");
      return;
    case P2PKIT_LINK_SYS: {
      int gn = p2pk_pci_numa(t, t->gpus[g].pci), nn = p2pk_pci_numa(t, t->nics[n].pci);
      p2pk_finding_add(f, P2PK_DOC_WARN, "gdr", subj,
                       "give the GPU a NIC on its own CPU socket (or move the cards); across sockets "
                       "GPUDirect RDMA is slow or unsupported on most platforms",
                       "nearest NIC %s is SYS, on the other CPU socket (GPU on NUMA %d, NIC on %d): "
                       "network traffic of this GPU crosses the socket link and goes through host "
                       "memory",
                       nic, gn, nn);
      return;
    }
    default:
      p2pk_finding_add(f, P2PK_DOC_SKIP, "gdr", subj, NULL,
                       "the PCIe path from the GPU to the NICs is unknown (nearest %s)", nic);
  }
}

void p2pk_doc_check_gdr(const p2pk_doc_input *in, p2pk_findings *f) {
  const struct p2pkit_topo *t = in->topo;
  if (!t) {
    p2pk_finding_add(f, P2PK_DOC_SKIP, "gdr", "system", NULL,
                     "GPUDirect RDMA not checked: it needs the GPU topology (the driver)");
    return;
  }
  if (t->nnics == 0) {
    p2pk_finding_add(f, P2PK_DOC_SKIP, "gdr", "system", NULL,
                     "no RDMA NIC on this machine (as nvidia-smi lists NICs; plain network interfaces do "
                     "not count): GPUDirect RDMA for jobs across machines not checked");
    return;
  }
  check_support(in, t, f);
  for (int g = 0; g < t->ngpus; g++) check_path(t, g, f);
}
