/* SPDX-License-Identifier: BSD-3-Clause */
/* The classifier on machines built by hand: every nvidia-smi class, NVLink
 * direct and through NVSwitch, expected rates, sentences, bus id spellings,
 * GPU-NIC classes and the nearest NIC. */
#include "test.h"
#include "topo/topo.h"

/* Host bridge on `numa`; returns its index. */
static int hb(struct p2pkit_topo *t, const char *id, int numa) {
  int i = p2pk_topo_add_pci(t, P2PK_PCI_HOSTBRIDGE, id, -1);
  t->pci[i].numa = numa;
  return i;
}

static int gpu(struct p2pkit_topo *t, const char *busid, int parent) {
  int g = p2pk_topo_add_gpu(t, busid);
  int p = p2pk_topo_add_pci(t, P2PK_PCI_GPU, busid, parent);
  t->gpus[g].pci = p;
  t->pci[p].link_gen = t->pci[p].max_gen = 5;
  t->pci[p].link_width = t->pci[p].max_width = 16;
  return g;
}

static struct p2pkit_topo *machine(void) {
  struct p2pkit_topo *t = p2pk_topo_new("test", "hand-built");
  t->known = P2PK_KNOW_PCI_TREE | P2PK_KNOW_HOSTBRIDGES | P2PK_KNOW_NUMA;
  p2pk_topo_add_numa(t, 0, "0-15");
  p2pk_topo_add_numa(t, 1, "16-31");
  return t;
}

static const char *label(struct p2pkit_topo *t, int a, int b) {
  static p2pkit_pair_t p;
  CHECK_OK(p2pkit_topo_pair(t, a, b, &p));
  return p.label;
}

TEST(every_pcie_class) {
  struct p2pkit_topo *t = machine();
  int h0 = hb(t, "0000:00", 0), h1 = hb(t, "0000:40", 0), h2 = hb(t, "0000:80", 1);
  int sw = p2pk_topo_add_pci(t, P2PK_PCI_SWITCH, "0000:01:00.0", h0);
  int sw2 = p2pk_topo_add_pci(t, P2PK_PCI_SWITCH, "0000:05:00.0", sw);
  int g0 = gpu(t, "0000:02:00.0", sw);   /* under sw */
  int g1 = gpu(t, "0000:03:00.0", sw);   /* same switch as g0: PIX */
  int g2 = gpu(t, "0000:06:00.0", sw2);  /* nested under sw: PXB with g0 */
  int g3 = gpu(t, "0000:10:00.0", h0);   /* on the host bridge: PHB with g0 */
  int g4 = gpu(t, "0000:41:00.0", h1);   /* other host bridge, same NUMA: NODE */
  int g5 = gpu(t, "0000:81:00.0", h2);   /* other socket: SYS */
  CHECK_STR(label(t, g0, g0), "X");
  CHECK_STR(label(t, g0, g1), "PIX");
  CHECK_STR(label(t, g1, g0), "PIX");
  CHECK_STR(label(t, g0, g2), "PXB");
  CHECK_STR(label(t, g2, g1), "PXB");
  CHECK_STR(label(t, g0, g3), "PHB");
  CHECK_STR(label(t, g2, g3), "PHB");
  CHECK_STR(label(t, g0, g4), "NODE");
  CHECK_STR(label(t, g3, g4), "NODE");
  CHECK_STR(label(t, g0, g5), "SYS");
  CHECK_STR(label(t, g5, g4), "SYS");
  CHECK_OK(p2pk_topo_validate(t));
  p2pkit_topo_destroy(t);
}

TEST(host_bridges_unknown_gives_unknown_not_a_guess) {
  struct p2pkit_topo *t = machine();
  t->known &= ~P2PK_KNOW_HOSTBRIDGES;
  int h0 = hb(t, "0000:00", 0), h1 = hb(t, "0000:40", 0);
  gpu(t, "0000:01:00.0", h0);
  gpu(t, "0000:41:00.0", h1);
  p2pkit_pair_t p;
  CHECK_OK(p2pkit_topo_pair(t, 0, 1, &p));
  CHECK_EQ(p.pcie, P2PKIT_LINK_UNKNOWN);
  p2pkit_topo_destroy(t);
}

static void nvlink(struct p2pkit_topo *t, int g, p2pk_nvl_peer peer, const char *busid, int count) {
  p2pk_gpu *x = &t->gpus[g];
  x->groups[x->ngroups++] = (p2pk_nvl_group){peer, "", count, 4};
  snprintf(x->groups[x->ngroups - 1].peer_busid, P2PK_BUSID_LEN, "%s", busid);
  x->nvlinks_active = x->nvlinks_present = 0;
  for (int i = 0; i < x->ngroups; i++) x->nvlinks_active += x->groups[i].count;
  x->nvlinks_present = x->nvlinks_active;
  x->nvlink_gbps = 26.5625;
}

TEST(nvlink_direct_and_nvswitch) {
  struct p2pkit_topo *t = machine();
  t->known |= P2PK_KNOW_NVLINK;
  int h0 = hb(t, "0000:00", 0), h2 = hb(t, "0000:80", 1);
  int a = gpu(t, "0000:06:00.0", h0), b = gpu(t, "0000:07:00.0", h0);
  int c = gpu(t, "0000:81:00.0", h2), d = gpu(t, "0000:82:00.0", h2);
  /* a-b: 4 direct links, a-c: 8 direct links; c and d on a switch with 18 and 12. */
  nvlink(t, a, P2PK_NVL_GPU, "0000:07:00.0", 4);
  nvlink(t, a, P2PK_NVL_GPU, "0000:81:00.0", 8);
  nvlink(t, b, P2PK_NVL_GPU, "0000:06:00.0", 4);
  nvlink(t, c, P2PK_NVL_GPU, "0000:06:00.0", 8);
  nvlink(t, c, P2PK_NVL_SWITCH, "ffffffff:ff:ff.0", 18);
  nvlink(t, d, P2PK_NVL_SWITCH, "ffffffff:ff:ff.0", 12);
  CHECK_STR(label(t, a, b), "NV4");
  CHECK_STR(label(t, b, a), "NV4");
  CHECK_STR(label(t, a, c), "NV8");
  CHECK_STR(label(t, c, d), "NV12"); /* the narrower side of the switch */
  CHECK_STR(label(t, b, c), "SYS");  /* no NVLink between them: the PCIe path */
  CHECK_STR(label(t, a, d), "SYS");
  p2pkit_pair_t p;
  CHECK_OK(p2pkit_topo_pair(t, a, c, &p));
  CHECK_EQ(p.link, P2PKIT_LINK_NVLINK);
  CHECK_EQ(p.pcie, P2PKIT_LINK_SYS);
  CHECK_NEAR(p.line_gbps, 8 * 26.5625, 1e-9);
  CHECK(p.expected_gbps > 0.7 * p.line_gbps && p.expected_gbps < p.line_gbps);
  p2pkit_topo_destroy(t);
}

TEST(p2p_status_drives_sentence_and_rate) {
  struct p2pkit_topo *t = machine();
  t->known |= P2PK_KNOW_NVLINK | P2PK_KNOW_P2P;
  int h0 = hb(t, "0000:00", 0), h2 = hb(t, "0000:80", 1);
  int a = gpu(t, "0000:00:06.0", h0), b = gpu(t, "0000:00:07.0", h0), c = gpu(t, "0000:81:00.0", h2);
  nvlink(t, a, P2PK_NVL_SWITCH, "fffffff:ff:ff.0", 18);
  nvlink(t, b, P2PK_NVL_SWITCH, "fffffff:ff:ff.0", 18);
  for (int x = 0; x < 3; x++)
    for (int y = 0; y < 3; y++) {
      int ok = (x != c && y != c);
      t->p2p[x][y].cuda_access = ok;
      for (int k = 0; k < P2PKIT_P2P_CAPS; k++) t->p2p[x][y].nvml[k] = ok ? P2PKIT_P2P_OK : P2PKIT_P2P_CNS;
    }
  char s[512];
  p2pk_pair_sentence(t, a, b, s, sizeof s);
  CHECK_STR(s, "GPU0 -> GPU1: direct P2P over 18 NVLinks (NV18), about 392 GB/s expected");
  p2pk_pair_sentence(t, a, c, s, sizeof s);
  CHECK(strstr(s, "GPU0 -> GPU2: no P2P (SYS: the chipset does not support it): staged through "
                  "host memory, crossing PCIe twice, at most the PCIe rate (about 55 GB/s)") == s);
  p2pkit_pair_t p;
  CHECK_OK(p2pkit_topo_pair(t, c, a, &p));
  CHECK_EQ(p.p2p, 0);
  CHECK_NEAR(p.line_gbps, p2pk_pcie_gbps(5, 16), 1e-9);
  CHECK_EQ(p.caps[P2PKIT_P2P_READ], P2PKIT_P2P_CNS);
  p2pkit_topo_destroy(t);
}

TEST(busid_spellings) {
  char out[P2PK_BUSID_LEN];
  CHECK_EQ(p2pk_busid_normalize("00000000:00:06.0", out), 0);
  CHECK_STR(out, "0000:00:06.0");
  CHECK_EQ(p2pk_busid_normalize("0000:1B:00.0", out), 0);
  CHECK_STR(out, "0000:1b:00.0");
  CHECK_EQ(p2pk_busid_normalize("3:0.1", out), 0);
  CHECK_STR(out, "0000:03:00.1");
  CHECK_EQ(p2pk_busid_normalize("0000:40", out), 0);
  CHECK_STR(out, "0000:40");
  const char *bad[] = {"", "zz:00.0", "0000:00:20.0", "0000:100:00.0", "0000:00:00.8", "1:2:3:4",
                       "0000:00:06.0x", "fffffff:ff:ff.0"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (p2pk_busid_normalize(bad[i], out) != -1) T_FAIL("accepted '%s'", bad[i]);
}

TEST(pcie_rates) {
  CHECK_NEAR(p2pk_pcie_gbps(5, 16), 63.0, 0.1);
  CHECK_NEAR(p2pk_pcie_gbps(4, 16), 31.5, 0.1);
  CHECK_NEAR(p2pk_pcie_gbps(3, 8), 7.88, 0.01);
  CHECK_EQ(p2pk_pcie_gbps(0, 16), 0);
  CHECK_EQ(p2pk_pcie_gbps(9, 16), 0);
}

TEST(validate_rejects_loops_and_bad_refs) {
  struct p2pkit_topo *t = machine();
  int h = hb(t, "0000:00", 0);
  int s1 = p2pk_topo_add_pci(t, P2PK_PCI_SWITCH, "0000:01:00.0", h);
  int s2 = p2pk_topo_add_pci(t, P2PK_PCI_SWITCH, "0000:02:00.0", s1);
  CHECK_OK(p2pk_topo_validate(t));
  t->pci[s1].parent = s2;
  CHECK_EQ(p2pk_topo_validate(t), P2PKIT_ERR_PARSE);
  CHECK(strstr(p2pkit_last_error(), "loop") != NULL);
  t->pci[s1].parent = 77;
  CHECK_EQ(p2pk_topo_validate(t), P2PKIT_ERR_PARSE);
  p2pkit_topo_destroy(t);
}

TEST(public_accessors_check_arguments) {
  struct p2pkit_topo *t = machine();
  int h = hb(t, "0000:00", 0);
  gpu(t, "0000:01:00.0", h);
  p2pkit_pair_t p;
  p2pkit_gpu_t g;
  CHECK_EQ(p2pkit_topo_pair(t, 0, 1, &p), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pkit_topo_pair(t, -1, 0, &p), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pkit_topo_pair(NULL, 0, 0, &p), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pkit_topo_gpu(t, 1, &g), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_OK(p2pkit_topo_gpu(t, 0, &g));
  CHECK_EQ(g.numa, 0);
  CHECK_STR(g.cpus, "0-15");
  CHECK_EQ(g.pcie_gen, 5);
  CHECK_EQ(p2pkit_topo_gpu_count(t), 1);
  CHECK_EQ(p2pkit_topo_gpu_count(NULL), 0);
  p2pkit_topo_destroy(t);
}

static int nic(struct p2pkit_topo *t, const char *name, const char *busid, int parent) {
  int p = busid ? p2pk_topo_add_pci(t, P2PK_PCI_OTHER, busid, parent) : parent;
  if (busid) t->pci[p].class_id = 0x0207;
  return p2pk_topo_add_nic(t, name, p);
}

static const char *nic_label(struct p2pkit_topo *t, int g, int n) {
  p2pkit_link_t l;
  CHECK_OK(p2pkit_topo_gpu_nic(t, g, n, &l));
  return p2pkit_link_name(l);
}

/* Every class a NIC can be from a GPU, as nvidia-smi prints it; a NIC known
 * only by its CPU (NCCL's <nic> under <cpu>) is PHB from that CPU's GPUs. */
TEST(gpu_nic_classes_and_nearest) {
  struct p2pkit_topo *t = machine();
  int h0 = hb(t, "0000:00", 0), h1 = hb(t, "0000:40", 0), h2 = hb(t, "0000:80", 1);
  int sw = p2pk_topo_add_pci(t, P2PK_PCI_SWITCH, "0000:01:00.0", h0);
  int sw2 = p2pk_topo_add_pci(t, P2PK_PCI_SWITCH, "0000:05:00.0", sw);
  int g0 = gpu(t, "0000:02:00.0", sw);
  int g1 = gpu(t, "0000:81:00.0", h2);
  int n_pix = nic(t, "mlx5_0", "0000:03:00.0", sw);  /* beside GPU0 on its switch */
  int n_pxb = nic(t, "mlx5_1", "0000:06:00.0", sw2); /* one switch further down */
  int n_phb = nic(t, "", "0000:10:00.0", h0);        /* on GPU0's host bridge, unnamed */
  int n_node = nic(t, "mlx5_3", "0000:41:00.0", h1); /* other host bridge, same socket */
  int n_cpu = nic(t, "mlx5_4", NULL, h2);            /* known only by GPU1's CPU */
  CHECK_STR(nic_label(t, g0, n_pix), "PIX");
  CHECK_STR(nic_label(t, g0, n_pxb), "PXB");
  CHECK_STR(nic_label(t, g0, n_phb), "PHB");
  CHECK_STR(nic_label(t, g0, n_node), "NODE");
  CHECK_STR(nic_label(t, g0, n_cpu), "SYS");
  CHECK_STR(nic_label(t, g1, n_cpu), "PHB");
  CHECK_STR(nic_label(t, g1, n_pix), "SYS");
  CHECK_EQ(p2pk_nic_nic_link(t, n_pix, n_pix), P2PKIT_LINK_SELF);
  CHECK_EQ(p2pk_nic_nic_link(t, n_pix, n_pxb), P2PKIT_LINK_PXB);
  CHECK_EQ(p2pk_nic_nic_link(t, n_phb, n_cpu), P2PKIT_LINK_SYS);
  p2pkit_link_t l;
  CHECK_EQ(p2pk_nearest_nic(t, g0, &l), n_pix);
  CHECK_EQ(l, P2PKIT_LINK_PIX);
  CHECK_EQ(p2pk_nearest_nic(t, g1, &l), n_cpu);
  CHECK_EQ(l, P2PKIT_LINK_PHB);
  char buf[512];
  CHECK_STR(p2pk_nic_label(t, n_phb, buf, sizeof buf), "0000:10:00.0");
  p2pk_nic_sentence(t, g1, buf, sizeof buf);
  CHECK_STR(buf, "GPU1 -> NIC4 (mlx5_4): the nearest NIC, through the PCIe host bridge (PHB): GPUDirect "
                 "RDMA would cross the CPU (NCCL uses it only up to PXB by default)");
  p2pkit_nic_t info;
  CHECK_OK(p2pkit_topo_nic(t, n_cpu, &info));
  CHECK_STR(info.name, "mlx5_4");
  CHECK_STR(info.busid, ""); /* no PCI device known */
  CHECK_EQ(info.numa, 1);
  CHECK_OK(p2pkit_topo_nic(t, n_pxb, &info));
  CHECK_STR(info.busid, "0000:06:00.0");
  CHECK_EQ(info.numa, 0);
  CHECK_EQ(p2pkit_topo_nic_count(t), 5);
  CHECK_EQ(p2pkit_topo_nic(t, 5, &info), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pkit_topo_gpu_nic(t, 2, 0, &l), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_OK(p2pk_topo_validate(t));
  t->nics[0].pci = t->npci;
  CHECK_EQ(p2pk_topo_validate(t), P2PKIT_ERR_PARSE);
  p2pkit_topo_destroy(t);
}

TEST(no_nic_no_nearest) {
  struct p2pkit_topo *t = machine();
  gpu(t, "0000:02:00.0", hb(t, "0000:00", 0));
  p2pkit_link_t l = P2PKIT_LINK_PIX;
  CHECK_EQ(p2pk_nearest_nic(t, 0, &l), -1);
  CHECK_EQ(l, P2PKIT_LINK_UNKNOWN);
  char buf[64] = "x";
  p2pk_nic_sentence(t, 0, buf, sizeof buf);
  CHECK_STR(buf, "");
  CHECK_EQ(p2pkit_topo_nic_count(t), 0);
  CHECK_EQ(p2pkit_topo_nic_count(NULL), 0);
  p2pkit_topo_destroy(t);
}

T_MAIN(T_CASE(every_pcie_class), T_CASE(gpu_nic_classes_and_nearest), T_CASE(no_nic_no_nearest),
       T_CASE(host_bridges_unknown_gives_unknown_not_a_guess),
       T_CASE(nvlink_direct_and_nvswitch), T_CASE(p2p_status_drives_sentence_and_rate),
       T_CASE(busid_spellings), T_CASE(pcie_rates), T_CASE(validate_rejects_loops_and_bad_refs),
       T_CASE(public_accessors_check_arguments))
