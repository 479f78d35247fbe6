/* SPDX-License-Identifier: BSD-3-Clause */
/* NCCL's topology XML: NCCL_TOPO_DUMP_FILE output in, NCCL_TOPO_FILE out.
 *
 *   <system version="1">
 *     <cpu numaid="0" affinity="ffffffff" arch="x86_64" vendor="GenuineIntel" ...>
 *       <pci busid="0000:01:00.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">
 *         <pci busid="0000:03:00.0" class="0x030200" vendor="0x10de" device="0x2335" ...>
 *           <gpu dev="0" sm="90" rank="0" gdr="1">
 *             <nvlink target="fffffff:ff:ff.0" count="18" tclass="0x068000"/>
 *
 * NCCL keeps one <cpu> per NUMA node and folds the host bridges and root
 * ports into it, so a <cpu> becomes one host bridge node here: GPUs under one
 * CPU are PHB, never NODE. A nested <pci> is a whole PCIe switch (its
 * upstream port), as in our model. NCCL records each link's maximum PCIe
 * speed (the lower of the device's and its port's), no P2P status.
 *
 * Files written by hand for NCCL_TOPO_FILE (as cloud vendors ship them) say
 * less: GPUs as <pci class="0x0302.."> with no <gpu> child, NICs as
 * <pci class="0x02....">, switches with made-up bus ids, and partial files
 * with <pci busid=".."/> and no class at all (NCCL fills in what it
 * detects). The reader takes all of them: a GPU is a <pci> holding a <gpu>,
 * or of display/3D class from NVIDIA (or no vendor given); a NIC is an RDMA
 * <net> of a <nic>, or a network-class <pci> that names none. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "topo/topo.h"
#include "topo/xml.h"

#define NCCL_XML_VERSION 1
#define NCCL_NVSWITCH_TARGET "fffffff:ff:ff.0"
#define CLASS_BRIDGE 0x060400u
#define CLASS_3D 0x030200u
#define CLASS_NIC 0x020000u
#define CLASS_NVSWITCH 0x068000u
#define CLASS_IBMNPU 0x068001u /* NCCL's "CPU" NVLink peer */
#define MAX_CPUS 4096
#define MAX_LINKS_PER_PEER 64 /* NVLinks in one <nvlink>; the p2pkit reader takes the same */

/* --- shared helpers -------------------------------------------------------- */

static const char *const pcie_speed[] = {"",
                                         "2.5 GT/s PCIe",
                                         "5.0 GT/s PCIe",
                                         "8.0 GT/s PCIe",
                                         "16.0 GT/s PCIe",
                                         "32.0 GT/s PCIe",
                                         "64.0 GT/s PCIe"};

/* "32.0 GT/s PCIe" (or the kernel's older "32 GT/s") to a generation; 0 unknown. */
static int speed_to_gen(const char *s) {
  static const struct {
    double gts;
    int gen;
  } g[] = {{2.5, 1}, {5, 2}, {8, 3}, {16, 4}, {32, 5}, {64, 6}};
  char *end;
  double v = strtod(s, &end);
  if (end == s) return 0;
  for (size_t i = 0; i < sizeof g / sizeof g[0]; i++)
    if (v > g[i].gts - 0.01 && v < g[i].gts + 0.01) return g[i].gen;
  return 0;
}

/* --- reading --------------------------------------------------------------- */

typedef struct {
  int dev, line, pci; /* dev -1: a GPU known by its class only (no <gpu>) */
  const p2pk_xml_node *gpu;
  char busid[P2PK_BUSID_LEN];
} found_gpu;

typedef struct {
  int dev, line, order; /* NCCL's net dev (-1 none), the <net>'s line, document order */
  p2pk_nic nic;
} found_nic;

typedef struct {
  const char *file;
  struct p2pkit_topo *t;
  int nfound, nnics, classless;
  found_gpu found[P2PK_MAX_GPUS];
  found_nic nics[P2PK_MAX_NICS];
} nccl_reader;

__attribute__((format(printf, 3, 4))) static p2pkit_status_t nerr(const nccl_reader *r,
                                                                  const p2pk_xml_node *n, const char *fmt,
                                                                  ...) {
  char what[320];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return p2pk_fail(P2PKIT_ERR_PARSE, "%s:%d: %s", r->file, n->line, what);
}
#ifdef __clang_analyzer__ /* as p2pk_fail in core/check.h: a failure returns its status */
#define nerr(r, n, ...) ((void)nerr(r, n, __VA_ARGS__), P2PKIT_ERR_PARSE)
#endif

/* An integer attribute; absent or "" gives `def` (NCCL writes "" when sysfs
 * had nothing). */
static p2pkit_status_t attr_int(const nccl_reader *r, const p2pk_xml_node *n, const char *key, long lo,
                                long hi, long def, int *out) {
  const char *v = p2pk_xml_attr_get(n, key);
  if (!v || !*v) {
    *out = (int)def;
    return P2PKIT_SUCCESS;
  }
  char *end;
  errno = 0;
  long x = strtol(v, &end, 0);
  if (errno || *end || end == v || x < lo || x > hi)
    return nerr(r, n, "<%s %s=\"%.40s\">: expected an integer from %ld to %ld", n->name, key, v, lo, hi);
  *out = (int)x;
  return P2PKIT_SUCCESS;
}

/* A PCI class, 24 bits: "0x030200", or shorter and left-aligned as NCCL
 * matches them ("0x03" is any display controller). *known_p (when not NULL)
 * is 0 for an absent class, which is then no error. */
static p2pkit_status_t attr_class(const nccl_reader *r, const p2pk_xml_node *n, const char *key,
                                  unsigned *out, int *known_p) {
  const char *v = p2pk_xml_attr_get(n, key);
  *out = 0;
  if (known_p) *known_p = v != NULL;
  if (!v && known_p) return P2PKIT_SUCCESS;
  if (!v) return nerr(r, n, "<%s>: expected a %s attribute (a PCI class like 0x030200)", n->name, key);
  const char *h = (v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) ? v + 2 : v;
  size_t nd = strspn(h, "0123456789abcdefABCDEF");
  if (nd == 0 || nd > 6 || h[nd])
    return nerr(r, n, "<%s %s=\"%.40s\">: expected a PCI class like 0x030200", n->name, key, v);
  unsigned c = (unsigned)strtoul(h, NULL, 16);
  *out = c << (4 * (6 - nd));
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t attr_hex16(const nccl_reader *r, const p2pk_xml_node *n, const char *key,
                                  unsigned *out) {
  int v;
  P2PK_CHECK(attr_int(r, n, key, 0, 0xffff, 0, &v));
  *out = (unsigned)v;
  return P2PKIT_SUCCESS;
}

/* sysfs cpumap ("ffffffff,00000000": 32-bit groups, most significant first)
 * to a CPU list ("32-63"). */
static p2pkit_status_t affinity_to_list(const nccl_reader *r, const p2pk_xml_node *n, const char *mask,
                                        char *out, size_t len) {
  unsigned char bits[MAX_CPUS] = {0};
  size_t ngroups = 1;
  for (const char *p = mask; *p; p++) ngroups += *p == ',';
  if (ngroups > MAX_CPUS / 32) return nerr(r, n, "<cpu affinity>: more than %d CPUs", MAX_CPUS);
  const char *p = mask;
  for (size_t g = ngroups; g-- > 0;) {
    size_t nd = strspn(p, "0123456789abcdefABCDEF");
    if (nd == 0 || nd > 8 || (p[nd] != ',' && p[nd] != '\0'))
      return nerr(r, n, "<cpu affinity=\"%.40s\">: expected a hex CPU mask like ffffffff,00000000", mask);
    unsigned long w = strtoul(p, NULL, 16);
    for (int b = 0; b < 32; b++) bits[g * 32 + (size_t)b] = (w >> b) & 1;
    p += nd + (p[nd] == ',');
  }
  size_t o = 0;
  out[0] = '\0';
  for (int c = 0; c < MAX_CPUS; c++) {
    if (!bits[c]) continue;
    int e = c;
    while (e + 1 < MAX_CPUS && bits[e + 1]) e++;
    int w = e > c ? snprintf(out + o, len - o, "%s%d-%d", o ? "," : "", c, e)
                  : snprintf(out + o, len - o, "%s%d", o ? "," : "", c);
    if (w < 0 || (size_t)w >= len - o) return nerr(r, n, "<cpu affinity>: too many CPU ranges to list");
    o += (size_t)w;
    c = e;
  }
  return P2PKIT_SUCCESS;
}

static const p2pk_xml_node *child_named(const p2pk_xml_node *n, const char *name) {
  for (const p2pk_xml_node *c = n->first_child; c; c = c->next)
    if (strcmp(c->name, name) == 0) return c;
  return NULL;
}

/* The <gpu> a GPU <pci> holds (dev >= 0), or NULL. */
static p2pkit_status_t gpu_child(const nccl_reader *r, const p2pk_xml_node *pci, const p2pk_xml_node **gpu_p,
                                 int *dev_p) {
  *gpu_p = NULL;
  for (const p2pk_xml_node *c = pci->first_child; c; c = c->next) {
    if (strcmp(c->name, "gpu") != 0) continue;
    int dev;
    P2PK_CHECK(attr_int(r, c, "dev", -1, P2PK_MAX_GPUS - 1, -1, &dev));
    if (dev < 0) continue;
    *gpu_p = c;
    *dev_p = dev;
    return P2PKIT_SUCCESS;
  }
  return P2PKIT_SUCCESS;
}

/* A GPU at PCI node `pci`: from its <gpu> (dev >= 0), or its class (at). */
static p2pkit_status_t note_gpu(nccl_reader *r, const p2pk_xml_node *at, const p2pk_xml_node *gpu, int dev,
                                int pci) {
  for (int i = 0; dev >= 0 && i < r->nfound; i++)
    if (r->found[i].dev == dev)
      return nerr(r, at, "<gpu dev=\"%d\">: dev %d is also the GPU on line %d", dev, dev, r->found[i].line);
  if (r->nfound >= P2PK_MAX_GPUS) return nerr(r, at, "more than %d GPUs", P2PK_MAX_GPUS);
  found_gpu *f = &r->found[r->nfound++];
  *f = (found_gpu){dev, at->line, pci, gpu, ""};
  snprintf(f->busid, sizeof f->busid, "%s", r->t->pci[pci].busid);
  return P2PKIT_SUCCESS;
}

/* Display (0x0300) or 3D (0x0302) controller from NVIDIA; a hand-written
 * file may leave the vendor out, another vendor's (a BMC's VGA) is not one. */
static int is_gpu_class(unsigned cls, unsigned vendor) {
  return (cls >> 16) == 0x03 && (vendor == 0 || vendor == 0x10de);
}

/* As NCCL reads them: a <gpu> child makes a GPU whatever the class says, a
 * network class or a <nic> child a NIC, and every other class a PCI switch.
 * Without a class, a <pci> holding others is a switch, a leaf a device. */
static p2pk_pci_kind pci_kind(unsigned cls, int known, unsigned vendor, const p2pk_xml_node *gpu,
                              const p2pk_xml_node *n) {
  if (gpu || (known && is_gpu_class(cls, vendor))) return P2PK_PCI_GPU;
  if ((known && (cls >> 16) == 0x02) || child_named(n, "nic")) return P2PK_PCI_OTHER;
  if (known) return (cls >> 16) == 0x03 ? P2PK_PCI_OTHER : P2PK_PCI_SWITCH;
  return child_named(n, "pci") ? P2PK_PCI_SWITCH : P2PK_PCI_OTHER;
}

static p2pkit_status_t add_pci_node(nccl_reader *r, const p2pk_xml_node *n, int parent, int *idx_p,
                                    const p2pk_xml_node **gpu_p, int *dev_p) {
  const char *busid = p2pk_xml_attr_get(n, "busid");
  char canon[P2PK_BUSID_LEN];
  if (!busid || p2pk_busid_normalize(busid, canon) != 0)
    return nerr(r, n, "<pci>: expected a busid attribute like 0000:03:00.0, found \"%.40s\"",
                busid ? busid : "");
  if (p2pk_topo_find_pci(r->t, canon) >= 0) return nerr(r, n, "<pci busid=\"%s\"> appears twice", busid);
  unsigned cls, vendor, device;
  int known;
  P2PK_CHECK(attr_class(r, n, "class", &cls, &known));
  P2PK_CHECK(attr_hex16(r, n, "vendor", &vendor));
  P2PK_CHECK(attr_hex16(r, n, "device", &device));
  P2PK_CHECK(gpu_child(r, n, gpu_p, dev_p));
  r->classless += !known;
  int idx = p2pk_topo_add_pci(r->t, pci_kind(cls, known, vendor, *gpu_p, n), canon, parent);
  if (idx < 0) return nerr(r, n, "more than %d PCI devices", P2PK_MAX_PCI);
  p2pk_pci_node *p = &r->t->pci[idx];
  p->class_id = cls >> 8;
  p->vendor = vendor;
  p->device = device;
  const char *speed = p2pk_xml_attr_get(n, "link_speed");
  p->max_gen = speed ? speed_to_gen(speed) : 0;
  P2PK_CHECK(attr_int(r, n, "link_width", 0, 64, 0, &p->max_width));
  *idx_p = idx;
  return P2PKIT_SUCCESS;
}

/* NCCL's socket transport lists plain interfaces as <net port="0"> (RDMA
 * ports count from 1); GPUDirect RDMA cannot use them. */
static int is_socket_net(int port, int gdr) { return port == 0 && gdr != 1; }

static p2pkit_status_t add_nic(nccl_reader *r, const p2pk_xml_node *at, const char *name, int pci, int dev) {
  for (int i = 0; i < r->nnics; i++) {
    if (strcmp(r->nics[i].nic.name, name) != 0) continue;
    if (r->nics[i].nic.pci == pci) return P2PKIT_SUCCESS; /* another port of the same device */
    if (name[0]) return nerr(r, at, "<net name=\"%.40s\">: also the NIC on line %d", name, r->nics[i].line);
  }
  if (r->nnics >= P2PK_MAX_NICS) return nerr(r, at, "more than %d NICs", P2PK_MAX_NICS);
  if (strlen(name) >= P2PK_NIC_NAME_LEN)
    return nerr(r, at, "<net name=\"%.40s...\">: longer than %d characters", name, P2PK_NIC_NAME_LEN - 1);
  found_nic *f = &r->nics[r->nnics];
  memset(f, 0, sizeof *f);
  f->dev = dev;
  f->line = at->line;
  f->order = r->nnics++;
  snprintf(f->nic.name, sizeof f->nic.name, "%s", name);
  f->nic.pci = pci;
  f->nic.gdr = -1;
  return P2PKIT_SUCCESS;
}

/* The RDMA ports of the <nic> elements under `n`, at PCI node `pci`;
 * *nets_p counts every <net>, sockets included. */
static p2pkit_status_t read_nics(nccl_reader *r, const p2pk_xml_node *n, int pci, int *nets_p) {
  *nets_p = 0;
  for (const p2pk_xml_node *c = n->first_child; c; c = c->next) {
    if (strcmp(c->name, "nic") != 0) continue;
    for (const p2pk_xml_node *net = c->first_child; net; net = net->next) {
      if (strcmp(net->name, "net") != 0) continue;
      int port, gdr, speed, dev;
      P2PK_CHECK(attr_int(r, net, "port", 0, 1 << 16, -1, &port));
      P2PK_CHECK(attr_int(r, net, "gdr", 0, 1, -1, &gdr));
      P2PK_CHECK(attr_int(r, net, "speed", 0, 100000000, 0, &speed));
      P2PK_CHECK(attr_int(r, net, "dev", 0, 1 << 16, -1, &dev));
      (*nets_p)++;
      if (is_socket_net(port, gdr)) continue;
      const char *name = p2pk_xml_attr_get(net, "name");
      int before = r->nnics;
      P2PK_CHECK(add_nic(r, net, name ? name : "", pci, dev));
      if (r->nnics > before) {
        r->nics[before].nic.speed_mbps = speed;
        r->nics[before].nic.gdr = gdr;
      }
    }
  }
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t read_pci(nccl_reader *r, const p2pk_xml_node *n, int parent) {
  const p2pk_xml_node *gpu = NULL;
  int idx = -1, dev = -1;
  P2PK_CHECK(add_pci_node(r, n, parent, &idx, &gpu, &dev));
  const p2pk_pci_node *p = &r->t->pci[idx];
  if (p->kind == P2PK_PCI_GPU) P2PK_CHECK(note_gpu(r, gpu ? gpu : n, gpu, dev, idx));
  if (p->kind == P2PK_PCI_OTHER) {
    int nets;
    P2PK_CHECK(read_nics(r, n, idx, &nets));
    /* A network device the file names no port of: one NIC, called by its bus id. */
    if (!nets && (p->class_id >> 8) == 0x02) P2PK_CHECK(add_nic(r, n, "", idx, -1));
  }
  for (const p2pk_xml_node *c = n->first_child; c; c = c->next)
    if (strcmp(c->name, "pci") == 0) P2PK_CHECK(read_pci(r, c, idx));
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t read_cpu(nccl_reader *r, const p2pk_xml_node *n) {
  struct p2pkit_topo *t = r->t;
  int numa;
  if (!p2pk_xml_attr_get(n, "numaid")) return nerr(r, n, "<cpu>: expected a numaid attribute");
  P2PK_CHECK(attr_int(r, n, "numaid", -1, 1 << 20, -1, &numa));
  char id[P2PK_BUSID_LEN];
  snprintf(id, sizeof id, "numa%d", numa);
  for (int i = 0; i < t->npci; i++)
    if (t->pci[i].kind == P2PK_PCI_HOSTBRIDGE && t->pci[i].numa == numa)
      return nerr(r, n, "<cpu numaid=\"%d\"> appears twice (one machine per file)", numa);
  const char *mask = p2pk_xml_attr_get(n, "affinity");
  char cpus[256] = "";
  if (mask && *mask) P2PK_CHECK(affinity_to_list(r, n, mask, cpus, sizeof cpus));
  if (numa >= 0 && p2pk_topo_add_numa(t, numa, cpus) < 0)
    p2pk_topo_note(t, "more than %d NUMA nodes: the CPU lists of the rest are not kept", P2PK_MAX_NUMA);
  int hb = p2pk_topo_add_pci(t, P2PK_PCI_HOSTBRIDGE, id, -1);
  if (hb < 0) return nerr(r, n, "more than %d PCI devices", P2PK_MAX_PCI);
  t->pci[hb].numa = numa;
  for (const p2pk_xml_node *c = n->first_child; c; c = c->next)
    if (strcmp(c->name, "pci") == 0) P2PK_CHECK(read_pci(r, c, hb));
  /* NICs whose PCI place NCCL could not find hang from the CPU itself. */
  int nets;
  return read_nics(r, n, hb, &nets);
}

static p2pkit_status_t read_nvlink(nccl_reader *r, const p2pk_xml_node *n, p2pk_gpu *g) {
  if (g->ngroups >= P2PK_MAX_NVL_GROUPS)
    return nerr(r, n, "<nvlink>: more than %d NVLink peers for one GPU", P2PK_MAX_NVL_GROUPS);
  p2pk_nvl_group *l = &g->groups[g->ngroups];
  memset(l, 0, sizeof *l);
  unsigned cls;
  P2PK_CHECK(attr_class(r, n, "tclass", &cls, NULL));
  if (!p2pk_xml_attr_get(n, "count")) return nerr(r, n, "<nvlink>: expected a count attribute");
  P2PK_CHECK(attr_int(r, n, "count", 0, MAX_LINKS_PER_PEER, 0, &l->count));
  const char *target = p2pk_xml_attr_get(n, "target");
  if (!target) target = "";
  if ((cls >> 16) == 0x03) {
    l->peer = P2PK_NVL_GPU;
    if (p2pk_busid_normalize(target, l->peer_busid) != 0)
      return nerr(r, n, "<nvlink tclass=\"0x03...\">: expected a GPU bus id as target, found \"%.40s\"",
                  target);
  } else {
    /* NCCL's reading: the IBM NPU class is a CPU, any other class a switch. */
    l->peer = cls == CLASS_IBMNPU ? P2PK_NVL_CPU : P2PK_NVL_SWITCH;
    if (strlen(target) >= sizeof l->peer_busid)
      return nerr(r, n, "<nvlink target=\"%.40s\">: longer than %zu characters", target,
                  sizeof l->peer_busid - 1);
    snprintf(l->peer_busid, sizeof l->peer_busid, "%s", target);
  }
  g->ngroups++;
  g->nvlinks_active = (g->nvlinks_active < 0 ? 0 : g->nvlinks_active) + l->count;
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t add_gpu(nccl_reader *r, const found_gpu *f) {
  struct p2pkit_topo *t = r->t;
  const p2pk_xml_node *at = f->gpu;
  int g = p2pk_topo_add_gpu(t, t->pci[f->pci].busid);
  if (g < 0) return p2pk_fail(P2PKIT_ERR_PARSE, "%s:%d: more than %d GPUs", r->file, f->line, P2PK_MAX_GPUS);
  p2pk_gpu *gp = &t->gpus[g];
  gp->pci = f->pci;
  if (!at) return P2PKIT_SUCCESS; /* known by its class: nothing more to read */
  int sm;
  P2PK_CHECK(attr_int(r, at, "sm", 0, 999, 0, &sm));
  gp->cc_major = sm / 10;
  gp->cc_minor = sm % 10;
  for (const p2pk_xml_node *c = at->first_child; c; c = c->next)
    if (strcmp(c->name, "nvlink") == 0) P2PK_CHECK(read_nvlink(r, c, gp));
  if (gp->nvlinks_active < 0) gp->nvlinks_active = 0;
  return P2PKIT_SUCCESS;
}

/* GPUs with a dev first, in dev order; then those known by class, in bus order. */
static int by_dev(const void *a, const void *b) {
  const found_gpu *x = a, *y = b;
  if ((x->dev < 0) != (y->dev < 0)) return x->dev < 0 ? 1 : -1;
  if (x->dev >= 0) return x->dev - y->dev;
  return strcmp(x->busid, y->busid);
}

/* GPUs in `dev` order (CUDA's numbering when NCCL wrote the dump). */
static p2pkit_status_t add_gpus(nccl_reader *r) {
  qsort(r->found, (size_t)r->nfound, sizeof r->found[0], by_dev);
  int ndev = 0;
  for (int i = 0; i < r->nfound; i++) {
    P2PK_CHECK(add_gpu(r, &r->found[i]));
    ndev += r->found[i].dev >= 0;
  }
  if (ndev > 0 && r->found[ndev - 1].dev != ndev - 1)
    p2pk_topo_note(r->t, "the dump's GPU dev numbers have gaps: GPUs are renumbered 0-%d in dev order",
                   ndev - 1);
  if (ndev < r->nfound)
    p2pk_topo_note(r->t,
                   "%d GPU%s no <gpu> element (a hand-written NCCL_TOPO_FILE): numbered in PCI bus order "
                   "after those that have one; compute capability and NVLinks unknown",
                   r->nfound - ndev, r->nfound - ndev == 1 ? " has" : "s have");
  return P2PKIT_SUCCESS;
}

/* NICs in NCCL's net dev order (mlx5_0, mlx5_1, ... as nvidia-smi lists
 * them) when every one has a dev, else in document order. */
static int by_net_dev(const void *a, const void *b) {
  const found_nic *x = a, *y = b;
  return x->dev != y->dev ? (x->dev < y->dev ? -1 : 1) : x->order - y->order;
}

static void add_nics(nccl_reader *r) {
  int all_dev = 1;
  for (int i = 0; i < r->nnics; i++) all_dev &= r->nics[i].dev >= 0;
  if (all_dev) qsort(r->nics, (size_t)r->nnics, sizeof r->nics[0], by_net_dev);
  for (int i = 0; i < r->nnics; i++) r->t->nics[r->t->nnics++] = r->nics[i].nic;
}

static p2pkit_status_t read_system(nccl_reader *r, const p2pk_xml_node *root) {
  if (strcmp(root->name, "system") != 0)
    return nerr(r, root, "expected <system> as the root element, found <%s>", root->name);
  int version;
  if (!p2pk_xml_attr_get(root, "version")) return nerr(r, root, "<system>: expected version=\"1\"");
  P2PK_CHECK(attr_int(r, root, "version", 0, 1000, 0, &version));
  if (version != NCCL_XML_VERSION)
    return nerr(r, root, "<system version=\"%d\">: this p2pkit reads NCCL topology version %d", version,
                NCCL_XML_VERSION);
  for (const p2pk_xml_node *c = root->first_child; c; c = c->next)
    if (strcmp(c->name, "cpu") == 0) P2PK_CHECK(read_cpu(r, c));
  P2PK_CHECK(add_gpus(r));
  add_nics(r);
  struct p2pkit_topo *t = r->t;
  t->known = P2PK_KNOW_PCI_TREE | P2PK_KNOW_NUMA | P2PK_KNOW_PCIE_LINK;
  int with_gpu = 0;
  for (int i = 0; i < r->nfound; i++) with_gpu += r->found[i].gpu != NULL;
  if (with_gpu == r->nfound) t->known |= P2PK_KNOW_NVLINK;
  p2pk_topo_note(t,
                 "NCCL topology dumps do not separate PCIe host bridges: GPUs under one CPU show as "
                 "PHB, never NODE");
  p2pk_topo_note(t, "NCCL topology dumps record no P2P status");
  p2pk_topo_note(t,
                 "NCCL topology dumps record no GPU names, memory or NVLink speeds, and the maximum "
                 "PCIe speed of each link rather than the current one");
  if (r->classless)
    p2pk_topo_note(t,
                   "%d <pci> element%s no class (NCCL fills it in from the machine): one holding others "
                   "is taken for a switch, a leaf for a device",
                   r->classless, r->classless == 1 ? " has" : "s have");
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_topo_read_nccl(const char *name, const char *text, size_t len,
                                    struct p2pkit_topo **t_p) {
  if (!t_p || (!text && len)) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "text or output is NULL");
  nccl_reader *r = calloc(1, sizeof *r);
  struct p2pkit_topo *t = p2pk_topo_new("nccl-xml", name);
  p2pk_xml_node *root = NULL;
  p2pkit_status_t st = P2PKIT_SUCCESS;
  if (!r || !t) {
    st = p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory reading %s", name ? name : "NCCL XML");
    goto out;
  }
  r->file = name ? name : "(NCCL XML)";
  r->t = t;
  P2PK_CHECK_GOTO(p2pk_xml_parse(r->file, text ? text : "", len, &root), st, out);
  P2PK_CHECK_GOTO(read_system(r, root), st, out);
  P2PK_CHECK_GOTO(p2pk_topo_validate(t), st, out);
  *t_p = t;
  t = NULL;
out:
  p2pk_xml_free(root);
  free(r);
  p2pkit_topo_destroy(t);
  return st;
}

/* --- writing --------------------------------------------------------------- */

/* What NCCL needs to place GPUs, NICs and links. Left out on purpose, so that NCCL
 * fills them in from the machine it runs on (ncclTopoGetXmlFromCpu/-Gpu):
 * <cpu arch vendor familyid modelid>, which the model does not record, and
 * <gpu gdr>, which only NCCL can probe. Unknown link speeds and widths are
 * left out for the same reason. */
typedef struct {
  const struct p2pkit_topo *t;
  FILE *out;
  unsigned char holds[P2PK_MAX_PCI];
} nccl_writer;

static void put_attr(FILE *out, const char *key, const char *v) {
  fprintf(out, " %s=\"", key);
  for (; *v; v++) {
    if (*v == '&')
      fputs("&amp;", out);
    else if (*v == '<')
      fputs("&lt;", out);
    else if (*v == '>')
      fputs("&gt;", out);
    else if (*v == '"')
      fputs("&quot;", out);
    else
      fputc(*v, out);
  }
  fputc('"', out);
}

/* "0-31,64-95" to sysfs cpumap groups ("ffffffff,00000000,ffffffff");
 * "" when the list is empty or not a CPU list. */
static void list_to_affinity(const char *list, char *out, size_t len) {
  unsigned char bits[MAX_CPUS] = {0};
  long max = -1;
  out[0] = '\0';
  for (const char *p = list; *p;) {
    char *end;
    long a = strtol(p, &end, 10), b;
    if (end == p || a < 0 || a >= MAX_CPUS) return;
    b = a;
    if (*end == '-') {
      p = end + 1;
      b = strtol(p, &end, 10);
      if (end == p || b < a || b >= MAX_CPUS) return;
    }
    for (long c = a; c <= b; c++) bits[c] = 1;
    if (b > max) max = b;
    p = end;
    if (*p == ',')
      p++;
    else if (*p)
      return;
  }
  size_t o = 0;
  for (long g = max / 32; g >= 0 && max >= 0; g--) {
    unsigned w = 0;
    for (int b = 0; b < 32; b++) w |= (unsigned)bits[g * 32 + b] << b;
    int n = snprintf(out + o, len - o, "%s%08x", o ? "," : "", w);
    if (n < 0 || (size_t)n >= len - o) {
      out[0] = '\0';
      return;
    }
    o += (size_t)n;
  }
}

static int gpu_at(const struct p2pkit_topo *t, int pci) {
  for (int g = 0; g < t->ngpus; g++)
    if (t->gpus[g].pci == pci) return g;
  return -1;
}

static void put_link(FILE *out, const p2pk_pci_node *n) {
  int gen = n->max_gen ? n->max_gen : n->link_gen;
  int width = n->max_width ? n->max_width : n->link_width;
  if (gen >= 1 && gen <= 6) put_attr(out, "link_speed", pcie_speed[gen]);
  if (width > 0) fprintf(out, " link_width=\"%d\"", width);
}

/* Links NCCL can place: a GPU peer needs its bus id. */
static int nvlink_writable(const p2pk_nvl_group *l) {
  char canon[P2PK_BUSID_LEN];
  if (l->count <= 0 || l->peer == P2PK_NVL_UNKNOWN) return 0;
  return l->peer != P2PK_NVL_GPU || p2pk_busid_normalize(l->peer_busid, canon) == 0;
}

static void write_nvlink(FILE *out, const p2pk_nvl_group *l, int indent) {
  char canon[P2PK_BUSID_LEN];
  if (!nvlink_writable(l)) return;
  fprintf(out, "%*s<nvlink", indent, "");
  if (l->peer == P2PK_NVL_GPU && p2pk_busid_normalize(l->peer_busid, canon) == 0)
    put_attr(out, "target", canon);
  else if (l->peer == P2PK_NVL_SWITCH)
    put_attr(out, "target", NCCL_NVSWITCH_TARGET);
  else if (l->peer_busid[0])
    put_attr(out, "target", l->peer_busid);
  unsigned cls = l->peer == P2PK_NVL_GPU      ? CLASS_3D
                 : l->peer == P2PK_NVL_SWITCH ? CLASS_NVSWITCH
                                              : CLASS_IBMNPU;
  fprintf(out, " count=\"%d\" tclass=\"0x%06x\"/>\n", l->count, cls);
}

static void write_gpu(const nccl_writer *w, int g, int indent) {
  const p2pk_gpu *gp = &w->t->gpus[g];
  int links = 0;
  for (int i = 0; i < gp->ngroups; i++) links += nvlink_writable(&gp->groups[i]);
  fprintf(w->out, "%*s<gpu dev=\"%d\"", indent, "", g);
  if (gp->cc_major > 0) fprintf(w->out, " sm=\"%d\"", gp->cc_major * 10 + gp->cc_minor);
  fprintf(w->out, " rank=\"%d\"%s\n", g, links ? ">" : "/>");
  if (!links) return;
  for (int i = 0; i < gp->ngroups; i++) write_nvlink(w->out, &gp->groups[i], indent + 2);
  fprintf(w->out, "%*s</gpu>\n", indent, "");
}

static int nic_at(const struct p2pkit_topo *t, int pci) {
  for (int n = 0; n < t->nnics; n++)
    if (t->nics[n].pci == pci) return n;
  return -1;
}

/* The named NICs at PCI node `pci` as one <nic> (NCCL matches nets by name;
 * an unnamed NIC is left to its <pci>). Returns whether it wrote one. */
static int write_nets(const nccl_writer *w, int pci, int indent) {
  const struct p2pkit_topo *t = w->t;
  int any = 0;
  for (int n = 0; n < t->nnics; n++) {
    const p2pk_nic *x = &t->nics[n];
    if (x->pci != pci || !x->name[0]) continue;
    if (!any++) fprintf(w->out, "%*s<nic>\n", indent, "");
    fprintf(w->out, "%*s<net", indent + 2, "");
    put_attr(w->out, "name", x->name);
    fprintf(w->out, " dev=\"%d\"", n);
    if (x->speed_mbps > 0) fprintf(w->out, " speed=\"%d\"", x->speed_mbps);
    if (x->gdr >= 0) fprintf(w->out, " gdr=\"%d\"", x->gdr);
    fputs("/>\n", w->out);
  }
  if (any) fprintf(w->out, "%*s</nic>\n", indent, "");
  return any > 0;
}

static int has_named_nic(const struct p2pkit_topo *t, int pci) {
  for (int n = 0; n < t->nnics; n++)
    if (t->nics[n].pci == pci && t->nics[n].name[0]) return 1;
  return 0;
}

static int holds_children(const nccl_writer *w, int pci) {
  for (int c = 0; c < w->t->npci; c++)
    if (w->t->pci[c].parent == pci && w->holds[c]) return 1;
  return 0;
}

/* Nodes written as <pci>: switches, GPUs and the devices of NICs. */
static int written_as_pci(const struct p2pkit_topo *t, int i) {
  p2pk_pci_kind k = t->pci[i].kind;
  return k == P2PK_PCI_SWITCH || k == P2PK_PCI_GPU || (k == P2PK_PCI_OTHER && nic_at(t, i) >= 0);
}

static void write_pci(const nccl_writer *w, int i, int indent);

static void write_children(const nccl_writer *w, int parent, int indent) {
  for (int c = 0; c < w->t->npci; c++)
    if (w->t->pci[c].parent == parent) write_pci(w, c, indent);
}

static void write_pci(const nccl_writer *w, int i, int indent) {
  const p2pk_pci_node *n = &w->t->pci[i];
  if (!w->holds[i]) return;
  /* NCCL would read any other node as a switch: leave it out, keep what hangs below. */
  if (!written_as_pci(w->t, i)) {
    write_children(w, i, indent);
    return;
  }
  int g = n->kind == P2PK_PCI_GPU ? gpu_at(w->t, i) : -1;
  int nic = n->kind == P2PK_PCI_OTHER;
  unsigned cls = nic      ? ((n->class_id >> 8) == 0x02 ? n->class_id << 8 : CLASS_NIC)
                 : g < 0 ? CLASS_BRIDGE
                 : (n->class_id >> 8) == 0x03 ? n->class_id << 8
                                              : CLASS_3D;
  unsigned vendor = g >= 0 && !n->vendor ? 0x10de : n->vendor;
  char canon[P2PK_BUSID_LEN];
  fprintf(w->out, "%*s<pci", indent, "");
  put_attr(w->out, "busid", p2pk_busid_normalize(n->busid, canon) == 0 ? canon : n->busid);
  fprintf(w->out, " class=\"0x%06x\"", cls);
  if (vendor) fprintf(w->out, " vendor=\"0x%04x\"", vendor);
  if (n->device) fprintf(w->out, " device=\"0x%04x\"", n->device);
  put_link(w->out, n);
  if (nic && !has_named_nic(w->t, i) && !holds_children(w, i)) {
    fputs("/>\n", w->out);
    return;
  }
  fputs(">\n", w->out);
  if (g >= 0) write_gpu(w, g, indent + 2);
  if (nic) write_nets(w, i, indent + 2);
  write_children(w, i, indent + 2);
  fprintf(w->out, "%*s</pci>\n", indent, "");
}

static void write_cpu(const nccl_writer *w, int numa) {
  const struct p2pkit_topo *t = w->t;
  char mask[MAX_CPUS / 32 * 9 + 1] = "";
  fprintf(w->out, "  <cpu numaid=\"%d\"", numa);
  for (int i = 0; i < t->nnuma; i++)
    if (t->numa[i].os_index == numa) list_to_affinity(t->numa[i].cpus, mask, sizeof mask);
  if (mask[0]) put_attr(w->out, "affinity", mask);
  fputs(">\n", w->out);
  for (int r = 0; r < t->npci; r++) {
    if (t->pci[r].parent != -1 || t->pci[r].numa != numa) continue;
    if (t->pci[r].kind == P2PK_PCI_HOSTBRIDGE)
      write_children(w, r, 4);
    else
      write_pci(w, r, 4);
  }
  /* NICs known only by their CPU. */
  for (int r = 0; r < t->npci; r++)
    if (t->pci[r].parent == -1 && t->pci[r].numa == numa && t->pci[r].kind == P2PK_PCI_HOSTBRIDGE)
      write_nets(w, r, 4);
  fputs("  </cpu>\n", w->out);
}

/* NCCL finds devices by bus id: every <pci> written needs a distinct one. */
static p2pkit_status_t check_busids(const nccl_writer *w) {
  const struct p2pkit_topo *t = w->t;
  char a[P2PK_BUSID_LEN], b[P2PK_BUSID_LEN];
  for (int i = 0; i < t->npci; i++) {
    const p2pk_pci_node *n = &t->pci[i];
    if (!w->holds[i] || !written_as_pci(t, i)) continue;
    if (p2pk_busid_normalize(n->busid, a) != 0)
      return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "cannot write NCCL XML: PCI node '%s' has no bus id",
                       n->busid);
    for (int j = 0; j < i; j++)
      if (w->holds[j] && written_as_pci(t, j) &&
          p2pk_busid_normalize(t->pci[j].busid, b) == 0 && strcmp(a, b) == 0)
        return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "cannot write NCCL XML: bus id %s appears twice", a);
  }
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_topo_write_nccl(const struct p2pkit_topo *t, FILE *out) {
  if (!t || !out) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "topology or file is NULL");
  if (t->ngpus < 0 || t->ngpus > P2PK_MAX_GPUS || t->npci < 0 || t->npci > P2PK_MAX_PCI || t->nnuma < 0 ||
      t->nnuma > P2PK_MAX_NUMA || t->nnics < 0 || t->nnics > P2PK_MAX_NICS)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "cannot write NCCL XML: a count is out of range");
  P2PK_CHECK(p2pk_topo_validate(t));
  nccl_writer *w = calloc(1, sizeof *w);
  if (!w) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory writing NCCL XML");
  w->t = t;
  w->out = out;
  /* Only the paths to GPUs and NICs: NCCL trims the rest, and GPUs with no
   * known PCI place are left for NCCL to find itself. */
  for (int g = 0; g < t->ngpus; g++)
    for (int p = t->gpus[g].pci; p >= 0; p = t->pci[p].parent) w->holds[p] = 1;
  for (int n = 0; n < t->nnics; n++)
    for (int p = t->nics[n].pci; p >= 0; p = t->pci[p].parent) w->holds[p] = 1;
  p2pkit_status_t st = check_busids(w);
  if (st != P2PKIT_SUCCESS) {
    free(w);
    return st;
  }
  fprintf(out, "<system version=\"%d\">\n", NCCL_XML_VERSION);
  /* One <cpu> per NUMA node holding GPUs or NICs, in ascending order. */
  for (int last = -2;;) {
    int next = -2;
    for (int r = 0; r < t->npci; r++)
      if (t->pci[r].parent == -1 && w->holds[r] && t->pci[r].numa > last &&
          (next == -2 || t->pci[r].numa < next))
        next = t->pci[r].numa;
    if (next == -2) break;
    write_cpu(w, next);
    last = next;
  }
  fputs("</system>\n", out);
  free(w);
  return P2PKIT_SUCCESS;
}
