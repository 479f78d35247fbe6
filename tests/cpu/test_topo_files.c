/* SPDX-License-Identifier: BSD-3-Clause */
/* Topology files: every recorded machine in tests/data classified pair by
 * pair; the p2pkit format round-trips every field byte for byte; NCCL XML
 * round-trips the classes it can carry; malformed files fail with the file,
 * the line and what was expected. */
#include <unistd.h>

#include "core/param.h"
#include "test.h"
#include "topo/topo.h"
#include "topo/xml.h"

/* --- helpers ---------------------------------------------------------------- */

typedef p2pkit_status_t (*writer_fn)(const struct p2pkit_topo *, FILE *);

/* What `fn` writes, NUL terminated; NULL when it fails. */
static char *write_mem(writer_fn fn, const struct p2pkit_topo *t, size_t *len) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  if (!f) return NULL;
  p2pkit_status_t st = fn(t, f);
  fclose(f);
  if (st != P2PKIT_SUCCESS) {
    T_FAIL("writer failed: %s", p2pkit_last_error());
    free(buf);
    return NULL;
  }
  if (len) *len = n;
  return buf;
}

static struct p2pkit_topo *load(const char *file) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", P2PK_TEST_DATA, file);
  p2pkit_topo_t t = NULL;
  p2pkit_status_t st = p2pkit_topo_load(path, &t);
  if (st != P2PKIT_SUCCESS) T_FAIL("loading %s: %s", file, p2pkit_last_error());
  return t;
}

static const char *label(p2pkit_topo_t t, int a, int b) {
  static p2pkit_pair_t p;
  CHECK_OK(p2pkit_topo_pair(t, a, b, &p));
  return p.label;
}

static p2pkit_link_t pcie(p2pkit_topo_t t, int a, int b) {
  p2pkit_pair_t p;
  CHECK_OK(p2pkit_topo_pair(t, a, b, &p));
  return p.pcie;
}

/* `want` is the label matrix, row by row, separated by spaces. */
static void check_labels(const char *file, p2pkit_topo_t t, int n, const char *want) {
  char copy[1024], *save = NULL;
  snprintf(copy, sizeof copy, "%s", want);
  CHECK_EQ(p2pkit_topo_gpu_count(t), n);
  char *tok = strtok_r(copy, " ", &save);
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++, tok = strtok_r(NULL, " ", &save)) {
      if (!tok) {
        T_FAIL("%s: expected matrix too short", file);
        return;
      }
      const char *got = label(t, a, b);
      if (strcmp(got, tok) != 0) T_FAIL("%s GPU%d-GPU%d: got %s, want %s", file, a, b, got, tok);
    }
}

static const struct {
  const char *file;
  int ngpus;
  const char *labels;
} fixtures[] = {
    {"pix.p2pkit", 2, "X PIX  PIX X"},
    {"pxb.p2pkit", 4, "X PIX PXB PXB  PIX X PXB PXB  PXB PXB X PIX  PXB PXB PIX X"},
    {"phb.p2pkit", 3, "X PHB PHB  PHB X PHB  PHB PHB X"},
    {"node.p2pkit", 4, "X PHB NODE NODE  PHB X NODE NODE  NODE NODE X PHB  NODE NODE PHB X"},
    {"sys.p2pkit", 2, "X SYS  SYS X"},
    {"nvlink_direct.p2pkit", 4, "X NV8 NV4 NODE  NV8 X NODE NV4  NV4 NODE X NV8  NODE NV4 NV8 X"},
    {"nvswitch8.p2pkit", 8,
     "X NV18 NV18 NV18 NV18 NV18 NV18 NV18  NV18 X NV18 NV18 NV18 NV18 NV18 NV18 "
     "NV18 NV18 X NV18 NV18 NV18 NV18 NV18  NV18 NV18 NV18 X NV18 NV18 NV18 NV18 "
     "NV18 NV18 NV18 NV18 X NV18 NV18 NV18  NV18 NV18 NV18 NV18 NV18 X NV18 NV18 "
     "NV18 NV18 NV18 NV18 NV18 NV18 X NV18  NV18 NV18 NV18 NV18 NV18 NV18 NV18 X"},
    {"h200x2.nccl.xml", 2, "X NV18  NV18 X"},
    {"hwloc_3gpu.xml", 3, "X PIX NODE  PIX X NODE  NODE NODE X"},
    {"nics.p2pkit", 4, "X PXB NODE SYS  PXB X NODE SYS  NODE NODE X SYS  SYS SYS SYS X"},
    {"vendor8.nccl.xml", 8,
     "X PIX PHB PHB SYS SYS SYS SYS  PIX X PHB PHB SYS SYS SYS SYS  PHB PHB X PIX SYS SYS SYS SYS "
     "PHB PHB PIX X SYS SYS SYS SYS  SYS SYS SYS SYS X PIX PHB PHB  SYS SYS SYS SYS PIX X PHB PHB "
     "SYS SYS SYS SYS PHB PHB X PIX  SYS SYS SYS SYS PHB PHB PIX X"},
};
#define NFIXTURES (int)(sizeof fixtures / sizeof fixtures[0])

/* --- recorded machines ------------------------------------------------------ */

TEST(every_fixture_classifies_every_pair) {
  for (int i = 0; i < NFIXTURES; i++) {
    p2pkit_topo_t t = load(fixtures[i].file);
    if (!t) continue;
    check_labels(fixtures[i].file, t, fixtures[i].ngpus, fixtures[i].labels);
    p2pkit_topo_destroy(t);
  }
}

TEST(nvswitch_pcie_classes_underneath) {
  p2pkit_topo_t t = load("nvswitch8.p2pkit");
  if (!t) return;
  /* Two GPUs per PCIe switch, two switches per socket, two sockets. */
  for (int a = 0; a < 8; a++)
    for (int b = 0; b < 8; b++) {
      p2pkit_link_t want = a == b           ? P2PKIT_LINK_SELF
                           : a / 2 == b / 2 ? P2PKIT_LINK_PIX
                           : a / 4 == b / 4 ? P2PKIT_LINK_NODE
                                            : P2PKIT_LINK_SYS;
      if (pcie(t, a, b) != want) T_FAIL("GPU%d-GPU%d pcie %d, want %d", a, b, pcie(t, a, b), want);
    }
  p2pkit_pair_t p;
  CHECK_OK(p2pkit_topo_pair(t, 0, 7, &p));
  CHECK_EQ(p.nvlinks, 18);
  CHECK_EQ(p.p2p, 1);
  CHECK_NEAR(p.line_gbps, 18 * 26.5625, 1e-9);
  p2pkit_topo_destroy(t);
}

TEST(fixture_fields_reach_the_public_api) {
  p2pkit_topo_t t = load("nvswitch8.p2pkit");
  if (!t) return;
  p2pkit_gpu_t g;
  CHECK_OK(p2pkit_topo_gpu(t, 4, &g));
  CHECK_STR(g.name, "NVIDIA H100 80GB HBM3");
  CHECK_STR(g.busid, "0000:9a:00.0");
  CHECK_EQ(g.memory_bytes, 85520809984ull);
  CHECK_EQ(g.sm_count, 132);
  CHECK_EQ(g.cc_major, 9);
  CHECK_EQ(g.cc_minor, 0);
  CHECK_EQ(g.numa, 1);
  CHECK_STR(g.cpus, "56-111,168-223");
  CHECK_EQ(g.pcie_gen, 5);
  CHECK_EQ(g.pcie_width, 16);
  CHECK_EQ(g.nvlinks_active, 18);
  CHECK_NEAR(g.nvlink_gbps, 26.5625, 0);
  CHECK_STR(t->format, "p2pkit");
  CHECK(strstr(t->source, "nvswitch8.p2pkit") != NULL);
  CHECK_STR(t->hostname, "dgx-h100");
  CHECK_STR(t->driver, "550.54.15");
  CHECK_EQ(t->cuda_driver, 12040);
  CHECK_EQ(t->known, P2PK_KNOW_CUDA | P2PK_KNOW_PCI_TREE | P2PK_KNOW_HOSTBRIDGES | P2PK_KNOW_NUMA |
                         P2PK_KNOW_NVLINK | P2PK_KNOW_P2P | P2PK_KNOW_PCIE_LINK);
  p2pkit_topo_destroy(t);
}

TEST(p2p_not_ok_pair) {
  p2pkit_topo_t t = load("sys.p2pkit");
  if (!t) return;
  p2pkit_pair_t p;
  CHECK_OK(p2pkit_topo_pair(t, 0, 1, &p));
  CHECK_STR(p.label, "SYS");
  CHECK_EQ(p.p2p, 0);
  CHECK_EQ(p.cuda_access, 0);
  CHECK_EQ(p.caps[P2PKIT_P2P_READ], P2PKIT_P2P_CNS);
  CHECK_EQ(p.caps[P2PKIT_P2P_WRITE], P2PKIT_P2P_CNS);
  CHECK_EQ(p.caps[P2PKIT_P2P_NVLINK], P2PKIT_P2P_NS);
  CHECK_EQ(t->nnotes, 1);
  CHECK_STR(t->notes[0], "recorded by hand for the p2pkit tests");
  p2pkit_topo_destroy(t);
  t = load("nvlink_direct.p2pkit");
  if (!t) return;
  CHECK_OK(p2pkit_topo_pair(t, 0, 3, &p));
  CHECK_STR(p.label, "NODE");
  CHECK_EQ(p.p2p, 1);
  CHECK_EQ(p.cuda_perf_rank, 1);
  CHECK_OK(p2pkit_topo_pair(t, 0, 2, &p));
  CHECK_EQ(p.nvlinks, 4);
  CHECK_NEAR(p.line_gbps, 100, 1e-9);
  p2pkit_topo_destroy(t);
}

/* --- the p2pkit format round trip ------------------------------------------- */

/* A model with every field away from its default, and awkward strings. */
static struct p2pkit_topo *every_field(void) {
  struct p2pkit_topo *t = p2pk_topo_new("live", "box");
  snprintf(t->hostname, sizeof t->hostname, "host with \"quotes\" # and \\ and\ttab");
  snprintf(t->driver, sizeof t->driver, "580.159.04");
  snprintf(t->nvml_version, sizeof t->nvml_version, "12.580.159.04");
  t->cuda_driver = 13000;
  t->cuda_runtime = 12090;
  t->known = P2PK_KNOW_CUDA | P2PK_KNOW_PCI_TREE | P2PK_KNOW_NUMA | P2PK_KNOW_NVLINK | P2PK_KNOW_P2P;
  p2pk_topo_note(t, "first note\nwith a newline and \x01 control byte");
  p2pk_topo_note(t, "caf\xc3\xa9 = non-ASCII");
  p2pk_topo_add_numa(t, 0, "0-31,64-95");
  p2pk_topo_add_numa(t, 3, "");
  int hb = p2pk_topo_add_pci(t, P2PK_PCI_HOSTBRIDGE, "0000:00", -1);
  t->pci[hb].numa = 3;
  int sw = p2pk_topo_add_pci(t, P2PK_PCI_SWITCH, "0000:01:00.0", hb);
  int nic = p2pk_topo_add_pci(t, P2PK_PCI_OTHER, "0000:02:00.1", sw);
  t->pci[nic].class_id = 0x0200;
  int n0 = p2pk_topo_add_nic(t, "mlx5_0 \"port\" #1", nic);
  t->nics[n0].speed_mbps = 400000;
  t->nics[n0].gdr = 0;
  p2pk_topo_add_nic(t, "", hb); /* known only by its CPU, unnamed */
  for (int g = 0; g < 2; g++) {
    char id[20];
    snprintf(id, sizeof id, "0000:%02x:00.0", 0x10 + g);
    int p = p2pk_topo_add_pci(t, P2PK_PCI_GPU, id, sw);
    p2pk_pci_node *n = &t->pci[p];
    n->link_gen = 4;
    n->link_width = 8;
    n->max_gen = 5;
    n->max_width = 16;
    n->vendor = 0x10de;
    n->device = 0x2335;
    n->class_id = 0x0302;
    int i = p2pk_topo_add_gpu(t, id);
    p2pk_gpu *gp = &t->gpus[i];
    snprintf(gp->name, sizeof gp->name, "NVIDIA H200 \"SXM\"");
    snprintf(gp->uuid, sizeof gp->uuid, "GPU-12345678-abcd-ef01-2345-6789abcdef0%d", g);
    gp->memory_bytes = g ? UINT64_MAX : 150754820096ull;
    gp->sm_count = 132;
    gp->cc_major = 9;
    gp->cc_minor = 0;
    gp->pci = p;
    gp->nvlinks_present = 18;
    gp->nvlinks_active = 17;
    gp->nvlink_gbps = g ? 0.1 + 0.2 : 26.5625; /* 0.30000000000000004 needs 17 digits */
    gp->ngroups = 3;
    gp->groups[0] = (p2pk_nvl_group){P2PK_NVL_SWITCH, "fffffff:ff:ff.0", 16, 4};
    gp->groups[1] = (p2pk_nvl_group){P2PK_NVL_GPU, "0000:11:00.0", 1, 4};
    gp->groups[2] = (p2pk_nvl_group){P2PK_NVL_UNKNOWN, "", 0, 0};
  }
  t->gpus[1].groups[1].peer = P2PK_NVL_CPU;
  p2pk_p2p *x = &t->p2p[0][1];
  *x = (p2pk_p2p){1, 1, 0, 3, 1, {P2PKIT_P2P_OK, P2PKIT_P2P_CNS, P2PKIT_P2P_GNS, P2PKIT_P2P_TNS}};
  t->p2p[1][0].nvml[P2PKIT_P2P_NVLINK] = P2PKIT_P2P_NS;
  t->p2p[1][1].cuda_access = 1;
  return t;
}

static void check_same_model(const struct p2pkit_topo *a, const struct p2pkit_topo *b) {
  CHECK_STR(a->hostname, b->hostname);
  CHECK_STR(a->driver, b->driver);
  CHECK_STR(a->nvml_version, b->nvml_version);
  CHECK_EQ(a->cuda_driver, b->cuda_driver);
  CHECK_EQ(a->cuda_runtime, b->cuda_runtime);
  CHECK_EQ(a->known, b->known);
  CHECK_EQ(a->nnotes, b->nnotes);
  for (int i = 0; i < a->nnotes && i < b->nnotes; i++) CHECK_STR(a->notes[i], b->notes[i]);
  CHECK_EQ(a->nnuma, b->nnuma);
  for (int i = 0; i < a->nnuma && i < b->nnuma; i++)
    if (memcmp(&a->numa[i], &b->numa[i], sizeof a->numa[i])) T_FAIL("numa %d differs", i);
  CHECK_EQ(a->npci, b->npci);
  for (int i = 0; i < a->npci && i < b->npci; i++)
    if (memcmp(&a->pci[i], &b->pci[i], sizeof a->pci[i])) T_FAIL("pci %d differs", i);
  CHECK_EQ(a->ngpus, b->ngpus);
  for (int g = 0; g < a->ngpus && g < b->ngpus; g++) {
    const p2pk_gpu *x = &a->gpus[g], *y = &b->gpus[g];
    CHECK_STR(x->name, y->name);
    CHECK_STR(x->busid, y->busid);
    CHECK_STR(x->uuid, y->uuid);
    CHECK_EQ(x->memory_bytes, y->memory_bytes);
    CHECK_EQ(x->sm_count, y->sm_count);
    CHECK_EQ(x->cc_major, y->cc_major);
    CHECK_EQ(x->cc_minor, y->cc_minor);
    CHECK_EQ(x->pci, y->pci);
    CHECK_EQ(x->nvlinks_present, y->nvlinks_present);
    CHECK_EQ(x->nvlinks_active, y->nvlinks_active);
    if (x->nvlink_gbps != y->nvlink_gbps)
      T_FAIL("GPU%d nvlink_gbps %.17g != %.17g", g, x->nvlink_gbps, y->nvlink_gbps);
    CHECK_EQ(x->ngroups, y->ngroups);
    for (int k = 0; k < x->ngroups && k < y->ngroups; k++)
      if (memcmp(&x->groups[k], &y->groups[k], sizeof x->groups[k])) T_FAIL("GPU%d group %d differs", g, k);
  }
  for (int s = 0; s < P2PK_MAX_GPUS; s++)
    for (int d = 0; d < P2PK_MAX_GPUS; d++)
      if (memcmp(&a->p2p[s][d], &b->p2p[s][d], sizeof a->p2p[s][d])) T_FAIL("p2p %d->%d differs", s, d);
  CHECK_EQ(a->nnics, b->nnics);
  for (int n = 0; n < a->nnics && n < b->nnics; n++) {
    CHECK_STR(a->nics[n].name, b->nics[n].name);
    CHECK_EQ(a->nics[n].pci, b->nics[n].pci);
    CHECK_EQ(a->nics[n].speed_mbps, b->nics[n].speed_mbps);
    CHECK_EQ(a->nics[n].gdr, b->nics[n].gdr);
  }
}

/* write(read(write(t))) == write(t), and read(write(t)) holds t's fields. */
static void round_trip(const char *what, const struct p2pkit_topo *t) {
  size_t n1 = 0, n2 = 0;
  char *w1 = write_mem(p2pk_topo_write_file, t, &n1);
  if (!w1) return;
  struct p2pkit_topo *r = NULL;
  p2pkit_status_t st = p2pk_topo_read_file("rt.p2pkit", w1, n1, &r);
  if (st != P2PKIT_SUCCESS) {
    T_FAIL("%s: reading back failed: %s\n%s", what, p2pkit_last_error(), w1);
    free(w1);
    return;
  }
  CHECK_STR(r->format, "p2pkit");
  CHECK_STR(r->source, "rt.p2pkit");
  check_same_model(t, r);
  char *w2 = write_mem(p2pk_topo_write_file, r, &n2);
  if (w2 && (n1 != n2 || memcmp(w1, w2, n1) != 0))
    T_FAIL("%s: second write differs:\n%s\n---\n%s", what, w1, w2);
  free(w1);
  free(w2);
  p2pkit_topo_destroy(r);
}

TEST(p2pkit_round_trip_every_field) {
  struct p2pkit_topo *t = every_field();
  round_trip("every_field", t);
  size_t n = 0;
  char *text = write_mem(p2pk_topo_write_file, t, &n);
  if (text) {
    /* Spelled as documented: quoted strings, escapes, shortest doubles. */
    CHECK(strstr(text, "p2pkit-topo 2\n") == text);
    CHECK(n >= 4 && strcmp(text + n - 4, "end\n") == 0);
    CHECK(strstr(text, "\nnic index=0 name=\"mlx5_0 \\\"port\\\" #1\" pci=2 speed=400000 gdr=0\n"
                       "nic index=1 pci=0\n") != NULL);
    CHECK(strstr(text, "host=\"host with \\\"quotes\\\" # and \\\\ and\\ttab\"") != NULL);
    CHECK(strstr(text, "note text=\"first note\\nwith a newline and \\x01 control byte\"") != NULL);
    CHECK(strstr(text, "nvlink_gbps=26.5625") != NULL);
    CHECK(strstr(text, "nvlink_gbps=0.30000000000000004") != NULL);
    CHECK(strstr(text, "memory=18446744073709551615") != NULL);
    CHECK(strstr(text,
                 "p2p src=0 dst=1 cuda_access=1 attr_access=1 attr_atomics=0 attr_perf_rank=3 "
                 "attr_array=1 read=OK write=CNS atomics=GNS nvlink=TNS\n") != NULL);
    CHECK(strstr(text, "p2p src=1 dst=0 nvlink=NS\n") != NULL);
    CHECK(strstr(text, "known=cuda,pci_tree,numa,nvlink,p2p\n") != NULL);
    free(text);
  }
  p2pkit_topo_destroy(t);
}

TEST(p2pkit_round_trip_fixtures) {
  for (int i = 0; i < NFIXTURES; i++) {
    p2pkit_topo_t t = load(fixtures[i].file);
    if (!t) continue;
    round_trip(fixtures[i].file, t);
    p2pkit_topo_destroy(t);
  }
}

TEST(save_and_load_through_the_public_api) {
  p2pkit_topo_t t = load("nvlink_direct.p2pkit");
  if (!t) return;
  char path[] = "/tmp/p2pk_topo_saveXXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd < 0) return;
  close(fd);
  CHECK_OK(p2pkit_topo_save(t, path));
  p2pkit_topo_t u = NULL;
  CHECK_OK(p2pkit_topo_load(path, &u));
  if (u) {
    check_same_model(t, u);
    CHECK_STR(u->source, path);
    p2pkit_topo_destroy(u);
  }
  unlink(path);
  p2pkit_topo_destroy(t);
}

TEST(writer_refuses_what_it_cannot_read_back) {
  struct p2pkit_topo *t = every_field();
  t->gpus[0].nvlink_gbps = NAN;
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  CHECK_EQ(p2pk_topo_write_file(t, f), P2PKIT_ERR_INVALID_ARGUMENT);
  fclose(f);
  CHECK_EQ(n, 0); /* nothing half-written */
  CHECK(strstr(p2pkit_last_error(), "nvlink_gbps") != NULL);
  free(buf);
  t->gpus[0].nvlink_gbps = 1;
  t->pci[1].parent = 2;
  t->pci[2].parent = 1; /* a loop */
  f = open_memstream(&buf, &n);
  CHECK(p2pk_topo_write_file(t, f) != P2PKIT_SUCCESS);
  fclose(f);
  free(buf);
  p2pkit_topo_destroy(t);
}

/* --- p2pkit format errors ----------------------------------------------------- */

static const char HDR[] = "p2pkit-topo 1\n";
#define HB "pci id=0 kind=hostbridge busid=0000:00 parent=-1 numa=0\n"
#define SW "pci id=1 kind=switch busid=0000:01:00.0 parent=0\n"
#define GPUNODE "pci id=2 kind=gpu busid=0000:02:00.0 parent=1\n"
#define GPU0 "gpu index=0 busid=0000:02:00.0 pci=2\n"

static const struct {
  const char *text; /* after the header unless it starts with '!' */
  int line;
  const char *want;
} bad_files[] = {
    {"!p2pkit-topo 3\n", 1, "unsupported p2pkit-topo version 3 (this p2pkit reads versions 1 to 2)"},
    {"!p2pkit-topo 0\n", 1, "unsupported p2pkit-topo version 0"},
    {"!p2pkit-topo one\n", 1, "expected 'p2pkit-topo 2'"},
    {"!machine host=x\n", 1, "expected 'p2pkit-topo 2' as the first line, found 'machine'"},
    {"!", 1, "empty file: expected 'p2pkit-topo 2'"},
    {"!# only a comment\n\n", 1, "empty file"},
    {"switch id=0\n", 2,
     "unknown record 'switch' (expected machine, note, numa, pci, gpu, nvlink, nic, p2p or end)"},
    {"pci id=0 kind=hostbridge busid=0000:00 parent=-1 colour=red\n", 2,
     "pci: unknown key 'colour' (expected id, kind"},
    {"pci id=0 kind=\n", 2, "pci: expected one of hostbridge, switch, gpu, other for 'kind', found ''"},
    {"pci id=0 kind=switch\n", 2, "pci: expected busid=... (it is required)"},
    {"pci id=0 kind=switch busid=0000:01:00.0 parent\n", 2, "pci: expected key=value, found 'parent'"},
    {"\n# c\n" HB "gpu index=0 busid=0000:02:00.0 name=\"NVIDIA\n", 5,
     "value of 'name': expected a closing '\"'"},
    {"gpu index=0 busid=0000:02:00.0 name=\"a\\qb\"\n", 2, "unknown escape"},
    {"gpu index=0 busid=0000:02:00.0 name=\"a\"b\n", 2, "expected a space after the value of 'name'"},
    {"gpu index=0 busid=0000:02:00.0 name=a\"b\n", 2, "unexpected '\"' inside a value"},
    {"numa os=zero\n", 2, "numa: expected an integer from 0 to 1048576 for 'os', found 'zero'"},
    {"numa os=1x\n", 2, "for 'os', found '1x'"},
    {"numa os=0 os=1\n", 2, "numa: 'os' is given twice"},
    {"numa os=0 cpus=0-3\nnuma os=0\n", 3, "numa: os=0 is defined twice (first on line 2)"},
    {"numa os=0 cpus=zero\n", 2, "expected a CPU list like 0-31,64-95"},
    {HB "pci id=1 kind=switch busid=0000:01:00.0 parent=-2\n", 3,
     "expected an integer from -1 to 511 for 'parent'"},
    {HB "pci id=1 kind=switch busid=0000:01:00.0 parent=0 vendor=0x10000\n", 3,
     "from 0 to 0xffff for 'vendor'"},
    {HB "pci id=1 kind=switch busid=0000:01:00.0 parent=0 vendor=-1\n", 3, "for 'vendor', found '-1'"},
    {HB "pci id=2 kind=switch busid=0000:01:00.0 parent=0\n", 3,
     "pci: expected id=1 (pci ids count up from 0"},
    {HB HB, 3, "pci: id=0 is defined twice (first on line 2)"},
    {HB "pci id=1 kind=switch busid=0000:01:00.0 parent=5\n", 3,
     "pci id=1: parent 5 is not a pci id defined in the file"},
    {"pci id=0 kind=switch busid=0000:01:00.0 parent=1\npci id=1 kind=switch busid=0000:02:00.0 parent=0\n",
     2, "pci id=0: its parents form a loop"},
    {HB "pci id=1 kind=hostbridge busid=0000:40 parent=0\n", 3, "a hostbridge is a root: expected parent=-1"},
    {HB SW "pci id=2 kind=gpu busid=0000:01:00.0 parent=1\n", 4, "pci id=2: bus id 0000:01:00.0 is pci id=1's too"},
    {HB SW GPUNODE GPU0 GPU0, 6, "gpu: index=0 is defined twice (first on line 5)"},
    {HB SW GPUNODE "gpu index=1 busid=0000:02:00.0\n", 5, "gpu: expected index=0 (GPUs count up from 0"},
    {HB SW GPUNODE "gpu index=64 busid=0000:02:00.0\n", 5, "expected an integer from 0 to 63 for 'index'"},
    {HB SW GPUNODE "gpu index=0 busid=0000:02:00.0 pci=1\n", 5,
     "gpu index=0: pci=1 is a switch node, expected a gpu node"},
    {HB SW GPUNODE "gpu index=0 busid=0000:02:00.0 pci=9\n", 5, "gpu index=0: pci=9 is not a pci id defined"},
    {HB SW GPUNODE GPU0 "gpu index=1 busid=0000:02:00.0\n", 6,
     "gpu index=1: bus id 0000:02:00.0 is GPU 0's too"},
    {HB SW GPUNODE GPU0 "gpu index=1 busid=0000:03:00.0 cc=9\n", 6,
     "expected major.minor (like 9.0) for 'cc'"},
    {HB SW GPUNODE GPU0 "nvlink gpu=3 peer=switch count=18\n", 6, "nvlink: gpu=3 is not defined yet"},
    {HB SW GPUNODE GPU0 "nvlink gpu=0 peer=bridge count=18\n", 6,
     "expected one of gpu, switch, cpu, unknown for 'peer'"},
    {HB SW GPUNODE GPU0 "p2p src=0 dst=5 read=OK\n", 6, "p2p: GPU 5 is not defined yet"},
    {HB SW GPUNODE GPU0 "p2p src=0 dst=0 read=OK\np2p src=0 dst=0\n", 7,
     "p2p: src=0 dst=0 is given twice (first on line 6)"},
    {HB SW GPUNODE GPU0 "p2p src=0 dst=0 read=YES\n", 6,
     "expected one of OK, CNS, GNS, TNS, NS, U for 'read'"},
    {HB SW GPUNODE GPU0 "p2p src=0 dst=0 cuda_access=2\n", 6, "from -1 to 1 for 'cuda_access'"},
    {"machine host=a\nmachine host=b\n", 3, "only one machine record"},
    {"machine known=cuda,psychic\n", 2, "expected 'none' or a comma list of cuda, pci_tree"},
    {"machine cuda_driver=99999999999999999999\n", 2, "for 'cuda_driver'"},
    {"gpu index=0 busid=0000:02:00.0 nvlink_gbps=nan\n", 2, "for 'nvlink_gbps', found 'nan'"},
    {"gpu index=0 busid=0000:02:00.0 memory=-5\n", 2, "expected a byte count for 'memory'"},
    {"key=value\n", 2, "expected a record keyword, found 'key='"},
    /* A gpu node without its gpu record: the file lost it (cut short). */
    {HB SW GPUNODE, 4, "pci id=2 is a gpu node but no gpu record has pci=2: a gpu record is missing"},
    {HB SW GPUNODE GPU0 "nic index=0 pci=9\n", 6, "nic index=0: pci=9 is not a pci id defined in the file"},
    {HB SW GPUNODE GPU0 "nic index=0 pci=2\n", 6, "nic index=0: pci=2 is a gpu node, expected an other node"},
    {HB SW GPUNODE GPU0 "nic index=1 pci=0\n", 6, "nic: expected index=0 (NICs count up from 0"},
    {HB SW GPUNODE GPU0 "nic index=0 pci=0 name=a\nnic index=1 pci=0 name=a\n", 7,
     "nic index=1: name a is NIC 0's too"},
    {HB SW GPUNODE GPU0 "nic index=0 pci=0\nnic index=1 pci=0\n", 7, "a second NIC without a name at pci=0"},
    {HB SW GPUNODE GPU0 "nic index=0 pci=0 gdr=2\n", 6, "from -1 to 1 for 'gdr'"},
    {HB SW GPUNODE GPU0 "end\nnuma os=1\n", 7, "'numa' after the end record"},
    {HB SW GPUNODE GPU0 "end now\n", 6, "end: expected nothing after 'end', found 'now'"},
    {"=5\n", 2, "expected a key before '='"},
};

TEST(p2pkit_errors_name_file_line_and_expectation) {
  for (size_t i = 0; i < sizeof bad_files / sizeof bad_files[0]; i++) {
    char text[2048];
    const char *body = bad_files[i].text;
    if (body[0] == '!')
      snprintf(text, sizeof text, "%s", body + 1);
    else
      snprintf(text, sizeof text, "%s%s", HDR, body);
    struct p2pkit_topo *t = NULL;
    p2pkit_status_t st = p2pk_topo_read_file("bad.p2pkit", text, strlen(text), &t);
    char where[32];
    snprintf(where, sizeof where, "bad.p2pkit:%d: ", bad_files[i].line);
    const char *msg = p2pkit_last_error();
    if (st != P2PKIT_ERR_PARSE)
      T_FAIL("case %zu: status %d, want PARSE (text: %s)", i, st, text);
    else if (strncmp(msg, where, strlen(where)) != 0 || !strstr(msg, bad_files[i].want))
      T_FAIL("case %zu: got \"%s\", want \"%s...%s\"", i, msg, where, bad_files[i].want);
    if (t) {
      T_FAIL("case %zu: output set on failure", i);
      p2pkit_topo_destroy(t);
    }
  }
}

TEST(p2pkit_errors_binary_and_overlong_input) {
  struct p2pkit_topo *t = NULL;
  const char nul[] = "p2pkit-topo 1\nnuma os=0\0 cpus=1\n";
  CHECK_EQ(p2pk_topo_read_file("b.p2pkit", nul, sizeof nul - 1, &t), P2PKIT_ERR_PARSE);
  CHECK(strstr(p2pkit_last_error(), "b.p2pkit:2: unexpected NUL byte") != NULL);
  char text[1200];
  int n = snprintf(text, sizeof text, "p2pkit-topo 1\ngpu index=0 busid=0000:01:00.0 name=");
  memset(text + n, 'x', 200);
  text[n + 200] = '\0';
  CHECK_EQ(p2pk_topo_read_file("b.p2pkit", text, strlen(text), &t), P2PKIT_ERR_PARSE);
  CHECK(strstr(p2pkit_last_error(), "b.p2pkit:2: gpu: 'name' is longer than 95 characters") != NULL);
  memset(text + n, 'x', 900);
  text[n + 900] = '\0';
  CHECK_EQ(p2pk_topo_read_file("b.p2pkit", text, strlen(text), &t), P2PKIT_ERR_PARSE);
  CHECK(strstr(p2pkit_last_error(), "b.p2pkit:2: value longer than 511 bytes") != NULL);
  /* The buffer is read up to len only: a valid file followed by junk. */
  const char cut[] = "p2pkit-topo 1\nnuma os=2\nJUNK JUNK";
  CHECK_OK(p2pk_topo_read_file("b.p2pkit", cut, sizeof cut - 1 - 9, &t));
  if (t) {
    CHECK_EQ(t->nnuma, 1);
    CHECK_EQ(t->numa[0].os_index, 2);
    p2pkit_topo_destroy(t);
  }
  CHECK(t != NULL);
}

/* Version 2 closes with `end`: a file cut anywhere, even inside a line, is
 * refused (issue 36, item 8); version 1 files read as before. */
TEST(p2pkit_cut_short_is_refused) {
  p2pkit_topo_t t = load("nics.p2pkit");
  if (!t) return;
  size_t n = 0;
  char *text = write_mem(p2pk_topo_write_file, t, &n);
  p2pkit_topo_destroy(t);
  if (!text) return;
  int refused = 0, cuts = 0;
  for (size_t cut = 15; cut + 1 < n; cut += 7, cuts++) {
    struct p2pkit_topo *r = NULL;
    p2pkit_status_t st = p2pk_topo_read_file("cut.p2pkit", text, cut, &r);
    if (st == P2PKIT_SUCCESS) {
      T_FAIL("cut at byte %zu of %zu read as a machine of %d GPUs", cut, n, r->ngpus);
      p2pkit_topo_destroy(r);
      continue;
    }
    refused++;
  }
  CHECK_EQ(refused, cuts);
  struct p2pkit_topo *r = NULL;
  CHECK_EQ(p2pk_topo_read_file("cut.p2pkit", text, n - 4, &r), P2PKIT_ERR_PARSE);
  CHECK(strstr(p2pkit_last_error(), "the file ends without its 'end' record: it is cut short") != NULL);
  CHECK_OK(p2pk_topo_read_file("whole.p2pkit", text, n - 1, &r)); /* only the last newline lost */
  p2pkit_topo_destroy(r);
  r = NULL;
  const char v2_header[] = "p2pkit-topo 2\n";
  CHECK_EQ(p2pk_topo_read_file("h.p2pkit", v2_header, sizeof v2_header - 1, &r), P2PKIT_ERR_PARSE);
  CHECK(strstr(p2pkit_last_error(), "h.p2pkit:1: the file ends without its 'end' record") != NULL);
  const char v1_header[] = "p2pkit-topo 1\n";
  CHECK_OK(p2pk_topo_read_file("h.p2pkit", v1_header, sizeof v1_header - 1, &r));
  if (r) CHECK_EQ(r->ngpus, 0); /* read; p2pkit_topo_load then refuses it for having no GPU */
  p2pkit_topo_destroy(r);
  free(text);
}

/* A file without a GPU loads from no source: NO_DEVICE, one line naming the
 * file and what it lacks (the CLI exits 2, as for a live machine without one). */
TEST(load_refuses_a_machine_without_gpu) {
  static const struct {
    const char *file, *want;
  } cases[] = {
      {"bad/header_only.p2pkit", "header_only.p2pkit: no GPU in this machine (no gpu record)"},
      {"bad/nogpu.nccl.xml", "nogpu.nccl.xml: no GPU in this machine (no <gpu> element and no <pci> of "
                             "display/3D class (0x03...) from NVIDIA)"},
      {"bad/nogpu.hwloc.xml", "nogpu.hwloc.xml: no GPU in this machine (no PCI device of display/3D class"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", P2PK_TEST_DATA, cases[i].file);
    p2pkit_topo_t t = NULL;
    CHECK_EQ(p2pkit_topo_load(path, &t), P2PKIT_ERR_NO_DEVICE);
    if (!strstr(p2pkit_last_error(), cases[i].want) || strchr(p2pkit_last_error(), '\n'))
      T_FAIL("%s: got \"%s\"", cases[i].file, p2pkit_last_error());
    CHECK(t == NULL);
  }
}

TEST(load_error_names_the_path) {
  char path[] = "/tmp/p2pk_badXXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd < 0) return;
  const char text[] = "p2pkit-topo 1\nnuma os=0\nnuma os=x\n";
  CHECK_EQ(write(fd, text, sizeof text - 1), (long)(sizeof text - 1));
  close(fd);
  p2pkit_topo_t t = NULL;
  CHECK_EQ(p2pkit_topo_load(path, &t), P2PKIT_ERR_PARSE);
  char want[64];
  snprintf(want, sizeof want, "%s:3: numa: expected an integer", path);
  CHECK(strncmp(p2pkit_last_error(), want, strlen(want)) == 0);
  CHECK(t == NULL);
  unlink(path);
}

/* --- NCCL XML ------------------------------------------------------------------ */

TEST(nccl_dump_of_the_device_machine) {
  p2pkit_topo_t t = load("h200x2.nccl.xml");
  if (!t) return;
  CHECK_STR(t->format, "nccl-xml");
  CHECK_EQ(t->ngpus, 2);
  CHECK_STR(t->gpus[0].busid, "0000:00:06.0");
  CHECK_STR(t->gpus[1].busid, "0000:00:07.0");
  p2pkit_gpu_t g;
  CHECK_OK(p2pkit_topo_gpu(t, 1, &g));
  CHECK_EQ(g.cc_major, 9);
  CHECK_EQ(g.cc_minor, 0);
  CHECK_EQ(g.pcie_max_gen, 5);
  CHECK_EQ(g.pcie_max_width, 16);
  CHECK_EQ(g.pcie_gen, 0); /* NCCL records the maximum only */
  CHECK_EQ(g.numa, 0);
  CHECK_STR(g.cpus, "0-31");
  CHECK_EQ(g.nvlinks_active, 18);
  CHECK_EQ(t->gpus[0].ngroups, 1);
  CHECK_EQ(t->gpus[0].groups[0].peer, P2PK_NVL_SWITCH);
  CHECK_STR(t->gpus[0].groups[0].peer_busid, "fffffff:ff:ff.0");
  p2pkit_pair_t p;
  CHECK_OK(p2pkit_topo_pair(t, 0, 1, &p));
  CHECK_STR(p.label, "NV18");
  CHECK_EQ(p.pcie, P2PKIT_LINK_PHB);
  CHECK_EQ(p.p2p, -1);
  CHECK_EQ(p.caps[P2PKIT_P2P_READ], P2PKIT_P2P_U);
  CHECK_EQ(t->known, P2PK_KNOW_PCI_TREE | P2PK_KNOW_NUMA | P2PK_KNOW_NVLINK | P2PK_KNOW_PCIE_LINK);
  int phb_note = 0, p2p_note = 0;
  for (int i = 0; i < t->nnotes; i++) {
    phb_note |= strstr(t->notes[i], "do not separate PCIe host bridges") != NULL;
    p2p_note |= strstr(t->notes[i], "record no P2P status") != NULL;
  }
  CHECK(phb_note && p2p_note);
  /* The NIC is kept as a plain PCI device, not a GPU or a switch. */
  int nic = p2pk_topo_find_pci(t, "0000:00:03.0");
  CHECK(nic >= 0);
  if (nic >= 0) CHECK_EQ(t->pci[nic].kind, P2PK_PCI_OTHER);
  p2pkit_topo_destroy(t);
}

static const char two_sockets[] =
    "<?xml version=\"1.0\"?>\n"
    "<!-- two sockets, nested switches, one direct NVLink; devs out of order -->\n"
    "<system version='1'>\n"
    "  <cpu numaid=\"1\" affinity=\"ffffffff,00000000\" arch=\"x86_64\" vendor=\"AuthenticAMD\">\n"
    "    <pci busid=\"0000:C1:00.0\" class=\"0x030200\" vendor=\"0x10de\" device=\"0x20b0\" "
    "link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">\n"
    "      <gpu dev=\"3\" sm=\"80\" rank=\"3\" gdr=\"1\">\n"
    "        <nvlink target=\"0000:05:00.0\" count=\"4\" tclass=\"0x030200\"/>\n"
    "      </gpu>\n"
    "    </pci>\n"
    "  </cpu>\n"
    "  <cpu numaid=\"0\" affinity=\"00000000,ffffffff\" arch=\"x86_64\" vendor=\"AuthenticAMD\">\n"
    "    <pci busid=\"0000:01:00.0\" class=\"0x060400\" link_speed=\"16 GT/s\" link_width=\"16\">\n"
    "      <pci busid=\"0000:03:00.0\" class=\"0x060400\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">\n"
    "        <pci busid=\"0000:05:00.0\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" "
    "link_width=\"16\">\n"
    "          <gpu dev=\"0\" sm=\"80\" rank=\"0\" gdr=\"1\">\n"
    "            <nvlink target=\"0000:c1:00.0\" count=\"4\" tclass=\"0x030200\"/>\n"
    "          </gpu>\n"
    "        </pci>\n"
    "        <pci busid=\"0000:06:00.0\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" "
    "link_width=\"16\">\n"
    "          <gpu dev=\"1\" sm=\"80\" rank=\"1\" gdr=\"1\"/>\n"
    "        </pci>\n"
    "      </pci>\n"
    "      <pci busid=\"0000:0a:00.0\" class=\"0x030200\" link_speed=\"8.0 GT/s PCIe\" link_width=\"8\">\n"
    "        <gpu dev=\"2\" sm=\"86\" rank=\"2\" gdr=\"1\"/>\n"
    "      </pci>\n"
    "    </pci>\n"
    "    <nic><net name=\"mlx5_0\" dev=\"0\" speed=\"200000\"/></nic>\n"
    "  </cpu>\n"
    "</system>\n";

TEST(nccl_two_sockets_nested_switches_direct_nvlink) {
  struct p2pkit_topo *t = NULL;
  CHECK_OK(p2pk_topo_read_nccl("two.xml", two_sockets, sizeof two_sockets - 1, &t));
  if (!t) return;
  CHECK_EQ(t->ngpus, 4);
  CHECK_STR(t->gpus[0].busid, "0000:05:00.0");
  CHECK_STR(t->gpus[1].busid, "0000:06:00.0");
  CHECK_STR(t->gpus[2].busid, "0000:0a:00.0");
  CHECK_STR(t->gpus[3].busid, "0000:c1:00.0");
  CHECK_EQ(t->gpus[2].cc_minor, 6);
  /* GPU0 and GPU1 share the inner switch (PIX); GPU2 hangs from the outer one (PXB). */
  check_labels("two.xml", t, 4, "X PIX PXB NV4  PIX X PXB SYS  PXB PXB X SYS  NV4 SYS SYS X");
  CHECK_EQ(pcie(t, 0, 3), P2PKIT_LINK_SYS);
  CHECK_EQ(t->nnuma, 2);
  p2pkit_gpu_t g;
  CHECK_OK(p2pkit_topo_gpu(t, 3, &g));
  CHECK_EQ(g.numa, 1);
  CHECK_STR(g.cpus, "32-63");
  CHECK_OK(p2pkit_topo_gpu(t, 0, &g));
  CHECK_STR(g.cpus, "0-31");
  CHECK_EQ(g.pcie_max_gen, 4);
  CHECK_OK(p2pkit_topo_gpu(t, 2, &g));
  CHECK_EQ(g.pcie_max_gen, 3);
  CHECK_EQ(g.pcie_max_width, 8);
  int sw = p2pk_topo_find_pci(t, "0000:01:00.0");
  CHECK(sw >= 0);
  if (sw >= 0) CHECK_EQ(t->pci[sw].max_gen, 4); /* "16 GT/s", the older kernels' spelling */
  p2pkit_topo_destroy(t);
}

/* Writing NCCL XML and reading it back keeps every pair's class, except that
 * NCCL has no host bridges: NODE comes back as PHB. */
TEST(nccl_round_trip_keeps_classes) {
  for (int i = 0; i < NFIXTURES; i++) {
    p2pkit_topo_t t = load(fixtures[i].file);
    if (!t) continue;
    size_t n = 0;
    char *xml = write_mem(p2pk_topo_write_nccl, t, &n);
    struct p2pkit_topo *r = NULL;
    if (xml && p2pk_topo_read_nccl("rt.xml", xml, n, &r) != P2PKIT_SUCCESS)
      T_FAIL("%s: NCCL XML does not read back: %s\n%s", fixtures[i].file, p2pkit_last_error(), xml);
    if (r) {
      CHECK_EQ(r->ngpus, t->ngpus);
      for (int a = 0; a < t->ngpus && a < r->ngpus; a++) {
        CHECK_STR(r->gpus[a].busid, t->gpus[a].busid);
        for (int b = 0; b < t->ngpus && b < r->ngpus; b++) {
          p2pkit_pair_t x, y;
          p2pk_pair_info(t, a, b, &x);
          p2pk_pair_info(r, a, b, &y);
          p2pkit_link_t want = x.pcie == P2PKIT_LINK_NODE ? P2PKIT_LINK_PHB : x.pcie;
          const char *want_label = strcmp(x.label, "NODE") == 0 ? "PHB" : x.label;
          if (y.pcie != want || strcmp(y.label, want_label) != 0 || x.nvlinks != y.nvlinks)
            T_FAIL("%s GPU%d-GPU%d: %s/%d/NV%d became %s/%d/NV%d", fixtures[i].file, a, b, x.label, x.pcie,
                   x.nvlinks, y.label, y.pcie, y.nvlinks);
        }
      }
      CHECK_EQ(r->nnics, t->nnics);
      for (int k = 0; k < t->nnics && k < r->nnics; k++) {
        char a[P2PK_NIC_NAME_LEN], b[P2PK_NIC_NAME_LEN];
        CHECK_STR(p2pk_nic_label(r, k, b, sizeof b), p2pk_nic_label(t, k, a, sizeof a));
        for (int g = 0; g < t->ngpus && g < r->ngpus; g++) {
          p2pkit_link_t x = p2pk_gpu_nic_link(t, g, k), y = p2pk_gpu_nic_link(r, g, k);
          if (y != (x == P2PKIT_LINK_NODE ? P2PKIT_LINK_PHB : x))
            T_FAIL("%s GPU%d-NIC%d: %s became %s", fixtures[i].file, g, k, p2pkit_link_name(x),
                   p2pkit_link_name(y));
        }
      }
      /* Written again, the same bytes. */
      size_t n2 = 0;
      char *xml2 = write_mem(p2pk_topo_write_nccl, r, &n2);
      if (xml2 && (n2 != n || memcmp(xml, xml2, n) != 0))
        T_FAIL("%s: NCCL XML changes on a second round:\n%s---\n%s", fixtures[i].file, xml, xml2);
      free(xml2);
      p2pkit_topo_destroy(r);
    }
    free(xml);
    p2pkit_topo_destroy(t);
  }
}

TEST(nccl_writer_speaks_nccls_dialect) {
  p2pkit_topo_t t = load("nvswitch8.p2pkit");
  if (!t) return;
  char *xml = write_mem(p2pk_topo_write_nccl, t, NULL);
  if (xml) {
    CHECK(strncmp(xml, "<system version=\"1\">\n", 21) == 0);
    CHECK(
        strstr(xml,
               "  <cpu numaid=\"0\" affinity=\"000000ff,ffffffff,ffff0000,00000000,00ffffff,ffffffff\">\n") !=
        NULL);
    CHECK(strstr(xml,
                 "    <pci busid=\"0000:16:00.0\" class=\"0x060400\" vendor=\"0x1000\" device=\"0xc030\" "
                 "link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">\n") != NULL);
    CHECK(strstr(xml,
                 "      <pci busid=\"0000:18:00.0\" class=\"0x030200\" vendor=\"0x10de\" device=\"0x2330\" "
                 "link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">\n"
                 "        <gpu dev=\"0\" sm=\"90\" rank=\"0\">\n"
                 "          <nvlink target=\"fffffff:ff:ff.0\" count=\"18\" tclass=\"0x068000\"/>\n") !=
          NULL);
    CHECK(strstr(xml, "<cpu numaid=\"1\"") != NULL);
    CHECK(strchr(xml, '\t') == NULL); /* NCCL's parser takes spaces and newlines only */
    CHECK(strstr(xml, "<?xml") == NULL);
  }
  free(xml);
  p2pkit_topo_destroy(t);
  t = load("nvlink_direct.p2pkit");
  if (!t) return;
  xml = write_mem(p2pk_topo_write_nccl, t, NULL);
  if (xml) CHECK(strstr(xml, "<nvlink target=\"0000:0f:00.0\" count=\"8\" tclass=\"0x030200\"/>") != NULL);
  free(xml);
  p2pkit_topo_destroy(t);
}

static const struct {
  const char *text;
  int line;
  const char *want;
} bad_xml[] = {
    {"<system version=\"1\">\n<cpu numaid=\"0\">\n", 3, "<cpu> opened at line 2 is not closed"},
    {"<system version=\"1\">\n<cpu numaid=\"0\">\n</pci>\n</system>", 3,
     "expected </cpu> (opened at line 2), found </pci>"},
    {"<system version=1>\n</system>", 1, "expected a quoted attribute value in <system>"},
    {"<system version=\"1\" version=\"1\"/>", 1, "attribute 'version' given twice"},
    {"<system version=\"1\">\n<cpu numaid=\"0\" a=\"&nbsp;\"/>\n</system>", 2, "unknown entity"},
    {"<system version=\"1\"/>\n<system version=\"1\"/>", 2, "a second root element"},
    {"hello <system/>", 1, "text outside the root element"},
    {"<!-- never closed", 1, "comment is not closed"},
    {"", 1, "no XML element found"},
    {"<topology/>", 1, "expected <system> as the root element, found <topology>"},
    {"<system version=\"2\"/>", 1, "this p2pkit reads NCCL topology version 1"},
    {"<system/>", 1, "<system>: expected version=\"1\""},
    {"<system version=\"1\">\n <cpu affinity=\"ff\"/>\n</system>", 2, "<cpu>: expected a numaid attribute"},
    {"<system version=\"1\">\n <cpu numaid=\"zero\"/>\n</system>", 2,
     "<cpu numaid=\"zero\">: expected an integer"},
    {"<system version=\"1\">\n <cpu numaid=\"0\" affinity=\"xyz\"/>\n</system>", 2,
     "expected a hex CPU mask"},
    {"<system version=\"1\">\n <cpu numaid=\"0\"/>\n <cpu numaid=\"0\"/>\n</system>", 3,
     "<cpu numaid=\"0\"> appears twice"},
    {"<system version=\"1\"><cpu numaid=\"0\">\n<pci class=\"0x060400\"/></cpu></system>", 2,
     "expected a busid attribute"},
    {"<system version=\"1\"><cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\" class=\"0x02\"><nic>"
     "<net name=\"mlx5_0\"/></nic></pci>\n<pci busid=\"0000:02:00.0\" class=\"0x02\"><nic><net "
     "name=\"mlx5_0\"/></nic></pci></cpu></system>",
     3, "<net name=\"mlx5_0\">: also the NIC on line 2"},
    {"<system version=\"1\"><cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\" class=\"0x02\"><nic>"
     "<net name=\"m\" port=\"one\"/></nic></pci></cpu></system>",
     2, "<net port=\"one\">: expected an integer"},
    {"<system version=\"1\"><cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\" "
     "class=\"bridge\"/></cpu></system>",
     2, "expected a PCI class like 0x030200"},
    {"<system version=\"1\"><cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\" class=\"0x0604\"/>\n"
     "<pci busid=\"0000:01:00.0\" class=\"0x0604\"/></cpu></system>",
     3, "<pci busid=\"0000:01:00.0\"> appears twice"},
    {"<system version=\"1\"><cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\" class=\"0x0302\"><gpu "
     "dev=\"0\"/></pci>\n"
     "<pci busid=\"0000:02:00.0\" class=\"0x0302\"><gpu dev=\"0\"/></pci></cpu></system>",
     3, "dev 0 is also the GPU on line 2"},
    {"<system version=\"1\"><cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\" class=\"0x0302\"><gpu "
     "dev=\"64\"/></pci>"
     "</cpu></system>",
     2, "<gpu dev=\"64\">: expected an integer from -1 to 63"},
    {"<system version=\"1\"><cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\" class=\"0x0302\"><gpu "
     "dev=\"0\">\n"
     "<nvlink target=\"gpu1\" count=\"4\" tclass=\"0x030200\"/></gpu></pci></cpu></system>",
     3, "expected a GPU bus id as target, found \"gpu1\""},
    {"<system version=\"1\"><cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\" class=\"0x0302\"><gpu "
     "dev=\"0\">\n"
     "<nvlink target=\"x\" tclass=\"0x068000\"/></gpu></pci></cpu></system>",
     3, "<nvlink>: expected a count attribute"},
    {"<system version=\"1\"><cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\" class=\"0x0302\" "
     "link_width=\"wide\"/>"
     "</cpu></system>",
     2, "link_width=\"wide\""},
};

TEST(nccl_errors_name_file_line_and_expectation) {
  for (size_t i = 0; i < sizeof bad_xml / sizeof bad_xml[0]; i++) {
    struct p2pkit_topo *t = NULL;
    p2pkit_status_t st = p2pk_topo_read_nccl("bad.xml", bad_xml[i].text, strlen(bad_xml[i].text), &t);
    char where[32];
    snprintf(where, sizeof where, "bad.xml:%d: ", bad_xml[i].line);
    const char *msg = p2pkit_last_error();
    if (st != P2PKIT_ERR_PARSE)
      T_FAIL("case %zu: status %d, want PARSE", i, st);
    else if (strncmp(msg, where, strlen(where)) != 0 || !strstr(msg, bad_xml[i].want))
      T_FAIL("case %zu: got \"%s\", want \"%s...%s\"", i, msg, where, bad_xml[i].want);
    if (t) {
      T_FAIL("case %zu: output set on failure", i);
      p2pkit_topo_destroy(t);
    }
  }
}

/* --- the XML reader itself ------------------------------------------------------ */

TEST(xml_reader_entities_quotes_comments_lines) {
  const char text[] =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\" [ <!ENTITY x \"y\"> ]>\n"
      "<root a=\"&lt;&gt;&amp;&quot;&apos;\" b='single \"quoted\"'>\n"
      "  <!-- a comment with <tags> -->\n"
      "  <child n=\"&#65;&#x42;&#xe9;\"/>\n"
      "  text &amp; more <![CDATA[ <not a tag> ]]>\n"
      "  <child\n     n=\"two\"\n  ></child>\n"
      "</root>\n<!-- trailing comment -->\n";
  p2pk_xml_node *root = NULL;
  CHECK_OK(p2pk_xml_parse("t.xml", text, sizeof text - 1, &root));
  if (!root) return;
  CHECK_STR(root->name, "root");
  CHECK_EQ(root->line, 3);
  CHECK_STR(p2pk_xml_attr_get(root, "a"), "<>&\"'");
  CHECK_STR(p2pk_xml_attr_get(root, "b"), "single \"quoted\"");
  CHECK(p2pk_xml_attr_get(root, "c") == NULL);
  const p2pk_xml_node *c1 = root->first_child;
  CHECK(c1 != NULL);
  if (c1) {
    CHECK_STR(p2pk_xml_attr_get(c1, "n"), "AB\xc3\xa9");
    CHECK_EQ(c1->line, 5);
    const p2pk_xml_node *c2 = c1->next;
    CHECK(c2 != NULL);
    if (c2) {
      CHECK_EQ(c2->line, 7);
      CHECK_STR(p2pk_xml_attr_get(c2, "n"), "two");
      CHECK(c2->next == NULL);
      CHECK(c2->parent == root);
    }
  }
  p2pk_xml_free(root);
}

TEST(xml_reader_limits_and_unterminated_buffers) {
  /* Only `len` bytes count: the buffer need not end in NUL. */
  const char cut[] = "<a/>GARBAGE<<<";
  p2pk_xml_node *root = NULL;
  CHECK_OK(p2pk_xml_parse("t.xml", cut, 4, &root));
  p2pk_xml_free(root);
  root = NULL;
  CHECK_EQ(p2pk_xml_parse("t.xml", cut, 3, &root), P2PKIT_ERR_PARSE);
  CHECK(strstr(p2pkit_last_error(), "t.xml:1: <a> is cut off") != NULL);
  const char quote[] = "<a b=\"x";
  CHECK_EQ(p2pk_xml_parse("t.xml", quote, sizeof quote - 1, &root), P2PKIT_ERR_PARSE);
  /* Nesting deeper than the limit fails cleanly (and frees what it built). */
  char deep[(P2PK_XML_MAX_DEPTH + 2) * 3 + 1];
  size_t o = 0;
  for (int i = 0; i < P2PK_XML_MAX_DEPTH + 1; i++) o += (size_t)snprintf(deep + o, sizeof deep - o, "<a>");
  CHECK_EQ(p2pk_xml_parse("deep.xml", deep, o, &root), P2PKIT_ERR_PARSE);
  CHECK(strstr(p2pkit_last_error(), "nested deeper than 64") != NULL);
  CHECK(root == NULL);
  const char nul[] = "<a>\0</a>";
  CHECK_EQ(p2pk_xml_parse("t.xml", nul, sizeof nul - 1, &root), P2PKIT_ERR_PARSE);
  CHECK(strstr(p2pkit_last_error(), "unexpected NUL byte") != NULL);
}

/* --- hwloc XML and format detection ------------------------------------------------ */

TEST(hwloc_fixture_loads) {
  p2pkit_topo_t t = load("hwloc_3gpu.xml");
  if (!t) return;
  CHECK_STR(t->format, "hwloc-xml");
  CHECK_STR(t->hostname, "vm");
  CHECK_EQ(t->ngpus, 3);
  CHECK_STR(t->gpus[0].busid, "0000:43:00.0");
  CHECK_STR(t->gpus[2].busid, "0000:81:00.0");
  CHECK_STR(t->gpus[0].name, "NVIDIA H200");
  CHECK_EQ(t->gpus[0].sm_count, 132);
  CHECK_EQ(pcie(t, 0, 1), P2PKIT_LINK_PIX);
  CHECK_EQ(pcie(t, 1, 2), P2PKIT_LINK_NODE);
  p2pkit_gpu_t g;
  CHECK_OK(p2pkit_topo_gpu(t, 0, &g));
  CHECK_EQ(g.numa, 0);
  CHECK_STR(g.cpus, "0-1");
  p2pkit_topo_destroy(t);
}

/* Every bitmap hwloc_bitmap_sscanf reads, which hwloc itself writes with
 * empty 32-bit words ("0x00000303,,0x00000001"), passes the pre-check; the
 * two it reads badly (empty, a leading comma) and non-bitmaps do not. */
TEST(hwloc_bitmaps_as_hwloc_reads_them) {
  static const struct {
    const char *v;
    int ok;
  } cases[] = {
      {"0x00000303,0x03030000,,0x03030303", 1}, {"0x00000001,,0x0", 1}, {"0x1,,,", 1},
      {"0xf...f", 1}, {"0xf...f,,0x00000001", 1}, {"0x0000000f", 1}, {"f", 1}, {" 0x1", 1},
      {"-0x1", 1}, {"+1,2", 1}, {"0x0123456789abcdef0", 1},
      {"", 0}, {",0x1", 0}, {",", 0}, {"0x", 0}, {"0x1,0x", 0}, {"0xg", 0}, {"1 ", 0}, {"0x1;0x2", 0},
      {"0xf...fz", 0}, {" ", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char xml[256];
    snprintf(xml, sizeof xml,
             "<topology version=\"2.0\"><object type=\"Machine\" cpuset=\"%s\" complete_cpuset=\"0x1\"/>"
             "</topology>",
             cases[i].v);
    p2pkit_status_t st = p2pk_xml_check_hwloc("b.xml", xml, strlen(xml), NULL, NULL);
    if ((st == P2PKIT_SUCCESS) != cases[i].ok)
      T_FAIL("bitmap \"%s\": %s, wanted %s", cases[i].v,
             st == P2PKIT_SUCCESS ? "accepted" : p2pkit_last_error(), cases[i].ok ? "accepted" : "refused");
  }
}

/* An export of a newer hwloc: the versions and the way out, not "not an
 * hwloc export". */
TEST(hwloc_xml_of_a_newer_hwloc) {
  char path[512];
  snprintf(path, sizeof path, "%s/bad/hwloc_v3.xml", P2PK_TEST_DATA);
  p2pkit_topo_t t = NULL;
  CHECK_EQ(p2pkit_topo_load(path, &t), P2PKIT_ERR_UNSUPPORTED);
  const char *msg = p2pkit_last_error();
  CHECK(strstr(msg, "hwloc_v3.xml: hwloc XML version 3.0, written by hwloc 3") != NULL);
  CHECK(strstr(msg, "reads versions 1.x to 2.x") != NULL);
  CHECK(strstr(msg, "lstopo --of xml --export-xml-flags v2 FILE") != NULL);
  CHECK(strstr(msg, "build p2pkit against hwloc 3") != NULL);
  CHECK(t == NULL);
  struct p2pkit_topo *u = NULL;
  const char odd[] = "<topology version=\"two\"/>";
  CHECK_EQ(p2pk_topo_read_any("odd.xml", odd, sizeof odd - 1, &u), P2PKIT_ERR_PARSE);
  CHECK(strstr(p2pkit_last_error(), "odd.xml:1: <topology version=\"two\">: expected a version like 2.0"));
  int major = 0, minor = 0;
  const char v1[] = "<topology><object type=\"Machine\"/></topology>"; /* hwloc 1.x wrote no version */
  CHECK_OK(p2pk_xml_check_hwloc("v1.xml", v1, sizeof v1 - 1, &major, &minor));
  CHECK_EQ(major, 1);
  CHECK_EQ(minor, 0);
}

/* NICs in hwloc: each OpenFabrics (verbs) OS device, named by it; an
 * InfiniBand device without one unnamed; virtio-net's eth0 none. */
TEST(hwloc_nics_fixture) {
  p2pkit_topo_t t = load("hwloc_nics.xml");
  if (!t) return;
  check_labels("hwloc_nics.xml", t, 4, "X PIX SYS SYS  PIX X SYS SYS  SYS SYS X PIX  SYS SYS PIX X");
  p2pkit_gpu_t g;
  CHECK_OK(p2pkit_topo_gpu(t, 2, &g));
  CHECK_STR(g.cpus, "1,65"); /* from "0x00000002,,0x00000002" */
  CHECK_EQ(t->nnics, 3);
  CHECK_STR(t->nics[0].name, "mlx5_0");
  CHECK_STR(t->nics[1].name, "");
  CHECK_STR(t->pci[t->nics[1].pci].busid, "0000:16:00.0");
  CHECK_STR(t->nics[2].name, "mlx5_1");
  CHECK(p2pk_topo_find_pci(t, "0000:00:03.0") < 0); /* eth0 is not kept */
  CHECK_EQ(p2pk_gpu_nic_link(t, 0, 0), P2PKIT_LINK_PIX);
  CHECK_EQ(p2pk_gpu_nic_link(t, 0, 1), P2PKIT_LINK_PHB);
  CHECK_EQ(p2pk_gpu_nic_link(t, 3, 0), P2PKIT_LINK_SYS);
  p2pkit_link_t l;
  CHECK_EQ(p2pk_nearest_nic(t, 3, &l), 2);
  CHECK_EQ(l, P2PKIT_LINK_PIX);
  p2pkit_topo_destroy(t);
}

/* Text of a file under tests/data (NULL on failure). */
static char *slurp(const char *file, size_t *len) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", P2PK_TEST_DATA, file);
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = malloc(1 << 20);
  *len = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
  fclose(f);
  if (buf) buf[*len] = '\0';
  return buf;
}

static void replace_once(char *text, const char *from, const char *to) {
  char *p = strstr(text, from);
  CHECK(p != NULL);
  if (!p) return;
  size_t nf = strlen(from), nt = strlen(to);
  memmove(p + nt, p + nf, strlen(p + nf) + 1);
  memcpy(p, to, nt);
}

/* Found by the fuzzer: libhwloc aborts or crashes on these; p2pkit refuses
 * them before hwloc sees them. */
TEST(hwloc_inputs_that_crash_hwloc_are_refused) {
  static const struct {
    const char *from, *to, *want;
  } cases[] = {
      {"complete_cpuset=\"0x00000003\"", "complete_cpuset=\",x00000003\"",
       "bad.xml:4: <object complete_cpuset=\",x00000003\">: expected an hwloc bitmap"},
      {"complete_cpuset=\"0x00000001\"", "complete_cpuste=\"0x00000001\"",
       "<object cpuset=...>: expected complete_cpuset as well"},
      {"<topology version=\"2.0\">", "<topology version=\"2.0\"><b>", "expected </b>"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t len = 0;
    char *text = slurp("hwloc_3gpu.xml", &len);
    CHECK(text != NULL);
    if (!text) return;
    replace_once(text, cases[i].from, cases[i].to);
    struct p2pkit_topo *t = NULL;
    CHECK_EQ(p2pk_topo_read_any("bad.xml", text, strlen(text), &t), P2PKIT_ERR_PARSE);
    if (!strstr(p2pkit_last_error(), cases[i].want))
      T_FAIL("case %zu: got \"%s\", want \"%s\"", i, p2pkit_last_error(), cases[i].want);
    CHECK(t == NULL);
    free(text);
  }
}

/* Found by the fuzzer: a <pci> holding a <gpu> with an unusual class became
 * a switch that a GPU pointed at, which --save then refused. NCCL itself
 * takes any <pci> with a <gpu> as a GPU, and matches classes by prefix. A
 * display device of another vendor (a BMC's VGA) is no GPU. */
TEST(nccl_gpu_decided_by_gpu_child) {
  const char text[] =
      "<system version=\"1\"><cpu numaid=\"-1\">\n"
      "<pci busid=\"0000:01:00.0\" class=\"0x032\"><gpu dev=\"0\" sm=\"70\"/></pci>\n"
      "<pci busid=\"0000:02:00.0\" class=\"0x0680\"><gpu dev=\"1\" sm=\"70\"/></pci>\n"
      "<pci busid=\"0000:03:00.0\" class=\"0x03\" vendor=\"0x1a03\"/>\n"
      "</cpu></system>";
  struct p2pkit_topo *t = NULL;
  CHECK_OK(p2pk_topo_read_nccl("odd.xml", text, sizeof text - 1, &t));
  if (!t) return;
  CHECK_EQ(t->ngpus, 2);
  CHECK_EQ(t->pci[t->gpus[0].pci].kind, P2PK_PCI_GPU);
  CHECK_EQ(t->pci[t->gpus[0].pci].class_id, 0x0320);
  CHECK_EQ(t->pci[t->gpus[1].pci].kind, P2PK_PCI_GPU);
  int idle = p2pk_topo_find_pci(t, "0000:03:00.0");
  CHECK(idle >= 0);
  if (idle >= 0) CHECK_EQ(t->pci[idle].kind, P2PK_PCI_OTHER);
  CHECK_EQ(pcie(t, 0, 1), P2PKIT_LINK_PHB);
  char *saved = write_mem(p2pk_topo_write_file, t, NULL);
  CHECK(saved != NULL);
  free(saved);
  p2pkit_topo_destroy(t);
}

/* Hand-written NCCL_TOPO_FILEs as vendors ship them: GPUs known by class
 * alone (with NVIDIA's vendor id or none), NICs as network-class <pci>,
 * named by NCCL's <net> or not at all, switches with made-up bus ids. */
TEST(nccl_vendor_files) {
  p2pkit_topo_t t = load("vendor8.nccl.xml");
  if (t) {
    CHECK_STR(t->gpus[0].busid, "0000:18:00.0");
    CHECK_STR(t->gpus[7].busid, "0000:bc:00.0");
    CHECK_EQ(t->gpus[0].cc_major, 0);         /* no <gpu sm=...> */
    CHECK_EQ(t->gpus[0].nvlinks_active, -1);  /* not "none": unknown */
    CHECK(!(t->known & P2PK_KNOW_NVLINK));
    CHECK_EQ(t->nnics, 4);
    char a[P2PK_NIC_NAME_LEN];
    CHECK_STR(p2pk_nic_label(t, 0, a, sizeof a), "0000:19:00.0");
    CHECK_STR(p2pk_nic_label(t, 2, a, sizeof a), "mlx5_2");
    CHECK_EQ(t->nics[2].speed_mbps, 400000);
    CHECK_EQ(t->nics[2].gdr, 1);
    CHECK_EQ(t->nics[0].gdr, -1);
    p2pkit_link_t l;
    for (int g = 0; g < 8; g++) {
      CHECK_EQ(p2pk_nearest_nic(t, g, &l), g / 2); /* each switch's NIC */
      CHECK_EQ(l, P2PKIT_LINK_PIX);
    }
    CHECK_EQ(p2pk_gpu_nic_link(t, 0, 1), P2PKIT_LINK_PHB);
    CHECK_EQ(p2pk_gpu_nic_link(t, 0, 3), P2PKIT_LINK_SYS);
    p2pkit_topo_destroy(t);
  }
  t = load("vendor_remote_nics.nccl.xml");
  if (t) {
    check_labels("vendor_remote_nics", t, 4, "X PIX PHB PHB  PIX X PHB PHB  PHB PHB X PIX  PHB PHB PIX X");
    CHECK_EQ(t->nnics, 2);
    p2pkit_link_t l;
    for (int g = 0; g < 4; g++) {
      CHECK_EQ(p2pk_nearest_nic(t, g, &l), 0);
      CHECK_EQ(l, P2PKIT_LINK_SYS);
    }
    p2pkit_topo_destroy(t);
  }
}

/* A partial file: <pci> without a class is a switch when it holds others,
 * a GPU with a <gpu>, a NIC with a <nic>, else a device of unknown kind. */
TEST(nccl_partial_file) {
  p2pkit_topo_t t = load("partial.nccl.xml");
  if (!t) return;
  CHECK_EQ(t->ngpus, 2);
  CHECK_STR(t->gpus[0].busid, "0000:18:00.0"); /* dev 0 first */
  CHECK_EQ(t->gpus[0].cc_major, 9);
  CHECK_STR(t->gpus[1].busid, "0000:19:00.0"); /* then by class, in bus order */
  check_labels("partial", t, 2, "X PIX  PIX X");
  CHECK_EQ(t->nnics, 1);
  CHECK_STR(t->nics[0].name, "mlx5_0");
  CHECK_EQ(p2pk_gpu_nic_link(t, 1, 0), P2PKIT_LINK_PIX);
  int sw = p2pk_topo_find_pci(t, "0000:17:00.0"), leaf = p2pk_topo_find_pci(t, "0000:1b:00.0");
  CHECK(sw >= 0 && leaf >= 0);
  if (sw >= 0) CHECK_EQ(t->pci[sw].kind, P2PK_PCI_SWITCH);
  if (leaf >= 0) CHECK_EQ(t->pci[leaf].kind, P2PK_PCI_OTHER);
  int note = 0;
  for (int i = 0; i < t->nnotes; i++) note |= strstr(t->notes[i], "4 <pci> elements have no class") != NULL;
  CHECK(note);
  p2pkit_topo_destroy(t);
}

/* Which <net> is a NIC: RDMA ports, not NCCL's socket interfaces (port 0);
 * a <nic> straight under <cpu> hangs from that CPU; two ports of one device
 * with one name are one NIC. */
TEST(nccl_nic_rules) {
  const char text[] =
      "<system version=\"1\">\n"
      " <cpu numaid=\"0\" affinity=\"0000ffff\">\n"
      "  <pci busid=\"0000:01:00.0\" class=\"0x030200\" vendor=\"0x10de\"><gpu dev=\"0\" sm=\"80\"/></pci>\n"
      "  <pci busid=\"0000:02:00.0\" class=\"0x020000\" vendor=\"0x1af4\"><nic>\n"
      "   <net name=\"eth0\" dev=\"0\" port=\"0\" gdr=\"0\" guid=\"0x0\"/></nic></pci>\n"
      "  <pci busid=\"0000:03:00.0\" class=\"0x020700\"><nic>\n"
      "   <net name=\"mlx5_0\" dev=\"1\" port=\"1\" speed=\"200000\" gdr=\"0\"/>\n"
      "   <net name=\"mlx5_0\" dev=\"2\" port=\"2\"/></nic></pci>\n"
      "  <pci busid=\"0000:04:00.0\" class=\"0x030000\" vendor=\"0x1a03\"/>\n"
      "  <nic><net name=\"eth1\" dev=\"3\" port=\"0\"/></nic>\n"
      " </cpu>\n"
      " <cpu numaid=\"1\" affinity=\"ffff0000\">\n"
      "  <nic><net name=\"mlx5_1\" dev=\"4\" port=\"1\" gdr=\"1\"/></nic>\n"
      " </cpu>\n"
      "</system>\n";
  struct p2pkit_topo *t = NULL;
  CHECK_OK(p2pk_topo_read_nccl("nics.xml", text, sizeof text - 1, &t));
  if (!t) return;
  CHECK_EQ(t->ngpus, 1); /* the ASPEED VGA is no GPU */
  CHECK_EQ(t->nnics, 2);
  CHECK_STR(t->nics[0].name, "mlx5_0");
  CHECK_EQ(t->nics[0].speed_mbps, 200000);
  CHECK_EQ(t->nics[0].gdr, 0);
  CHECK_STR(t->nics[1].name, "mlx5_1");
  CHECK_EQ(t->pci[t->nics[1].pci].kind, P2PK_PCI_HOSTBRIDGE);
  CHECK_EQ(p2pk_gpu_nic_link(t, 0, 0), P2PKIT_LINK_PHB);
  CHECK_EQ(p2pk_gpu_nic_link(t, 0, 1), P2PKIT_LINK_SYS);
  /* Written for NCCL_TOPO_FILE and read back: the same NICs, in place. */
  size_t n = 0;
  char *xml = write_mem(p2pk_topo_write_nccl, t, &n);
  if (xml) {
    CHECK(strstr(xml, "<pci busid=\"0000:03:00.0\" class=\"0x020700\">\n      <nic>\n"
                      "        <net name=\"mlx5_0\" dev=\"0\" speed=\"200000\" gdr=\"0\"/>\n") != NULL);
    CHECK(strstr(xml, "  <cpu numaid=\"1\" affinity=\"ffff0000\">\n    <nic>\n"
                      "      <net name=\"mlx5_1\" dev=\"1\" gdr=\"1\"/>\n") != NULL);
    CHECK(strstr(xml, "eth") == NULL);
    struct p2pkit_topo *r = NULL;
    CHECK_OK(p2pk_topo_read_nccl("again.xml", xml, n, &r));
    if (r) {
      CHECK_EQ(r->nnics, 2);
      CHECK_EQ(p2pk_gpu_nic_link(r, 0, 1), P2PKIT_LINK_SYS);
      p2pkit_topo_destroy(r);
    }
  }
  free(xml);
  p2pkit_topo_destroy(t);
  /* Two unnamed ports of one device: one NIC (two would make a model that
   * --save refuses). */
  const char ports[] =
      "<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\" class=\"0x0302\">"
      "<gpu dev=\"0\"/></pci><pci busid=\"0000:02:00.0\" class=\"0x0207\"><nic><net port=\"1\"/>"
      "<net port=\"2\"/></nic></pci></cpu></system>";
  CHECK_OK(p2pk_topo_read_nccl("ports.xml", ports, sizeof ports - 1, &t));
  if (t) {
    CHECK_EQ(t->nnics, 1);
    char *saved = write_mem(p2pk_topo_write_file, t, NULL);
    CHECK(saved != NULL);
    free(saved);
    p2pkit_topo_destroy(t);
  }
}

TEST(format_detection) {
  struct p2pkit_topo *t = NULL;
  const char p2pk[] = "\n\n  p2pkit-topo 1\nnuma os=0\n";
  CHECK_OK(p2pk_topo_read_any("a", p2pk, sizeof p2pk - 1, &t));
  if (t) CHECK_STR(t->format, "p2pkit");
  p2pkit_topo_destroy(t);
  t = NULL;
  const char nccl[] = "<!-- dump -->\n<system version=\"1\"></system>";
  CHECK_OK(p2pk_topo_read_any("b", nccl, sizeof nccl - 1, &t));
  if (t) {
    CHECK_STR(t->format, "nccl-xml");
    CHECK_EQ(t->ngpus, 0);
  }
  p2pkit_topo_destroy(t);
  t = NULL;
  /* Past a comment holding tags, a byte order mark, a DOCTYPE with a subset. */
  const char commented[] = "\xef\xbb\xbf<?xml version=\"1.0\"?>\n<!-- GPUs as <pci class=...> -->\n"
                           "<!DOCTYPE system [ <!ENTITY x \"<y>\"> ]>\n<system version=\"1\"></system>";
  CHECK_EQ(p2pk_topo_detect(commented, sizeof commented - 1), P2PK_FMT_NCCL);
  const char hwloc[] = "<!-- <system> --><topology version=\"2.0\">";
  CHECK_EQ(p2pk_topo_detect(hwloc, sizeof hwloc - 1), P2PK_FMT_HWLOC);
  const char unclosed[] = "<!-- <system version=\"1\">";
  CHECK_EQ(p2pk_topo_detect(unclosed, sizeof unclosed - 1), P2PK_FMT_UNKNOWN);
  const char prefix[] = "<systemx version=\"1\"/>";
  CHECK_EQ(p2pk_topo_detect(prefix, sizeof prefix - 1), P2PK_FMT_UNKNOWN);
  const char junk[] = "GPU0 GPU1\n";
  CHECK_EQ(p2pk_topo_read_any("c", junk, sizeof junk - 1, &t), P2PKIT_ERR_PARSE);
  CHECK(t == NULL);
}

/* P2PKIT_TOPO_FILE: p2pkit_topo_discover reads the recorded machine, as the
 * `p2pkit` command does (no GPU needed), and its errors name the setting. */
TEST(discover_honours_topo_file) {
  char path[512];
  snprintf(path, sizeof path, "%s/h200x2.p2pkit", P2PK_TEST_DATA);
  setenv("P2PKIT_TOPO_FILE", path, 1);
  p2pk_param_reset();
  p2pkit_topo_t t = NULL;
  CHECK_OK(p2pkit_topo_discover(&t));
  if (t) {
    CHECK_STR(t->format, "p2pkit");
    CHECK_STR(t->source, path);
    CHECK_EQ(p2pkit_topo_gpu_count(t), 2);
    p2pkit_gpu_t g;
    CHECK_OK(p2pkit_topo_gpu(t, 1, &g));
    CHECK_STR(g.busid, "0000:00:07.0");
    p2pkit_topo_destroy(t);
  }
  snprintf(path, sizeof path, "%s/no-such-machine.p2pkit", P2PK_TEST_DATA);
  setenv("P2PKIT_TOPO_FILE", path, 1);
  p2pk_param_reset();
  t = NULL;
  CHECK_EQ(p2pkit_topo_discover(&t), P2PKIT_ERR_IO);
  CHECK(t == NULL);
  const char *e = p2pkit_last_error();
  if (strncmp(e, "P2PKIT_TOPO_FILE: ", 18) != 0 || !strstr(e, "no-such-machine.p2pkit"))
    T_FAIL("error '%s' does not name the setting and the file", e);
  unsetenv("P2PKIT_TOPO_FILE");
  p2pk_param_reset();
}

TEST(bus_id_spellings_the_readers_rely_on) {
  char out[P2PK_BUSID_LEN];
  CHECK_EQ(p2pk_busid_normalize("00000000:07:00.0", out), 0);
  CHECK_STR(out, "0000:07:00.0");
  CHECK_EQ(p2pk_busid_normalize("0000:C1:00.0", out), 0);
  CHECK_STR(out, "0000:c1:00.0");
  /* NCCL's NVSwitch target is not a bus id: it is kept as written. */
  CHECK_EQ(p2pk_busid_normalize("fffffff:ff:ff.0", out), -1);
  CHECK_EQ(p2pk_busid_normalize("numa0", out), -1);
}

T_MAIN(T_CASE(every_fixture_classifies_every_pair), T_CASE(nvswitch_pcie_classes_underneath),
       T_CASE(fixture_fields_reach_the_public_api), T_CASE(p2p_not_ok_pair),
       T_CASE(p2pkit_round_trip_every_field), T_CASE(p2pkit_round_trip_fixtures),
       T_CASE(save_and_load_through_the_public_api), T_CASE(writer_refuses_what_it_cannot_read_back),
       T_CASE(p2pkit_errors_name_file_line_and_expectation), T_CASE(p2pkit_errors_binary_and_overlong_input),
       T_CASE(load_error_names_the_path), T_CASE(p2pkit_cut_short_is_refused),
       T_CASE(load_refuses_a_machine_without_gpu), T_CASE(nccl_dump_of_the_device_machine),
       T_CASE(nccl_two_sockets_nested_switches_direct_nvlink), T_CASE(nccl_round_trip_keeps_classes),
       T_CASE(nccl_writer_speaks_nccls_dialect), T_CASE(nccl_errors_name_file_line_and_expectation),
       T_CASE(xml_reader_entities_quotes_comments_lines), T_CASE(xml_reader_limits_and_unterminated_buffers),
       T_CASE(hwloc_fixture_loads), T_CASE(hwloc_inputs_that_crash_hwloc_are_refused),
       T_CASE(hwloc_bitmaps_as_hwloc_reads_them), T_CASE(hwloc_xml_of_a_newer_hwloc),
       T_CASE(hwloc_nics_fixture),
       T_CASE(nccl_gpu_decided_by_gpu_child), T_CASE(nccl_vendor_files), T_CASE(nccl_partial_file),
       T_CASE(nccl_nic_rules), T_CASE(format_detection), T_CASE(bus_id_spellings_the_readers_rely_on),
       T_CASE(discover_honours_topo_file))
