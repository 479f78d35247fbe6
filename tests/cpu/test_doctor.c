/* SPDX-License-Identifier: BSD-3-Clause */
/* p2pkit doctor on recorded machines: each scenario of tests/data/sysfs is a
 * machine.txt (built into a /sys + /proc tree at test time by
 * scripts/make_sysfs_fixtures.py), a recorded topology (topo.p2pkit) and,
 * for some, an NCCL debug log. Each test runs the analysis and checks the
 * diagnosis: levels, subjects, and the words that carry the cause and fix. */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/param.h"
#include "doctor/doctor.h"
#include "doctor/nccl_log.h"
#include "doctor/sysfs.h"
#include "test.h"
#include "topo/topo.h"

#ifndef P2PK_CLI
#define P2PK_CLI "p2pkit"
#endif

static char fx_dir[256];

static void remove_fixtures(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", fx_dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", fx_dir);
}

/* The recorded trees, generated once per run. */
static const char *root_of(const char *scenario) {
  static char path[512];
  if (!fx_dir[0]) {
    if (system("python3 -c pass 2>/dev/null") != 0) {
      printf("SKIP: python3 is needed to build the recorded sysfs trees\n");
      exit(77);
    }
    snprintf(fx_dir, sizeof fx_dir, "/tmp/p2pk-doctor-fx-XXXXXX");
    if (!mkdtemp(fx_dir)) {
      perror("mkdtemp");
      exit(1);
    }
    atexit(remove_fixtures);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "python3 %s/../../scripts/make_sysfs_fixtures.py %s/sysfs %s",
             P2PK_TEST_DATA, P2PK_TEST_DATA, fx_dir);
    if (system(cmd) != 0) {
      fprintf(stderr, "fixture generator failed: %s\n", cmd);
      exit(1);
    }
  }
  snprintf(path, sizeof path, "%s/%s", fx_dir, scenario);
  return path;
}

static struct p2pkit_topo *topo_of(const char *scenario) {
  char path[512];
  snprintf(path, sizeof path, "%s/sysfs/%s/topo.p2pkit", P2PK_TEST_DATA, scenario);
  p2pkit_topo_t t = NULL;
  CHECK_OK(p2pkit_topo_load(path, &t));
  return t;
}

static p2pk_nccl_log *nccl_of_text(const char *text) {
  p2pk_nccl_log *l = calloc(1, sizeof *l);
  p2pk_nccl_log_parse(text, strlen(text), l);
  return l;
}

static p2pk_nccl_log *nccl_of(const char *scenario) {
  char path[512];
  snprintf(path, sizeof path, "%s/sysfs/%s/nccl.log", P2PK_TEST_DATA, scenario);
  FILE *f = fopen(path, "rb");
  CHECK(f != NULL);
  if (!f) return NULL;
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  return nccl_of_text(buf);
}

/* Analyse a recorded machine; the caller frees f. */
static void analyse(const char *scenario, struct p2pkit_topo *t, const p2pk_nccl_log *nccl,
                    p2pk_findings *f) {
  p2pk_doc_input in;
  memset(&in, 0, sizeof in);
  in.topo = t;
  in.topo_error = "no NVIDIA driver: test";
  in.sysfs_root = root_of(scenario);
  in.nccl = nccl;
  in.bw_skip = "a recorded machine";
  in.nccl_skip = "no log recorded";
  p2pk_findings_init(f);
  CHECK_OK(p2pk_doctor_analyze(&in, f));
}

static const p2pk_finding *want(const p2pk_findings *f, const char *check, const char *subject,
                                p2pk_doc_level level) {
  const p2pk_finding *x = p2pk_findings_find(f, check, subject);
  if (!x) {
    T_FAIL("no '%s' finding for %s", check, subject);
    return NULL;
  }
  if (x->level != level)
    T_FAIL("'%s' for %s is %s, wanted %s: %s", check, subject, p2pk_doc_level_name(x->level),
           p2pk_doc_level_name(level), x->reason);
  return x;
}

#define HAS(x, field, text)                                                       \
  do {                                                                            \
    if ((x) && !strstr((x)->field, (text)))                                        \
      T_FAIL("%s/%s: \"%s\" lacks \"%s\"", (x)->check, (x)->subject, (x)->field, (text)); \
  } while (0)

static void dump(const p2pk_findings *f) {
  if (getenv("P2PK_TEST_VERBOSE")) p2pk_doctor_print_text(f, "test", stdout);
}

/* --- the sysfs reader on a recorded tree --------------------------------------- */

TEST(sysfs_reader_on_a_recorded_tree) {
  char root[512];
  snprintf(root, sizeof root, "%s", root_of("acs_switch"));
  char chain[P2PK_SYSFS_MAX_CHAIN][20];
  CHECK_EQ(p2pk_sysfs_pci_chain(root, "0000:03:00.0", chain, P2PK_SYSFS_MAX_CHAIN), 3);
  CHECK_STR(chain[0], "0000:00:01.0");
  CHECK_STR(chain[1], "0000:01:00.0");
  CHECK_STR(chain[2], "0000:02:00.0");
  CHECK_EQ(p2pk_sysfs_pci_chain(root, "0000:00:01.0", chain, P2PK_SYSFS_MAX_CHAIN), 0);
  CHECK_EQ(p2pk_sysfs_pci_chain(root, "0000:09:00.0", chain, P2PK_SYSFS_MAX_CHAIN), -1);
  char gpus[8][20];
  CHECK_EQ(p2pk_sysfs_nvidia_gpus(root, gpus, 8), 2); /* the switch ports are not GPUs */
  CHECK_STR(gpus[0], "0000:03:00.0");
  CHECK_STR(gpus[1], "0000:04:00.0");
  p2pk_sysfs_link l;
  CHECK_EQ(p2pk_sysfs_pci_link(root, "0000:03:00.0", &l), 0);
  CHECK_EQ(l.gen, 4);
  CHECK_EQ(l.width, 16);
  CHECK_EQ(l.max_gen, 4);
  CHECK_EQ(l.numa, 0);
  p2pk_acs a;
  p2pk_sysfs_acs(root, "0000:02:01.0", &a);
  CHECK_EQ(a.state, P2PK_ACS_PRESENT);
  CHECK_EQ(a.ctrl, P2PK_ACS_SV | P2PK_ACS_RR | P2PK_ACS_CR | P2PK_ACS_UF);
  CHECK_EQ(a.port_type, 6);
  p2pk_sysfs_acs(root_of("acs_noroot"), "0000:02:01.0", &a);
  CHECK_EQ(a.state, P2PK_ACS_NO_ROOT);
  char type[32];
  CHECK_EQ(p2pk_sysfs_iommu_group(root, "0000:04:00.0"), 31);
  CHECK_EQ(p2pk_sysfs_iommu_type(root, "0000:04:00.0", type, sizeof type), 0);
  CHECK_STR(type, "identity");
  CHECK_EQ(p2pk_sysfs_iommu_type(root, "0000:02:00.0", type, sizeof type), -1);
  p2pk_host_facts h;
  p2pk_sysfs_host(root, &h);
  CHECK_EQ(h.vm, 0);
  CHECK_EQ(h.cpuinfo_read, 1);
  CHECK_EQ(h.iommu_units, 2);
  CHECK_STR(h.iommu_names[0] == 'd' ? "dmar" : "?", "dmar");
  CHECK_STR(h.cmdline_iommu, "intel_iommu=on iommu=pt");
  p2pk_sysfs_host(root_of("vm_h200"), &h);
  CHECK_EQ(h.vm, 1);
  CHECK(strstr(h.vm_evidence, "hypervisor") != NULL);
  CHECK_EQ(h.iommu_units, 0);
  /* A root with a trailing slash reads the same tree. */
  char slash[600];
  snprintf(slash, sizeof slash, "%s/", root);
  CHECK_EQ(p2pk_sysfs_pci_chain(slash, "0000:04:00.0", chain, P2PK_SYSFS_MAX_CHAIN), 3);
}

/* --- the scenarios ------------------------------------------------------------ */

TEST(clean_machine_is_all_ok) {
  struct p2pkit_topo *t = topo_of("clean");
  p2pk_nccl_log *nccl = nccl_of("clean");
  p2pk_findings f;
  analyse("clean", t, nccl, &f);
  dump(&f);
  CHECK_EQ(p2pk_findings_count(&f, P2PK_DOC_WARN), 0);
  CHECK_EQ(p2pk_findings_count(&f, P2PK_DOC_FAIL), 0);
  CHECK_EQ(p2pk_doctor_exit_code(&f), 0);
  const p2pk_finding *x = want(&f, "driver", "system", P2PK_DOC_OK);
  HAS(x, reason, "550.54.15");
  HAS(x, reason, "2x NVIDIA A100 80GB PCIe");
  x = want(&f, "vm", "system", P2PK_DOC_OK);
  HAS(x, reason, "bare metal");
  x = want(&f, "iommu", "system", P2PK_DOC_OK);
  HAS(x, reason, "no IOMMU");
  x = want(&f, "pcie-link", "GPU0", P2PK_DOC_OK);
  HAS(x, reason, "Gen4 x16");
  want(&f, "nvlink", "GPU1", P2PK_DOC_OK);
  x = want(&f, "p2p", "GPU0-GPU1", P2PK_DOC_OK);
  HAS(x, reason, "PIX");
  x = want(&f, "acs", "GPU0-GPU1", P2PK_DOC_OK);
  HAS(x, reason, "2 bridges"); /* the two downstream ports, not the shared upstream one */
  want(&f, "bandwidth", "system", P2PK_DOC_SKIP);
  x = want(&f, "nccl", "NCCL", P2PK_DOC_OK);
  HAS(x, reason, "2.21.5+cuda12.4");
  x = want(&f, "nccl", "GPU0-GPU1", P2PK_DOC_OK);
  HAS(x, reason, "P2P/CUMEM");
  HAS(x, reason, "4 connections");
  p2pk_findings_free(&f);
  free(nccl);
  p2pkit_topo_destroy(t);
}

TEST(acs_on_a_switch) {
  struct p2pkit_topo *t = topo_of("acs_switch");
  p2pk_findings f;
  analyse("acs_switch", t, NULL, &f);
  dump(&f);
  /* The driver says P2P works; ACS sends it through the root complex. */
  want(&f, "p2p", "GPU0-GPU1", P2PK_DOC_OK);
  const p2pk_finding *x = want(&f, "acs", "GPU0-GPU1", P2PK_DOC_WARN);
  HAS(x, reason, "RR");
  HAS(x, reason, "CR");
  HAS(x, reason, "2 switch downstream ports");
  HAS(x, reason, "0000:02:00.0, 0000:02:01.0");
  HAS(x, action, "setpci -s 0000:02:00.0 ECAP_ACS+0x6.w=0000");
  HAS(x, action, "setpci -s 0000:02:01.0 ECAP_ACS+0x6.w=0000");
  /* The root port above the switch is not on the path between them. */
  if (x && strstr(x->reason, "0000:00:01.0")) T_FAIL("root port listed: %s", x->reason);
  x = want(&f, "iommu", "system", P2PK_DOC_OK);
  HAS(x, reason, "passthrough");
  HAS(x, reason, "iommu=pt");
  CHECK_EQ(p2pk_doctor_exit_code(&f), 1);
  p2pk_findings_free(&f);

  /* Where the driver turned P2P off, ACS is the cause: FAIL. */
  for (int a = 0; a < 2; a++) t->p2p[a][1 - a].cuda_access = 0;
  analyse("acs_switch", t, NULL, &f);
  want(&f, "p2p", "GPU0-GPU1", P2PK_DOC_FAIL);
  x = want(&f, "acs", "GPU0-GPU1", P2PK_DOC_FAIL);
  HAS(x, reason, "which is why");
  CHECK_EQ(p2pk_doctor_exit_code(&f), 2);
  p2pk_findings_free(&f);
  p2pkit_topo_destroy(t);
}

TEST(acs_without_root_says_so) {
  struct p2pkit_topo *t = topo_of("acs_switch");
  p2pk_findings f;
  analyse("acs_noroot", t, NULL, &f);
  dump(&f);
  const p2pk_finding *x = want(&f, "acs", "GPU0-GPU1", P2PK_DOC_SKIP);
  HAS(x, reason, "needs root");
  HAS(x, reason, "different IOMMU groups, 30 and 31");
  HAS(x, action, "sudo p2pkit doctor");
  CHECK_EQ(p2pk_doctor_exit_code(&f), 0);
  p2pk_findings_free(&f);
  p2pkit_topo_destroy(t);
}

TEST(iommu_in_translated_mode) {
  struct p2pkit_topo *t = topo_of("iommu_translated");
  p2pk_findings f;
  analyse("iommu_translated", t, NULL, &f);
  dump(&f);
  const p2pk_finding *x = want(&f, "p2p", "GPU0-GPU1", P2PK_DOC_FAIL);
  HAS(x, reason, "CNS");
  HAS(x, action, "cause below");
  x = want(&f, "iommu", "GPU0-GPU1", P2PK_DOC_WARN);
  HAS(x, reason, "DMA-FQ");
  HAS(x, action, "iommu=pt");
  x = want(&f, "iommu", "system", P2PK_DOC_OK);
  HAS(x, reason, "translated");
  HAS(x, reason, "intel_iommu=on");
  /* Root ports without an ACS capability redirect nothing. */
  x = want(&f, "acs", "GPU0-GPU1", P2PK_DOC_OK);
  HAS(x, reason, "2 bridges");
  CHECK(p2pk_findings_find(&f, "sockets", "GPU0-GPU1") == NULL);
  CHECK(p2pk_findings_find(&f, "vm", "GPU0-GPU1") == NULL);
  CHECK_EQ(p2pk_doctor_exit_code(&f), 2);
  p2pk_findings_free(&f);
  p2pkit_topo_destroy(t);
}

TEST(gpus_on_two_sockets) {
  struct p2pkit_topo *t = topo_of("two_sockets");
  p2pk_nccl_log *nccl = nccl_of("two_sockets");
  p2pk_findings f;
  analyse("two_sockets", t, nccl, &f);
  dump(&f);
  const p2pk_finding *x = want(&f, "p2p", "GPU0-GPU1", P2PK_DOC_FAIL);
  HAS(x, reason, "SYS");
  x = want(&f, "sockets", "GPU0-GPU1", P2PK_DOC_FAIL);
  HAS(x, reason, "NUMA 0 and 1");
  HAS(x, action, "same CPU socket");
  CHECK(p2pk_findings_find(&f, "iommu", "GPU0-GPU1") == NULL);
  want(&f, "acs", "GPU0-GPU1", P2PK_DOC_OK);
  /* NCCL's shared memory is the right choice where P2P is off. */
  x = want(&f, "nccl", "GPU0-GPU1", P2PK_DOC_OK);
  HAS(x, reason, "SHM/direct/direct");
  HAS(x, reason, "not available");
  x = want(&f, "nccl", "NCCL", P2PK_DOC_OK);
  HAS(x, reason, "2.18.3+cuda12.2");
  CHECK_EQ(p2pk_doctor_exit_code(&f), 2);
  p2pk_findings_free(&f);
  free(nccl);
  p2pkit_topo_destroy(t);
}

/* The host-link probe's results on a recorded machine, as the runner hands them in. */
static p2pk_doc_input host_input(const struct p2pkit_topo *t, const char *scenario,
                                 const p2pk_doc_host_bw *hb, int n) {
  p2pk_doc_input in;
  memset(&in, 0, sizeof in);
  in.topo = t;
  in.sysfs_root = root_of(scenario);
  in.host_bw = hb;
  in.nhost_bw = n;
  return in;
}

/* Each GPU's link to host memory against its PCIe link's expected rate:
 * one way each and both ways at once (what the staged fallback needs). */
TEST(host_link_verdicts) {
  struct p2pkit_topo *t = topo_of("vm_h200"); /* two GPUs at Gen5 x16 */
  const double e = p2pk_pcie_gbps(5, 16) * P2PK_PCIE_EFFICIENCY;
  CHECK(e > 50 && e < 63); /* 63 GB/s line rate a direction, times the copy efficiency */
  p2pk_doc_host_bw hb[2];
  memset(hb, 0, sizeof hb);
  hb[0] = (p2pk_doc_host_bw){0, 0.95 * e, 0.9 * e, 1.8 * e, 1, ""};
  hb[1] = (p2pk_doc_host_bw){1, 0.5 * e, 0.9 * e, 1.3 * e, 1, ""};
  p2pk_doc_input in = host_input(t, "vm_h200", hb, 2);
  p2pk_findings f;
  p2pk_findings_init(&f);
  p2pk_doc_check_host_links(&in, &f);
  dump(&f);
  const p2pk_finding *x = want(&f, "host-link", "GPU0", P2PK_DOC_OK);
  HAS(x, reason, "90% of the 54.8 GB/s a direction expected over PCIe Gen5 x16");
  HAS(x, reason, "both ways at once");
  if (x) CHECK_NEAR(x->value, 0.9 * e, 1e-9);
  if (x) CHECK_NEAR(x->expected, e, 1e-9);
  x = want(&f, "host-link", "GPU1", P2PK_DOC_WARN);
  HAS(x, reason, "only 50%");
  HAS(x, reason, "staged through host memory");
  HAS(x, action, "pcie-link and IOMMU findings");
  if (x && strstr(x->action, "numactl")) T_FAIL("one NUMA node, yet the action names numactl: %s", x->action);
  CHECK_EQ(p2pk_doctor_exit_code(&f), 1);
  p2pk_findings_free(&f);

  /* Each way alone at full rate, both at once not: a WARN naming it. */
  hb[1] = (p2pk_doc_host_bw){1, 0.9 * e, 0.9 * e, 1.0 * e, 1, ""};
  p2pk_findings_init(&f);
  p2pk_doc_check_host_links(&in, &f);
  x = want(&f, "host-link", "GPU1", P2PK_DOC_WARN);
  HAS(x, reason, "both at once only 50% of twice that");
  HAS(x, action, "both ways at once");
  p2pk_findings_free(&f);

  /* Changed bytes are a FAIL whatever the speed; a failed copy names its error. */
  hb[0].verified = 0;
  hb[1] = (p2pk_doc_host_bw){1, 0, 0, 0, -1, "host to GPU: out of memory"};
  p2pk_findings_init(&f);
  p2pk_doc_check_host_links(&in, &f);
  x = want(&f, "host-link", "GPU0", P2PK_DOC_FAIL);
  HAS(x, reason, "came back changed");
  x = want(&f, "host-link", "GPU1", P2PK_DOC_FAIL);
  HAS(x, reason, "host to GPU: out of memory");
  CHECK_EQ(p2pk_doctor_exit_code(&f), 2);
  p2pk_findings_free(&f);

  /* Not run: one SKIP saying why (a recorded machine, --no-probe, ...). */
  in.host_bw = NULL;
  in.host_bw_skip = "--no-probe";
  p2pk_findings_init(&f);
  p2pk_doc_check_host_links(&in, &f);
  x = want(&f, "host-link", "system", P2PK_DOC_SKIP);
  HAS(x, reason, "host-link probe not run: --no-probe");
  p2pk_findings_free(&f);
  p2pkit_topo_destroy(t);

  /* Two sockets: the action names the GPU's own NUMA node. */
  t = topo_of("two_sockets");
  p2pk_doc_host_bw ts[2] = {{0, 10.0, 10.0, 20.0, 1, ""}, {1, 10.0, 10.0, 20.0, 1, ""}};
  in = host_input(t, "two_sockets", ts, 2);
  p2pk_findings_init(&f);
  p2pk_doc_check_host_links(&in, &f);
  dump(&f);
  x = want(&f, "host-link", "GPU1", P2PK_DOC_WARN);
  HAS(x, action, "numactl --cpunodebind=1 --membind=1");
  p2pk_findings_free(&f);
  p2pkit_topo_destroy(t);

  /* The rate a GPU should reach is its own link's, or its slot's when the
   * slot supports less: GPU0 (Gen4 x16 card trained at Gen3 x8) is held to
   * Gen4 x16, GPU2 (a Gen4 card in a Gen3 slot) to Gen3 x16. */
  t = topo_of("gen3_x8");
  p2pk_doc_host_bw g3[3] = {{0, 6.5, 6.6, 13.0, 1, ""}, {1, 25.0, 25.5, 50.0, 1, ""},
                            {2, 13.5, 13.6, 27.0, 1, ""}};
  in = host_input(t, "gen3_x8", g3, 3);
  p2pk_findings_init(&f);
  p2pk_doc_check_host_links(&in, &f);
  dump(&f);
  x = want(&f, "host-link", "GPU0", P2PK_DOC_WARN);
  HAS(x, reason, "PCIe Gen4 x16");
  HAS(x, action, "pcie-link and IOMMU findings");
  x = want(&f, "host-link", "GPU1", P2PK_DOC_OK);
  HAS(x, reason, "PCIe Gen4 x16");
  x = want(&f, "host-link", "GPU2", P2PK_DOC_OK);
  HAS(x, reason, "PCIe Gen3 x16");
  p2pk_findings_free(&f);
  p2pkit_topo_destroy(t);
}

TEST(link_trained_at_gen3_x8) {
  struct p2pkit_topo *t = topo_of("gen3_x8");
  p2pk_findings f;
  analyse("gen3_x8", t, NULL, &f);
  dump(&f);
  const p2pk_finding *x = want(&f, "pcie-link", "GPU0", P2PK_DOC_WARN);
  HAS(x, reason, "0000:03:00.0");
  HAS(x, reason, "Gen3 x8");
  HAS(x, reason, "Gen4 x16");
  HAS(x, reason, "8 of 32 GB/s"); /* 7.9 of 31.5 */
  HAS(x, action, "reseat");
  want(&f, "pcie-link", "GPU1", P2PK_DOC_OK);
  /* GPU2's slot is the limit, not the card. */
  x = want(&f, "pcie-link", "GPU2", P2PK_DOC_WARN);
  HAS(x, reason, "Gen3 x16");
  HAS(x, action, "0000:00:03.0");
  HAS(x, action, "supports only Gen3 x16");
  CHECK_EQ(p2pk_doctor_exit_code(&f), 1);
  p2pk_findings_free(&f);

  /* Re-read under load: GPU2 was only resting; GPU0's width stays low. */
  p2pk_doc_link_load load[3] = {{1, 4, 8}, {0, 0, 0}, {1, 4, 16}};
  p2pk_doc_input in;
  memset(&in, 0, sizeof in);
  in.topo = t;
  in.live = 1;
  in.sysfs_root = root_of("gen3_x8");
  in.load = load;
  p2pk_findings_init(&f);
  p2pk_doc_check_gpus(&in, &f);
  x = want(&f, "pcie-link", "GPU0", P2PK_DOC_WARN);
  HAS(x, reason, "Gen4 x8 under load");
  x = want(&f, "pcie-link", "GPU2", P2PK_DOC_OK);
  HAS(x, reason, "Gen3 at rest");
  p2pk_findings_free(&f);

  /* Without a topology (no driver) the link comes from sysfs. */
  analyse("gen3_x8", NULL, NULL, &f);
  dump(&f);
  x = want(&f, "driver", "system", P2PK_DOC_FAIL);
  HAS(x, reason, "3 NVIDIA GPUs found in sysfs");
  x = want(&f, "pcie-link", "GPU0", P2PK_DOC_WARN);
  HAS(x, reason, "from sysfs");
  HAS(x, reason, "Gen3 x8");
  want(&f, "nvlink", "GPU0", P2PK_DOC_SKIP);
  want(&f, "p2p", "GPU0-GPU1", P2PK_DOC_SKIP);
  want(&f, "acs", "GPU0-GPU1", P2PK_DOC_OK);
  CHECK_EQ(p2pk_doctor_exit_code(&f), 2);
  p2pk_findings_free(&f);
  p2pkit_topo_destroy(t);
}

TEST(device_machine_vm_with_nvswitch) {
  struct p2pkit_topo *t = topo_of("vm_h200");
  p2pk_nccl_log *nccl = nccl_of("vm_h200");
  p2pk_findings f;
  analyse("vm_h200", t, nccl, &f);
  dump(&f);
  /* A VM is a fact, not a fault, when P2P goes over NVLink. */
  const p2pk_finding *x = want(&f, "vm", "system", P2PK_DOC_OK);
  HAS(x, reason, "virtual machine");
  x = want(&f, "nvlink", "GPU0", P2PK_DOC_OK);
  HAS(x, reason, "18/18");
  x = want(&f, "p2p", "GPU0-GPU1", P2PK_DOC_OK);
  HAS(x, reason, "NV18");
  CHECK(p2pk_findings_find(&f, "acs", "GPU0-GPU1") == NULL); /* NVLink: PCIe ACS is moot */
  x = want(&f, "nccl", "GPU0-GPU1", P2PK_DOC_OK);
  HAS(x, reason, "P2P/CUMEM/read");
  x = want(&f, "nccl", "NCCL", P2PK_DOC_OK);
  HAS(x, reason, "NCCL_NVLS_ENABLE=0");
  CHECK_EQ(p2pk_doctor_exit_code(&f), 0);
  p2pk_findings_free(&f);

  /* NCCL through shared memory over an NVLink pair: it did not see NVLink. */
  p2pk_nccl_log *shm = nccl_of_text(
      "v:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct\n"
      "v:2:2 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via SHM/direct/direct\n");
  analyse("vm_h200", t, shm, &f);
  x = want(&f, "nccl", "GPU0-GPU1", P2PK_DOC_FAIL);
  HAS(x, reason, "does not see the NVLink");
  HAS(x, action, "p2pkit topo --dump-nccl");
  HAS(x, action, "NCCL_TOPO_FILE");
  p2pk_findings_free(&f);
  free(shm);
  free(nccl);
  p2pkit_topo_destroy(t);
}

TEST(bandwidth_verdicts) {
  struct p2pkit_topo *t = topo_of("vm_h200");
  p2pkit_pair_t p;
  p2pk_pair_info(t, 0, 1, &p);
  CHECK(p.expected_gbps > 300); /* 18 x 26.5625 x efficiency */
  p2pk_doc_bw bw[4];
  memset(bw, 0, sizeof bw);
  /* GPU0->GPU1: CE at 90% of expected, staged slower. GPU1->GPU0: 50%. */
  bw[0] = (p2pk_doc_bw){0, 1, "p2p-ce", 0.9 * p.expected_gbps, 1, ""};
  bw[1] = (p2pk_doc_bw){0, 1, "staged", 50.0, 1, ""};
  bw[2] = (p2pk_doc_bw){1, 0, "p2p-ce", 0.5 * p.expected_gbps, 1, ""};
  bw[3] = (p2pk_doc_bw){1, 0, "p2p-sm-push", 0, -1, "peer access refused"};
  p2pk_doc_input in;
  memset(&in, 0, sizeof in);
  in.topo = t;
  in.bw = bw;
  in.nbw = 4;
  p2pk_findings f;
  p2pk_findings_init(&f);
  p2pk_doc_check_bandwidth(&in, &f);
  const p2pk_finding *x = want(&f, "bandwidth", "GPU0->GPU1", P2PK_DOC_OK);
  HAS(x, reason, "p2p-ce");
  HAS(x, reason, "90%");
  HAS(x, reason, "staged 50.0");
  if (x) CHECK_NEAR(x->value, 0.9 * p.expected_gbps, 1e-9);
  if (x) CHECK_NEAR(x->expected, p.expected_gbps, 1e-9);
  x = want(&f, "bandwidth", "GPU1->GPU0", P2PK_DOC_WARN);
  HAS(x, reason, "50%");
  CHECK_EQ(p2pk_doctor_exit_code(&f), 1);
  p2pk_findings_free(&f);

  /* Wrong data is a FAIL whatever the speed. */
  bw[1].verified = 0;
  p2pk_findings_init(&f);
  p2pk_doc_check_bandwidth(&in, &f);
  x = want(&f, "bandwidth", "GPU0->GPU1", P2PK_DOC_FAIL);
  HAS(x, reason, "corrupted over staged");
  p2pk_findings_free(&f);

  /* Every copy failing is a FAIL naming the error. */
  in.bw = &bw[3];
  in.nbw = 1;
  p2pk_findings_init(&f);
  p2pk_doc_check_bandwidth(&in, &f);
  x = want(&f, "bandwidth", "GPU1->GPU0", P2PK_DOC_FAIL);
  HAS(x, reason, "peer access refused");
  p2pk_findings_free(&f);
  p2pkit_topo_destroy(t);
}

TEST(nccl_falls_back_to_shm_although_p2p_works) {
  struct p2pkit_topo *t = topo_of("nccl_shm");
  p2pk_nccl_log *nccl = nccl_of("nccl_shm");
  p2pk_findings f;
  analyse("nccl_shm", t, nccl, &f);
  dump(&f);
  want(&f, "p2p", "GPU0-GPU1", P2PK_DOC_OK);
  const p2pk_finding *x = want(&f, "nccl", "GPU0-GPU1", P2PK_DOC_FAIL);
  HAS(x, reason, "SHM/direct/direct");
  HAS(x, reason, "although direct P2P works");
  HAS(x, reason, "PHB");
  HAS(x, action, "export NCCL_P2P_LEVEL=PHB");
  HAS(x, action, "p2pkit topo --dump-nccl nccl-topo.xml");
  HAS(x, action, "NCCL_TOPO_FILE");
  CHECK_EQ(p2pk_doctor_exit_code(&f), 2);
  p2pk_findings_free(&f);
  free(nccl);

  /* The user's own settings are named as the cause. */
  nccl = nccl_of_text("n:1:1 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to LOC\n"
                      "n:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct\n");
  analyse("nccl_shm", t, nccl, &f);
  x = want(&f, "nccl", "GPU0-GPU1", P2PK_DOC_FAIL);
  HAS(x, reason, "NCCL_P2P_LEVEL=LOC is set");
  HAS(x, action, "export NCCL_P2P_LEVEL=PHB (or unset it)");
  p2pk_findings_free(&f);
  free(nccl);
  nccl = nccl_of_text("n:1:1 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1.\n"
                      "n:1:1 [0] NCCL INFO NCCL_SHM_DISABLE set by environment to 1.\n"
                      "n:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0\n");
  analyse("nccl_shm", t, nccl, &f);
  x = want(&f, "nccl", "GPU0-GPU1", P2PK_DOC_FAIL);
  HAS(x, reason, "network stack");
  HAS(x, reason, "NCCL_P2P_DISABLE=1");
  HAS(x, action, "unset NCCL_P2P_DISABLE");
  HAS(x, action, "NCCL_SHM_DISABLE");
  p2pk_findings_free(&f);
  free(nccl);

  /* NCCL failed outright; or ran without naming a connection. */
  p2pk_doc_input in;
  memset(&in, 0, sizeof in);
  in.topo = t;
  in.nccl_error = "rank 1: ncclCommInitRank: unhandled system error";
  p2pk_findings_init(&f);
  p2pk_doc_check_nccl(&in, &f);
  x = want(&f, "nccl", "NCCL", P2PK_DOC_FAIL);
  HAS(x, reason, "unhandled system error");
  p2pk_findings_free(&f);
  nccl = nccl_of_text("n:1:1 [0] NCCL INFO NCCL version 2.20.5+cuda12.4\n");
  in.nccl_error = NULL;
  in.nccl = nccl;
  p2pk_findings_init(&f);
  p2pk_doc_check_nccl(&in, &f);
  x = want(&f, "nccl", "NCCL", P2PK_DOC_WARN);
  HAS(x, action, "NCCL_DEBUG_SUBSYS");
  p2pk_findings_free(&f);
  free(nccl);
  p2pkit_topo_destroy(t);
}

/* --- hand-built machines: causes without a sysfs tree --------------------------- */

static struct p2pkit_topo *two_gpus(const char *name, p2pkit_p2p_code_t code, int access) {
  struct p2pkit_topo *t = p2pk_topo_new("test", "hand-built");
  t->known = P2PK_KNOW_PCI_TREE | P2PK_KNOW_HOSTBRIDGES | P2PK_KNOW_NUMA | P2PK_KNOW_P2P |
             P2PK_KNOW_NVLINK;
  int hb = p2pk_topo_add_pci(t, P2PK_PCI_HOSTBRIDGE, "0000:00", -1);
  t->pci[hb].numa = 0;
  const char *ids[2] = {"0000:01:00.0", "0000:02:00.0"};
  for (int i = 0; i < 2; i++) {
    int g = p2pk_topo_add_gpu(t, ids[i]);
    int p = p2pk_topo_add_pci(t, P2PK_PCI_GPU, ids[i], hb);
    t->gpus[g].pci = p;
    t->pci[p].link_gen = t->pci[p].max_gen = 4;
    t->pci[p].link_width = t->pci[p].max_width = 16;
    snprintf(t->gpus[g].name, sizeof t->gpus[g].name, "%s", name);
    t->gpus[g].nvlinks_present = t->gpus[g].nvlinks_active = 0;
  }
  for (int a = 0; a < 2; a++) {
    t->p2p[a][1 - a].cuda_access = access;
    t->p2p[a][1 - a].nvml[P2PKIT_P2P_READ] = t->p2p[a][1 - a].nvml[P2PKIT_P2P_WRITE] = code;
  }
  return t;
}

static void analyse_no_sysfs(struct p2pkit_topo *t, p2pk_findings *f) {
  p2pk_doc_input in;
  memset(&in, 0, sizeof in);
  in.topo = t;
  in.sysfs_root = "/nonexistent-p2pkit-root";
  p2pk_findings_init(f);
  CHECK_OK(p2pk_doctor_analyze(&in, f));
}

TEST(consumer_gpu_without_p2p) {
  struct p2pkit_topo *t = two_gpus("NVIDIA GeForce RTX 4090", P2PKIT_P2P_GNS, 0);
  p2pk_findings f;
  analyse_no_sysfs(t, &f);
  dump(&f);
  const p2pk_finding *x = want(&f, "gpu-model", "GPU0-GPU1", P2PK_DOC_FAIL);
  HAS(x, reason, "GeForce RTX 4090");
  HAS(x, reason, "GNS");
  want(&f, "p2p", "GPU0-GPU1", P2PK_DOC_FAIL);
  /* No sysfs: the facts it would give are skipped, not guessed. */
  want(&f, "acs", "GPU0-GPU1", P2PK_DOC_SKIP);
  want(&f, "vm", "system", P2PK_DOC_SKIP);
  want(&f, "iommu", "system", P2PK_DOC_SKIP);
  CHECK_EQ(p2pk_doctor_exit_code(&f), 2);
  p2pk_findings_free(&f);
  p2pkit_topo_destroy(t);
}

TEST(nvlinks_down_and_fabric_not_ready) {
  struct p2pkit_topo *t = two_gpus("NVIDIA H100 80GB HBM3", P2PKIT_P2P_OK, 1);
  for (int g = 0; g < 2; g++) {
    p2pk_gpu *x = &t->gpus[g];
    x->ngroups = 1;
    x->groups[0] = (p2pk_nvl_group){P2PK_NVL_SWITCH, "ffffffff:ff:ff.0", 18, 4};
    x->nvlinks_present = 18;
    x->nvlinks_active = g == 0 ? 16 : 0;
    x->nvlink_gbps = 26.5625;
  }
  p2pk_findings f;
  analyse_no_sysfs(t, &f);
  dump(&f);
  const p2pk_finding *x = want(&f, "nvlink", "GPU0", P2PK_DOC_FAIL);
  HAS(x, reason, "2 of 18 NVLinks are down");
  HAS(x, action, "nvidia-smi nvlink -s -i 0");
  x = want(&f, "nvlink", "GPU1", P2PK_DOC_WARN);
  HAS(x, reason, "none of the GPU's 18 NVLinks");
  p2pk_findings_free(&f);

  /* Joined through NVSwitch, P2P off: the fabric manager. */
  for (int a = 0; a < 2; a++) t->p2p[a][1 - a].cuda_access = 0;
  analyse_no_sysfs(t, &f);
  x = want(&f, "nvswitch", "GPU0-GPU1", P2PK_DOC_FAIL);
  HAS(x, action, "nvidia-fabricmanager");
  CHECK(p2pk_findings_find(&f, "acs", "GPU0-GPU1") == NULL);
  p2pk_findings_free(&f);
  p2pkit_topo_destroy(t);
}

/* --- p2pkit's own settings (live only) ------------------------------------------ */

static const char *const doc_vars[] = {"P2PKIT_P2P_DISABLE", "P2PKIT_P2P_LEVEL", "P2PKIT_PDL",
                                       "P2PKIT_CEP_TRACE", "P2PKIT_SHARE_GPUS",
                                       "CUDA_DEVICE_MAX_CONNECTIONS"};

static void settings_of(struct p2pkit_topo *t, int live, p2pk_findings *f) {
  p2pk_doc_input in;
  memset(&in, 0, sizeof in);
  in.topo = t;
  in.live = live;
  p2pk_param_reset();
  p2pk_findings_init(f);
  p2pk_doc_check_settings(&in, f);
  dump(f);
}

/* A healthy machine (A100 pair on one switch, P2P works) with settings left
 * in the environment that keep p2pkit off P2P, off programmatic launches, or
 * tracing, or ranks sharing GPUs, or too few hardware queues for the copy
 * engines (CUDA_DEVICE_MAX_CONNECTIONS): each is a WARN naming the setting and what to unset; the list of
 * settings in force comes first; a level that allows the pair, nothing; a
 * value p2pkit refuses, a FAIL with its sentence; a recorded machine
 * (not live), no settings findings at all. */
TEST(settings_that_keep_p2pkit_off_its_paths) {
  struct p2pkit_topo *t = topo_of("clean");
  p2pk_findings f;
  setenv("P2PKIT_P2P_DISABLE", "1", 1);
  setenv("P2PKIT_PDL", "0", 1);
  setenv("P2PKIT_CEP_TRACE", "1", 1);
  setenv("P2PKIT_SHARE_GPUS", "1", 1);
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1", 1);
  settings_of(t, 1, &f);
  const p2pk_finding *x = want(&f, "settings", "p2pkit", P2PK_DOC_OK);
  HAS(x, reason, "P2PKIT_P2P_DISABLE=1");
  HAS(x, reason, "P2PKIT_PDL=0");
  x = want(&f, "settings", "GPU0-GPU1", P2PK_DOC_WARN);
  HAS(x, reason, "P2P works on this pair (PIX)");
  HAS(x, reason, "P2PKIT_P2P_DISABLE");
  HAS(x, action, "unset P2PKIT_P2P_DISABLE");
  x = want(&f, "settings", "P2PKIT_PDL", P2PK_DOC_WARN);
  HAS(x, action, "unset P2PKIT_PDL");
  want(&f, "settings", "P2PKIT_CEP_TRACE", P2PK_DOC_WARN);
  x = want(&f, "settings", "P2PKIT_SHARE_GPUS", P2PK_DOC_WARN);
  HAS(x, reason, "take turns");
  x = want(&f, "settings", "hardware queues", P2PK_DOC_WARN);
  HAS(x, reason, "CUDA_DEVICE_MAX_CONNECTIONS=1");
  HAS(x, reason, "the kernels carry every size");
  CHECK_EQ(p2pk_doctor_exit_code(&f), 1);
  p2pk_findings_free(&f);
  for (size_t i = 0; i < sizeof doc_vars / sizeof doc_vars[0]; i++) unsetenv(doc_vars[i]);
  /* A level the pair's path is beyond, then one that allows it. */
  setenv("P2PKIT_P2P_LEVEL", "NVL", 1);
  settings_of(t, 1, &f);
  x = want(&f, "settings", "GPU0-GPU1", P2PK_DOC_WARN);
  HAS(x, reason, "beyond P2PKIT_P2P_LEVEL=NVL");
  HAS(x, action, "P2PKIT_P2P_LEVEL");
  p2pk_findings_free(&f);
  setenv("P2PKIT_P2P_LEVEL", "SYS", 1);
  settings_of(t, 1, &f);
  CHECK(p2pk_findings_find(&f, "settings", "GPU0-GPU1") == NULL);
  CHECK(p2pk_findings_find(&f, "settings", "hardware queues") == NULL); /* unset: 8 */
  CHECK_EQ(p2pk_findings_count(&f, P2PK_DOC_WARN), 0);
  p2pk_findings_free(&f);
  setenv("P2PKIT_P2P_LEVEL", "BOGUS", 1);
  settings_of(t, 1, &f);
  x = want(&f, "settings", "values", P2PK_DOC_FAIL);
  HAS(x, reason, "P2PKIT_P2P_LEVEL='BOGUS'");
  p2pk_findings_free(&f);
  settings_of(t, 0, &f);
  CHECK_EQ(f.n, 0);
  p2pk_findings_free(&f);
  unsetenv("P2PKIT_P2P_LEVEL");
  /* A misspelt name has no effect: a WARN naming it and the setting meant. */
  setenv("P2PKIT_P2P_DISABLED", "1", 1);
  settings_of(t, 1, &f);
  x = want(&f, "settings", "names", P2PK_DOC_WARN);
  HAS(x, reason, "P2PKIT_P2P_DISABLED (did you mean P2PKIT_P2P_DISABLE?)");
  HAS(x, action, "fix the name");
  CHECK(p2pk_findings_find(&f, "settings", "GPU0-GPU1") == NULL); /* P2P stays on */
  p2pk_findings_free(&f);
  unsetenv("P2PKIT_P2P_DISABLED");
  p2pk_param_reset();
  p2pkit_topo_destroy(t);
}

/* No driver at all: nothing here moves data between GPUs, so never "no
 * problem found" and exit 0. */
TEST(no_driver_no_sysfs_fails) {
  p2pk_findings f;
  p2pk_doc_input in;
  memset(&in, 0, sizeof in);
  in.topo_error = "no NVIDIA driver: the CUDA driver (libcuda.so.1) is not installed";
  in.sysfs_root = "/nonexistent-p2pkit-root";
  in.bw_skip = "needs the driver";
  in.nccl_skip = "needs the driver";
  p2pk_findings_init(&f);
  CHECK_OK(p2pk_doctor_analyze(&in, &f));
  dump(&f);
  const p2pk_finding *x = want(&f, "driver", "system", P2PK_DOC_FAIL);
  HAS(x, reason, "libcuda.so.1");
  HAS(x, reason, "skipped: P2P status, NVLink, bandwidth probe and NCCL");
  HAS(x, action, "--from FILE");
  want(&f, "gpus", "system", P2PK_DOC_SKIP);
  x = want(&f, "bandwidth", "system", P2PK_DOC_SKIP);
  HAS(x, reason, "needs the driver");
  want(&f, "nccl", "NCCL", P2PK_DOC_SKIP);
  CHECK_EQ(p2pk_findings_count(&f, P2PK_DOC_OK) + p2pk_findings_count(&f, P2PK_DOC_WARN), 0);
  CHECK_EQ(p2pk_findings_count(&f, P2PK_DOC_FAIL), 1);
  CHECK_EQ(p2pk_doctor_exit_code(&f), 2);
  p2pk_findings_free(&f);
}

TEST(recorded_topology_without_its_sysfs_is_not_mixed_with_ours) {
  struct p2pkit_topo *t = topo_of("acs_switch");
  p2pk_doc_input in;
  memset(&in, 0, sizeof in);
  in.topo = t;
  in.sysfs_root = ""; /* would be this machine's /sys */
  in.sysfs_missing = "a recorded machine without its /sys and /proc";
  p2pk_findings f;
  p2pk_findings_init(&f);
  CHECK_OK(p2pk_doctor_analyze(&in, &f));
  const p2pk_finding *x = want(&f, "acs", "GPU0-GPU1", P2PK_DOC_SKIP);
  HAS(x, reason, "without its /sys");
  want(&f, "vm", "system", P2PK_DOC_SKIP);
  want(&f, "iommu", "system", P2PK_DOC_SKIP);
  x = want(&f, "pcie-link", "GPU0", P2PK_DOC_OK); /* the topology still knows the link */
  HAS(x, reason, "from recorded");
  CHECK_EQ(p2pk_doctor_exit_code(&f), 0);
  p2pk_findings_free(&f);
  p2pkit_topo_destroy(t);
}

/* --- GPUDirect RDMA, for jobs across machines --------------------------------------- */

TEST(gdr_reader_on_recorded_trees) {
  p2pk_gdr_facts g;
  p2pk_sysfs_gdr(root_of("gdr_ok"), &g);
  CHECK_EQ(g.modules_read, 1);
  CHECK_STR(g.peermem, "nvidia_peermem");
  CHECK_EQ(g.open_module, 0);
  CHECK_STR(g.nvidia_version, "550.54.15");
  CHECK_EQ(g.kernel_major, 6);
  CHECK_EQ(g.kernel_minor, 8);
  CHECK_EQ(p2pk_gdr_dmabuf(&g), 0);
  p2pk_sysfs_gdr(root_of("gdr_dmabuf"), &g);
  CHECK_STR(g.peermem, "");
  CHECK_EQ(g.open_module, 1);
  CHECK_EQ(p2pk_gdr_dmabuf(&g), 1);
  p2pk_sysfs_gdr(root_of("clean"), &g); /* records none of it */
  CHECK_EQ(g.modules_read, 0);
  CHECK_EQ(g.open_module, -1);
  CHECK_EQ(g.kernel_major, 0);
}

TEST(gdr_nic_beside_the_gpus) {
  struct p2pkit_topo *t = topo_of("gdr_ok");
  if (!t) return;
  p2pk_findings f;
  analyse("gdr_ok", t, NULL, &f);
  dump(&f);
  const p2pk_finding *x = want(&f, "gdr", "system", P2PK_DOC_OK);
  HAS(x, reason, "nvidia_peermem is loaded");
  x = want(&f, "gdr", "GPU1", P2PK_DOC_OK);
  HAS(x, reason, "nearest NIC NIC0 (mlx5_0) is PIX");
  CHECK_EQ(p2pk_doctor_exit_code(&f), 0);
  p2pk_findings_free(&f);
  analyse("gdr_dmabuf", t, NULL, &f);
  x = want(&f, "gdr", "system", P2PK_DOC_OK);
  HAS(x, reason, "dma-buf: NVIDIA's open kernel module 550.54.15 on Linux 6.8");
  p2pk_findings_free(&f);
  /* Neither a peer-memory module nor dma-buf (the clean tree records none). */
  analyse("clean", t, NULL, &f);
  x = want(&f, "gdr", "system", P2PK_DOC_SKIP);
  HAS(x, reason, "could not read /proc/modules");
  p2pk_findings_free(&f);
  p2pkit_topo_destroy(t);
}

TEST(gdr_nic_on_the_other_socket) {
  struct p2pkit_topo *t = topo_of("gdr_remote");
  if (!t) return;
  p2pk_findings f;
  analyse("gdr_remote", t, NULL, &f);
  dump(&f);
  const p2pk_finding *x = want(&f, "gdr", "system", P2PK_DOC_WARN);
  HAS(x, reason, "nvidia-peermem (or nv_peer_mem) is not loaded");
  HAS(x, reason, "proprietary one 535.183.01");
  HAS(x, action, "sudo modprobe nvidia-peermem");
  x = want(&f, "gdr", "GPU0", P2PK_DOC_WARN);
  HAS(x, reason, "is SYS, on the other CPU socket (GPU on NUMA 0, NIC on 1)");
  HAS(x, action, "a NIC on its own CPU socket");
  CHECK_EQ(p2pk_doctor_exit_code(&f), 1);
  p2pk_findings_free(&f);
  /* A PHB NIC: warned with NCCL's default GDR level and how to raise it. */
  t->pci[t->nics[0].pci].numa = 0;
  analyse("gdr_ok", t, NULL, &f);
  x = want(&f, "gdr", "GPU1", P2PK_DOC_WARN);
  HAS(x, reason, "is NODE: RDMA to this GPU crosses between PCIe host bridges");
  HAS(x, action, "NCCL_NET_GDR_LEVEL=PHB");
  p2pk_findings_free(&f);
  /* Without the machine's /sys, NCCL's recorded verdict is the evidence. */
  p2pk_doc_input in;
  memset(&in, 0, sizeof in);
  in.topo = t;
  in.sysfs_missing = "a recorded machine without its /sys and /proc";
  p2pk_findings_init(&f);
  CHECK_OK(p2pk_doctor_analyze(&in, &f));
  x = want(&f, "gdr", "system", P2PK_DOC_SKIP);
  HAS(x, reason, "without its /sys");
  p2pk_findings_free(&f);
  t->nics[0].gdr = 1;
  p2pk_findings_init(&f);
  CHECK_OK(p2pk_doctor_analyze(&in, &f));
  x = want(&f, "gdr", "system", P2PK_DOC_OK);
  HAS(x, reason, "NCCL recorded GPUDirect RDMA as working (gdr=1 on mlx5_0)");
  p2pk_findings_free(&f);
  p2pkit_topo_destroy(t);
}

TEST(gdr_without_nic_or_topology_skips) {
  struct p2pkit_topo *t = topo_of("clean");
  if (!t) return;
  p2pk_findings f;
  analyse("clean", t, NULL, &f);
  const p2pk_finding *x = want(&f, "gdr", "system", P2PK_DOC_SKIP);
  HAS(x, reason, "no RDMA NIC on this machine");
  CHECK(p2pk_findings_find(&f, "gdr", "GPU0") == NULL);
  p2pk_findings_free(&f);
  analyse("clean", NULL, NULL, &f);
  x = want(&f, "gdr", "system", P2PK_DOC_SKIP);
  HAS(x, reason, "needs the GPU topology");
  p2pk_findings_free(&f);
  p2pkit_topo_destroy(t);
}

/* --- the NCCL ranks' process machinery (no GPU: they fail or skip) ---------------- */

TEST(nccl_ranks_start_and_report_without_a_gpu) {
  if (access(P2PK_CLI, X_OK) != 0) {
    printf("  (%s not built: rank start-up not exercised)\n", P2PK_CLI);
    return;
  }
  p2pk_doc_nccl_run r;
  CHECK_OK(p2pk_doc_nccl_spawn(P2PK_CLI, 2, 60, &r));
  CHECK_EQ(r.ran, 0);
  /* Either NCCL is not installed (skip) or CUDA has no device (error). */
  CHECK(r.skip[0] || r.error[0]);
  if (r.error[0]) CHECK(strstr(r.error, "rank") != NULL);
  if (r.skip[0]) CHECK(strstr(r.skip, "NCCL") != NULL);
  printf("  ranks said: %s%s\n", r.skip, r.error);
  p2pk_doc_nccl_run_free(&r);
  /* The child checks its arguments. */
  char *bad[] = {"7", "2", "/tmp"};
  CHECK_EQ(p2pk_doc_nccl_child(3, bad), 1);
}

T_MAIN(T_CASE(sysfs_reader_on_a_recorded_tree), T_CASE(clean_machine_is_all_ok),
       T_CASE(acs_on_a_switch), T_CASE(acs_without_root_says_so), T_CASE(iommu_in_translated_mode),
       T_CASE(gpus_on_two_sockets), T_CASE(link_trained_at_gen3_x8),
       T_CASE(device_machine_vm_with_nvswitch), T_CASE(bandwidth_verdicts), T_CASE(host_link_verdicts),
       T_CASE(nccl_falls_back_to_shm_although_p2p_works), T_CASE(consumer_gpu_without_p2p),
       T_CASE(nvlinks_down_and_fabric_not_ready), T_CASE(no_driver_no_sysfs_fails),
       T_CASE(recorded_topology_without_its_sysfs_is_not_mixed_with_ours),
       T_CASE(nccl_ranks_start_and_report_without_a_gpu), T_CASE(gdr_reader_on_recorded_trees),
       T_CASE(gdr_nic_beside_the_gpus), T_CASE(gdr_nic_on_the_other_socket),
       T_CASE(gdr_without_nic_or_topology_skips),
       T_CASE(settings_that_keep_p2pkit_off_its_paths))
