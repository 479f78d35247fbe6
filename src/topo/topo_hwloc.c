/* SPDX-License-Identifier: BSD-3-Clause */
/* PCI tree, host bridges, NUMA nodes and CPU sets from hwloc, live or from an
 * hwloc XML export. hwloc shows every bridge; the model keeps NCCL's view: a
 * switch is an upstream port with its downstream ports, root ports fold into
 * their host bridge. */
#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "topo/topo.h"
#include "topo/xml.h"

typedef struct {
  hwloc_obj_t obj;
  int idx;
} objmap;

typedef struct {
  struct p2pkit_topo *t;
  hwloc_topology_t h;
  objmap map[P2PK_MAX_PCI];
  int nmap;
} walker;

static int mapped(walker *w, hwloc_obj_t o) {
  for (int i = 0; i < w->nmap; i++)
    if (w->map[i].obj == o) return w->map[i].idx;
  return -1;
}

static void remember(walker *w, hwloc_obj_t o, int idx) {
  if (w->nmap < P2PK_MAX_PCI) w->map[w->nmap++] = (objmap){o, idx};
}

static int is_host_bridge(hwloc_obj_t o) {
  return o && o->type == HWLOC_OBJ_BRIDGE && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST;
}

static int is_pci_bridge(hwloc_obj_t o) {
  return o && o->type == HWLOC_OBJ_BRIDGE && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI;
}

static void pci_busid(hwloc_obj_t o, char *out) {
  const struct hwloc_pcidev_attr_s *p =
      o->type == HWLOC_OBJ_BRIDGE ? &o->attr->bridge.upstream.pci : &o->attr->pcidev;
  snprintf(out, P2PK_BUSID_LEN, "%04x:%02x:%02x.%x", (unsigned)p->domain, (unsigned)p->bus,
           (unsigned)p->dev, (unsigned)p->func);
}

static int numa_of(walker *w, hwloc_obj_t o) {
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(w->h, o);
  if (!anc || !anc->nodeset) return -1;
  return hwloc_bitmap_first(anc->nodeset);
}

static int host_bridge_node(walker *w, hwloc_obj_t hb) {
  int idx = mapped(w, hb);
  if (idx >= 0) return idx;
  char id[P2PK_BUSID_LEN];
  snprintf(id, sizeof id, "%04x:%02x", (unsigned)hb->attr->bridge.downstream.pci.domain,
           (unsigned)hb->attr->bridge.downstream.pci.secondary_bus);
  idx = p2pk_topo_add_pci(w->t, P2PK_PCI_HOSTBRIDGE, id, -1);
  if (idx < 0) return -1;
  w->t->pci[idx].numa = numa_of(w, hb);
  remember(w, hb, idx);
  return idx;
}

/* Model parent for a device whose hwloc parent is `up`. */
static int chain_for(walker *w, hwloc_obj_t up) {
  hwloc_obj_t bridges[64];
  int nb = 0;
  hwloc_obj_t o = up;
  while (is_pci_bridge(o) && nb < 64) {
    bridges[nb++] = o;
    o = o->parent;
  }
  int parent = -1;
  if (is_host_bridge(o)) parent = host_bridge_node(w, o);
  /* bridges[nb-1] is topmost. A bridge right under a host bridge is a root
   * port: fold it into the host bridge. The rest pair up top-down as
   * (upstream port, downstream port) = one switch. */
  int top = nb - 1;
  if (top >= 0 && is_host_bridge(bridges[top]->parent)) top--;
  while (top >= 0) {
    hwloc_obj_t usp = bridges[top];
    int idx = mapped(w, usp);
    if (idx < 0) {
      char id[P2PK_BUSID_LEN];
      pci_busid(usp, id);
      idx = p2pk_topo_add_pci(w->t, P2PK_PCI_SWITCH, id, parent);
      if (idx < 0) return -2;
      remember(w, usp, idx);
    }
    if (top >= 1) remember(w, bridges[top - 1], idx); /* its downstream port */
    parent = idx;
    top -= 2;
  }
  return parent;
}

/* A display or 3D controller (class 0x03xx) from NVIDIA. */
static int is_nvidia_gpu(hwloc_obj_t o) {
  return o->attr->pcidev.vendor_id == 0x10de && (o->attr->pcidev.class_id >> 8) == 0x03;
}

static int is_rdma_osdev(hwloc_obj_t c) {
  return c->type == HWLOC_OBJ_OS_DEVICE && c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS;
}

/* A NIC device: one with an OpenFabrics (verbs) OS device, as nvidia-smi
 * lists them, or an InfiniBand controller (0x0207) whose driver hwloc did
 * not see. Plain network interfaces (eth0 on virtio-net) are not NICs. */
static int is_nic_device(hwloc_obj_t o) {
  for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling)
    if (is_rdma_osdev(c)) return 1;
  return o->attr->pcidev.class_id == 0x0207;
}

static void set_pci_ids(p2pk_pci_node *n, hwloc_obj_t o) {
  n->vendor = o->attr->pcidev.vendor_id;
  n->device = o->attr->pcidev.device_id;
  n->class_id = o->attr->pcidev.class_id;
}

static int nic_named(const struct p2pkit_topo *t, const char *name) {
  for (int n = 0; n < t->nnics; n++)
    if (strcmp(t->nics[n].name, name) == 0) return 1;
  return 0;
}

/* Each verbs device of a NIC's PCI device is a NIC, named as nvidia-smi
 * names it (mlx5_0); a device without one is a NIC without a name. */
static p2pkit_status_t add_nics(walker *w) {
  struct p2pkit_topo *t = w->t;
  for (hwloc_obj_t o = hwloc_get_next_pcidev(w->h, NULL); o; o = hwloc_get_next_pcidev(w->h, o)) {
    if (!is_nic_device(o)) continue;
    char id[P2PK_BUSID_LEN];
    pci_busid(o, id);
    int parent = chain_for(w, o->parent);
    if (parent < -1) return P2PKIT_ERR_UNSUPPORTED;
    int idx = p2pk_topo_add_pci(t, P2PK_PCI_OTHER, id, parent);
    if (idx < 0) return P2PKIT_ERR_UNSUPPORTED;
    set_pci_ids(&t->pci[idx], o);
    int named = 0;
    for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) {
      if (!is_rdma_osdev(c) || !c->name || !c->name[0] || nic_named(t, c->name)) continue;
      if (p2pk_topo_add_nic(t, c->name, idx) < 0) return P2PKIT_ERR_UNSUPPORTED;
      named++;
    }
    if (!named && p2pk_topo_add_nic(t, "", idx) < 0) return P2PKIT_ERR_UNSUPPORTED;
  }
  return P2PKIT_SUCCESS;
}

static void gpu_info_from_osdev(p2pk_gpu *g, hwloc_obj_t pcidev) {
  for (hwloc_obj_t c = pcidev->io_first_child; c; c = c->next_sibling) {
    if (c->type != HWLOC_OBJ_OS_DEVICE) continue;
    const char *model = hwloc_obj_get_info_by_name(c, "GPUModel");
    if (model && !g->name[0]) snprintf(g->name, sizeof g->name, "%s", model);
    const char *uuid = hwloc_obj_get_info_by_name(c, "NVIDIAUUID");
    if (uuid && !g->uuid[0]) snprintf(g->uuid, sizeof g->uuid, "%s", uuid);
    const char *mem = hwloc_obj_get_info_by_name(c, "CUDAGlobalMemorySize"); /* KiB */
    if (mem && !g->memory_bytes) g->memory_bytes = (uint64_t)strtoull(mem, NULL, 10) * 1024;
    const char *sms = hwloc_obj_get_info_by_name(c, "CUDAMultiProcessors");
    if (sms && !g->sm_count) g->sm_count = atoi(sms);
  }
}

p2pkit_status_t p2pk_topo_from_hwloc(struct p2pkit_topo *t, struct hwloc_topology *h) {
  walker *w = calloc(1, sizeof *w);
  if (!w) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory walking the hwloc topology");
  w->t = t;
  w->h = h;
  /* NUMA nodes and their CPUs. */
  int nn = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < nn; i++) {
    hwloc_obj_t o = hwloc_get_obj_by_type(h, HWLOC_OBJ_NUMANODE, (unsigned)i);
    char cpus[256] = "";
    if (o->cpuset) hwloc_bitmap_list_snprintf(cpus, sizeof cpus, o->cpuset);
    p2pk_topo_add_numa(t, (int)o->os_index, cpus);
  }
  int found_gpu_in_model = t->ngpus > 0;
  for (hwloc_obj_t o = hwloc_get_next_pcidev(h, NULL); o; o = hwloc_get_next_pcidev(h, o)) {
    if (!is_nvidia_gpu(o)) continue;
    char id[P2PK_BUSID_LEN];
    pci_busid(o, id);
    int g = p2pk_topo_find_gpu(t, id);
    if (g < 0) {
      /* A GPU the runtime does not show (hidden by CUDA_VISIBLE_DEVICES, or
       * an XML file): add it only when the model came without GPUs. */
      if (found_gpu_in_model) continue;
      g = p2pk_topo_add_gpu(t, id);
      if (g < 0) break;
      gpu_info_from_osdev(&t->gpus[g], o);
    }
    int parent = chain_for(w, o->parent);
    if (parent < -1) break;
    int idx = p2pk_topo_add_pci(t, P2PK_PCI_GPU, id, parent);
    if (idx < 0) break;
    set_pci_ids(&t->pci[idx], o);
    t->gpus[g].pci = idx;
  }
  if (add_nics(w) != P2PKIT_SUCCESS)
    P2PK_WARN("hwloc: %s; the NICs past it are left out", p2pkit_last_error());
  free(w);
  t->known |= P2PK_KNOW_PCI_TREE | P2PK_KNOW_HOSTBRIDGES | P2PK_KNOW_NUMA;
  for (int g = 0; g < t->ngpus; g++)
    if (t->gpus[g].pci < 0)
      P2PK_WARN("hwloc does not show GPU%d (%s) on the PCI bus; its path class is unknown", g,
                t->gpus[g].busid);
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t hwloc_open(hwloc_topology_t *h_p) {
  hwloc_topology_t h = NULL;
  if (hwloc_topology_init(&h) != 0) return p2pk_fail(P2PKIT_ERR_SYSTEM, "hwloc_topology_init failed");
  hwloc_topology_set_io_types_filter(h, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  *h_p = h;
  return P2PKIT_SUCCESS;
}

/* The XML format versions the linked hwloc reads: 1.x and 2.x for hwloc
 * 2, 2.x and 3.x for hwloc 3 (hwloc_get_api_version: 0x00020800 is 2.8+). */
static p2pkit_status_t check_xml_version(const char *name, int major, int minor) {
  int lib = (int)(hwloc_get_api_version() >> 16);
  int oldest = lib >= 3 ? 2 : 1;
  if (major >= oldest && major <= lib) return P2PKIT_SUCCESS;
  if (major > lib)
    return p2pk_fail(P2PKIT_ERR_UNSUPPORTED,
                     "%s: hwloc XML version %d.%d, written by hwloc %d; this p2pkit's hwloc (%s) reads "
                     "versions %d.x to %d.x: export it in the older format on that machine (lstopo --of "
                     "xml --export-xml-flags v%d FILE), or build p2pkit against hwloc %d",
                     name, major, minor, major, HWLOC_VERSION, oldest, lib, lib, major);
  return p2pk_fail(P2PKIT_ERR_UNSUPPORTED,
                   "%s: hwloc XML version %d.%d, written by hwloc %d; this p2pkit's hwloc (%s) reads "
                   "versions %d.x to %d.x: export it again with hwloc %d or newer",
                   name, major, minor, major, HWLOC_VERSION, oldest, lib, oldest);
}

p2pkit_status_t p2pk_topo_read_hwloc_xml(const char *name, const char *text, size_t len,
                                         struct p2pkit_topo **t_p) {
  int major = 0, minor = 0;
  P2PK_CHECK(p2pk_xml_check_hwloc(name, text, len, &major, &minor)); /* hwloc aborts on some bad files */
  P2PK_CHECK(check_xml_version(name, major, minor));
  hwloc_topology_t h = NULL;
  P2PK_CHECK(hwloc_open(&h));
  /* hwloc wants the terminating NUL counted in the length. */
  if (hwloc_topology_set_xmlbuffer(h, text, (int)len + 1) != 0 || hwloc_topology_load(h) != 0) {
    hwloc_topology_destroy(h);
    return p2pk_fail(P2PKIT_ERR_PARSE, "%s: hwloc could not load this XML (not an hwloc export?)", name);
  }
  struct p2pkit_topo *t = p2pk_topo_new("hwloc-xml", name);
  if (!t) {
    hwloc_topology_destroy(h);
    return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory");
  }
  p2pkit_status_t st = p2pk_topo_from_hwloc(t, h);
  hwloc_obj_t root = hwloc_get_root_obj(h);
  const char *host = hwloc_obj_get_info_by_name(root, "HostName");
  if (host) snprintf(t->hostname, sizeof t->hostname, "%s", host);
  hwloc_topology_destroy(h);
  if (st != P2PKIT_SUCCESS) {
    free(t);
    return st;
  }
  p2pk_topo_note(t, "hwloc XML records no NVLinks and no P2P status: pairs show their PCIe path only");
  p2pk_topo_note(t, "hwloc XML has no CUDA device order: GPUs are numbered in PCI bus order");
  *t_p = t;
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_topo_load_hwloc_live(struct p2pkit_topo *t) {
  hwloc_topology_t h = NULL;
  P2PK_CHECK(hwloc_open(&h));
  if (hwloc_topology_load(h) != 0) {
    hwloc_topology_destroy(h);
    return p2pk_fail(P2PKIT_ERR_SYSTEM, "hwloc could not read this machine's topology");
  }
  p2pkit_status_t st = p2pk_topo_from_hwloc(t, h);
  hwloc_topology_destroy(h);
  return st;
}

p2pkit_status_t p2pk_topo_export_hwloc_xml(const char *path) {
  hwloc_topology_t h = NULL;
  P2PK_CHECK(hwloc_open(&h));
  p2pkit_status_t st = P2PKIT_SUCCESS;
  if (hwloc_topology_load(h) != 0)
    st = p2pk_fail(P2PKIT_ERR_SYSTEM, "hwloc could not read this machine's topology");
  else if (hwloc_topology_export_xml(h, path, 0) != 0)
    st = p2pk_fail(P2PKIT_ERR_IO, "cannot write hwloc XML to %s", path);
  hwloc_topology_destroy(h);
  return st;
}
