/* SPDX-License-Identifier: BSD-3-Clause */
/* Path choice from the topology and the settings, on the CPU: hand-built
 * machines, the recorded fixtures, the settings' parsing and the context's
 * argument checks (which run before any CUDA call). */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "core/param.h"
#include "test.h"
#include "topo/topo.h"
#include "xfer/pair.h"
#include "xfer/xfer.h"

enum { M_NVLINK, M_PIX, M_NODE, M_SYS_NOACCESS, M_SYS_ACCESS, M_UNKNOWN_ACCESS };

/* Two GPUs joined as `kind` says. */
static struct p2pkit_topo *machine(int kind) {
  struct p2pkit_topo *t = p2pk_topo_new("test", "hand-built");
  t->known = P2PK_KNOW_CUDA | P2PK_KNOW_PCI_TREE | P2PK_KNOW_HOSTBRIDGES | P2PK_KNOW_NUMA |
             P2PK_KNOW_NVLINK | P2PK_KNOW_P2P | P2PK_KNOW_PCIE_LINK;
  int two_nodes = kind == M_SYS_NOACCESS || kind == M_SYS_ACCESS;
  p2pk_topo_add_numa(t, 0, "0-31");
  if (two_nodes) p2pk_topo_add_numa(t, 1, "32-63");
  int hb0 = p2pk_topo_add_pci(t, P2PK_PCI_HOSTBRIDGE, "0000:00", -1);
  t->pci[hb0].numa = 0;
  int hb1 = hb0;
  if (kind != M_PIX && kind != M_NVLINK && kind != M_UNKNOWN_ACCESS) {
    hb1 = p2pk_topo_add_pci(t, P2PK_PCI_HOSTBRIDGE, "0000:80", -1);
    t->pci[hb1].numa = two_nodes ? 1 : 0;
  }
  int parent0 = hb0, parent1 = hb1;
  if (kind == M_PIX) parent0 = parent1 = p2pk_topo_add_pci(t, P2PK_PCI_SWITCH, "0000:05:00.0", hb0);
  const char *bus[2] = {"0000:07:00.0", "0000:87:00.0"};
  int parents[2] = {parent0, parent1};
  for (int g = 0; g < 2; g++) {
    int pci = p2pk_topo_add_pci(t, P2PK_PCI_GPU, bus[g], parents[g]);
    t->pci[pci].link_gen = t->pci[pci].max_gen = 5;
    t->pci[pci].link_width = t->pci[pci].max_width = 16;
    int gi = p2pk_topo_add_gpu(t, bus[g]);
    t->gpus[gi].pci = pci;
    t->gpus[gi].sm_count = 132;
    snprintf(t->gpus[gi].name, sizeof t->gpus[gi].name, "NVIDIA H200");
  }
  if (kind == M_NVLINK)
    for (int g = 0; g < 2; g++) {
      p2pk_gpu *gp = &t->gpus[g];
      gp->nvlinks_present = gp->nvlinks_active = 18;
      gp->nvlink_gbps = 26.5625;
      gp->ngroups = 1;
      gp->groups[0].peer = P2PK_NVL_GPU;
      snprintf(gp->groups[0].peer_busid, sizeof gp->groups[0].peer_busid, "%s", bus[!g]);
      gp->groups[0].count = 18;
      gp->groups[0].version = 4;
    }
  int access = kind == M_SYS_NOACCESS ? 0 : kind == M_UNKNOWN_ACCESS ? -1 : 1;
  for (int a = 0; a < 2; a++) t->p2p[a][!a].cuda_access = access;
  return t;
}

static p2pk_xfer_settings defaults(void) {
  p2pk_xfer_settings s;
  memset(&s, 0, sizeof s);
  s.p2p_level = P2PK_PL_ANY;
  s.stage_chunk = 8u << 20;
  s.stage_depth = 4;
  p2pk_sm_config_default(&s.sm);
  return s;
}

static p2pkit_path_t choose(int kind, const p2pk_xfer_settings *s, size_t bytes, char *desc,
                            size_t len) {
  struct p2pkit_topo *t = machine(kind);
  p2pkit_pair_t pair;
  p2pk_pair_info(t, 0, 1, &pair);
  p2pkit_path_t p = p2pk_path_choose(&pair, s, bytes, desc, len);
  p2pkit_topo_destroy(t);
  return p;
}

TEST(level_names) {
  CHECK_EQ(p2pk_p2p_level_parse(""), P2PK_PL_ANY);
  CHECK_EQ(p2pk_p2p_level_parse("NVL"), P2PK_PL_NVL);
  CHECK_EQ(p2pk_p2p_level_parse("pix"), P2PK_PL_PIX);
  CHECK_EQ(p2pk_p2p_level_parse("PXB"), P2PK_PL_PXB);
  CHECK_EQ(p2pk_p2p_level_parse("Phb"), P2PK_PL_PHB);
  CHECK_EQ(p2pk_p2p_level_parse("SYS"), P2PK_PL_SYS);
  CHECK_EQ(p2pk_p2p_level_parse("LOC"), P2PK_PL_LOC);
  CHECK_EQ(p2pk_p2p_level_parse("NODE"), -1); /* not an NCCL_P2P_LEVEL value */
  CHECK_EQ(p2pk_p2p_level_parse("2"), -1);
  CHECK_STR(p2pk_p2p_level_name(P2PK_PL_PXB), "PXB");
}

TEST(pair_levels) {
  p2pkit_pair_t p;
  memset(&p, 0, sizeof p);
  static const struct {
    p2pkit_link_t link;
    int level;
  } cases[] = {{P2PKIT_LINK_NVLINK, P2PK_PL_NVL}, {P2PKIT_LINK_PIX, P2PK_PL_PIX},
               {P2PKIT_LINK_PXB, P2PK_PL_PXB},    {P2PKIT_LINK_PHB, P2PK_PL_PHB},
               {P2PKIT_LINK_NODE, P2PK_PL_PHB},   {P2PKIT_LINK_SYS, P2PK_PL_SYS},
               {P2PKIT_LINK_UNKNOWN, P2PK_PL_SYS}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    p.link = cases[i].link;
    CHECK_EQ(p2pk_pair_level(&p), cases[i].level);
  }
}

TEST(nvlink_by_size) {
  p2pk_xfer_settings s = defaults();
  char d[256];
  CHECK_EQ(choose(M_NVLINK, &s, 256u << 20, d, sizeof d), P2PKIT_PATH_P2P_CE);
  CHECK_STR(d, "P2P/NVLink/CE");
  CHECK_EQ(choose(M_NVLINK, &s, 4096, d, sizeof d), P2PKIT_PATH_P2P_SM_PUSH);
  CHECK_STR(d, "P2P/NVLink/SM");
  CHECK_EQ(choose(M_NVLINK, &s, P2PK_SM_COPY_AUTO, d, sizeof d), P2PKIT_PATH_P2P_SM_PUSH);
  CHECK_EQ(choose(M_NVLINK, &s, P2PK_SM_COPY_AUTO + 1, d, sizeof d), P2PKIT_PATH_P2P_CE);
  s.sm_copy_max = 1u << 20;
  CHECK_EQ(choose(M_NVLINK, &s, 1u << 20, d, sizeof d), P2PKIT_PATH_P2P_SM_PUSH);
  CHECK_EQ(choose(M_NVLINK, &s, (1u << 20) + 1, d, sizeof d), P2PKIT_PATH_P2P_CE);
}

TEST(disabled_stages) {
  p2pk_xfer_settings s = defaults();
  s.p2p_disable = 1;
  char d[256];
  CHECK_EQ(choose(M_NVLINK, &s, 256u << 20, d, sizeof d), P2PKIT_PATH_STAGED);
  CHECK_STR(d, "STAGED/host (P2P disabled by P2PKIT_P2P_DISABLE)");
  CHECK_EQ(choose(M_PIX, &s, 8, d, sizeof d), P2PKIT_PATH_STAGED);
}

TEST(level_limits) {
  p2pk_xfer_settings s = defaults();
  char d[256];
  s.p2p_level = P2PK_PL_NVL;
  CHECK_EQ(choose(M_PIX, &s, 1u << 20, d, sizeof d), P2PKIT_PATH_STAGED);
  CHECK_STR(d, "STAGED/host (path PIX is beyond P2PKIT_P2P_LEVEL=NVL)");
  CHECK_EQ(choose(M_NVLINK, &s, 1u << 20, d, sizeof d), P2PKIT_PATH_P2P_CE);
  s.p2p_level = P2PK_PL_PIX;
  CHECK_EQ(choose(M_PIX, &s, 1u << 20, d, sizeof d), P2PKIT_PATH_P2P_CE);
  CHECK_STR(d, "P2P/PCIe/CE");
  CHECK_EQ(choose(M_NODE, &s, 1u << 20, d, sizeof d), P2PKIT_PATH_STAGED);
  s.p2p_level = P2PK_PL_PHB; /* NCCL's PHB takes NODE too */
  CHECK_EQ(choose(M_NODE, &s, 1u << 20, d, sizeof d), P2PKIT_PATH_P2P_CE);
  CHECK_EQ(choose(M_SYS_ACCESS, &s, 1u << 20, d, sizeof d), P2PKIT_PATH_STAGED);
  CHECK_STR(d, "STAGED/host (path SYS is beyond P2PKIT_P2P_LEVEL=PHB)");
  s.p2p_level = P2PK_PL_SYS;
  CHECK_EQ(choose(M_SYS_ACCESS, &s, 1u << 20, d, sizeof d), P2PKIT_PATH_P2P_CE);
  s.p2p_level = P2PK_PL_LOC;
  CHECK_EQ(choose(M_NVLINK, &s, 1u << 20, d, sizeof d), P2PKIT_PATH_STAGED);
  CHECK_STR(d, "STAGED/host (P2P disabled by P2PKIT_P2P_LEVEL=LOC)");
}

TEST(no_peer_access) {
  p2pk_xfer_settings s = defaults();
  char d[256];
  CHECK_EQ(choose(M_SYS_NOACCESS, &s, 1u << 20, d, sizeof d), P2PKIT_PATH_STAGED);
  CHECK_STR(d, "STAGED/host (no peer access: cudaDeviceCanAccessPeer(GPU0, GPU1) = 0)");
  CHECK_EQ(choose(M_UNKNOWN_ACCESS, &s, 1u << 20, d, sizeof d), P2PKIT_PATH_P2P_CE);
  CHECK_STR(d, "P2P/PCIe/CE (peer access not recorded; trying it)");
}

TEST(same_gpu) {
  struct p2pkit_topo *t = machine(M_NVLINK);
  p2pk_xfer_settings s = defaults();
  s.p2p_disable = 1;
  p2pkit_pair_t pair;
  p2pk_pair_info(t, 1, 1, &pair);
  char d[256];
  CHECK_EQ(p2pk_path_choose(&pair, &s, 1u << 20, d, sizeof d), P2PKIT_PATH_P2P_CE);
  CHECK_STR(d, "P2P/local/CE");
  p2pkit_topo_destroy(t);
}

TEST(path_names) {
  CHECK_STR(p2pkit_path_name(P2PKIT_PATH_AUTO), "auto");
  CHECK_STR(p2pkit_path_name(P2PKIT_PATH_P2P_CE), "p2p-ce");
  CHECK_STR(p2pkit_path_name(P2PKIT_PATH_P2P_SM_PUSH), "p2p-sm-push");
  CHECK_STR(p2pkit_path_name(P2PKIT_PATH_P2P_SM_PULL), "p2p-sm-pull");
  CHECK_STR(p2pkit_path_name(P2PKIT_PATH_STAGED), "staged");
  CHECK_STR(p2pkit_path_name(P2PKIT_PATH_STAGED_SERIAL), "staged-serial");
  CHECK_STR(p2pkit_path_name(P2PKIT_PATH_DRIVER), "driver");
  CHECK_STR(p2pkit_path_name(P2PKIT_PATH_COUNT), "unknown");
  CHECK_STR(p2pkit_path_name((p2pkit_path_t)-1), "unknown");
}

static void clear_env(void) {
  unsetenv("P2PKIT_P2P_DISABLE");
  unsetenv("P2PKIT_P2P_LEVEL");
  unsetenv("P2PKIT_STAGE_CHUNK");
  unsetenv("P2PKIT_STAGE_DEPTH");
  unsetenv("P2PKIT_SM_COPY_MAX");
  unsetenv("P2PKIT_SM_COPY_CONFIG");
  p2pk_param_reset();
}

TEST(settings_from_env) {
  clear_env();
  p2pk_xfer_settings s;
  CHECK_OK(p2pk_xfer_settings_read(&s));
  CHECK_EQ(s.p2p_disable, 0);
  CHECK_EQ(s.p2p_level, P2PK_PL_ANY);
  CHECK_EQ(s.stage_chunk, 8u << 20);
  CHECK_EQ(s.stage_depth, 4);
  CHECK_EQ(s.sm_copy_max, 0);
  setenv("P2PKIT_P2P_DISABLE", "1", 1);
  setenv("P2PKIT_P2P_LEVEL", "pxb", 1);
  setenv("P2PKIT_STAGE_CHUNK", "2M", 1);
  setenv("P2PKIT_STAGE_DEPTH", "3", 1);
  setenv("P2PKIT_SM_COPY_MAX", "256K", 1);
  setenv("P2PKIT_SM_COPY_CONFIG", "kind=chunk,bps=4", 1);
  p2pk_param_reset();
  CHECK_OK(p2pk_xfer_settings_read(&s));
  CHECK_EQ(s.p2p_disable, 1);
  CHECK_EQ(s.p2p_level, P2PK_PL_PXB);
  CHECK_EQ(s.stage_chunk, 2u << 20);
  CHECK_EQ(s.stage_depth, 3);
  CHECK_EQ(s.sm_copy_max, 256u << 10);
  CHECK_EQ(s.sm.kind, P2PK_SMK_CHUNK);
  CHECK_EQ(s.sm.blocks_per_sm, 4);
  static const struct {
    const char *name, *value, *msg;
  } bad[] = {
      {"P2PKIT_P2P_LEVEL", "NEAR", "P2PKIT_P2P_LEVEL='NEAR' is not one of LOC, NVL, PIX, PXB, PHB, SYS"},
      {"P2PKIT_P2P_DISABLE", "yes", "P2PKIT_P2P_DISABLE='yes' must be a whole number from 0 to 1"},
      {"P2PKIT_STAGE_DEPTH", "1", "P2PKIT_STAGE_DEPTH='1' must be a whole number from 2 to 16"},
      {"P2PKIT_STAGE_CHUNK", "lots", "P2PKIT_STAGE_CHUNK='lots' is not a size (bytes, with K, M, G or T): it must be a size from 4K to 1G"},
      {"P2PKIT_STAGE_CHUNK", "1K", "P2PKIT_STAGE_CHUNK='1K' is out of range: it must be a size from 4K to 1G"},
      {"P2PKIT_STAGE_DEPTH", "-1", "P2PKIT_STAGE_DEPTH='-1' must be a whole number from 2 to 16"},
      {"P2PKIT_P2P_DISABLE", "-1", "P2PKIT_P2P_DISABLE='-1' must be a whole number from 0 to 1"},
      {"P2PKIT_SM_COPY_CONFIG", "kind=warp", "P2PKIT_SM_COPY_CONFIG='kind=warp': kind 'warp' is not stride, chunk or tma"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    clear_env();
    setenv(bad[i].name, bad[i].value, 1);
    p2pk_param_reset();
    CHECK_EQ(p2pk_xfer_settings_read(&s), P2PKIT_ERR_INVALID_ARGUMENT);
    CHECK_STR(p2pkit_last_error(), bad[i].msg);
  }
  clear_env();
}

/* The settings registry's ranges are the copy path's own limits. */
TEST(registry_ranges_are_the_copy_paths) {
  const p2pk_param_def *depth = NULL, *chunk = NULL;
  for (size_t i = 0; i < p2pk_param_count(); i++) {
    const p2pk_param_def *d = p2pk_param_at(i);
    if (strcmp(d->name, "P2PKIT_STAGE_DEPTH") == 0) depth = d;
    if (strcmp(d->name, "P2PKIT_STAGE_CHUNK") == 0) chunk = d;
  }
  CHECK(depth && depth->ranged && depth->lo == 2 && depth->hi == P2PK_STAGE_MAX_DEPTH);
  CHECK(chunk && chunk->ranged && chunk->lo == P2PK_STAGE_MIN_CHUNK && chunk->hi == P2PK_STAGE_MAX_CHUNK);
}

TEST(context_checks) {
  clear_env();
  struct p2pkit_topo *t = machine(M_NVLINK);
  p2pkit_ctx_t ctx = NULL;
  CHECK_OK(p2pkit_ctx_create(t, &ctx));
  p2pkit_path_t path = P2PKIT_PATH_COUNT;
  const char *why = NULL;
  CHECK_OK(p2pkit_copy_choose(ctx, 0, 1, 256u << 20, &path, &why));
  CHECK_EQ(path, P2PKIT_PATH_P2P_CE);
  CHECK_STR(why, "P2P/NVLink/CE");
  CHECK_EQ(p2pkit_copy_choose(ctx, 0, 2, 1, &path, &why), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_STR(p2pkit_last_error(), "destination GPU 2 does not exist (the context has 2 GPUs: 0..1)");
  CHECK_EQ(p2pkit_copy_choose(ctx, -1, 1, 1, &path, &why), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pkit_copy_choose(NULL, 0, 1, 1, &path, &why), P2PKIT_ERR_INVALID_ARGUMENT);
  char a[8], b[8];
  CHECK_OK(p2pkit_copy(ctx, b, 1, a, 0, 0, NULL, P2PKIT_PATH_AUTO)); /* zero bytes: nothing */
  CHECK_EQ(p2pkit_copy(ctx, NULL, 1, a, 0, 8, NULL, P2PKIT_PATH_AUTO), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_STR(p2pkit_last_error(), "p2pkit_copy GPU0 -> GPU1: destination is NULL");
  CHECK_EQ(p2pkit_copy(ctx, b, 1, a, 0, 8, NULL, (p2pkit_path_t)42), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pkit_copy(ctx, b, 5, a, 0, 8, NULL, P2PKIT_PATH_AUTO), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pkit_copy(NULL, b, 1, a, 0, 8, NULL, P2PKIT_PATH_AUTO), P2PKIT_ERR_INVALID_ARGUMENT);
  p2pkit_ctx_destroy(ctx);

  /* P2P disabled: asking for a P2P path by name is refused, with the reason. */
  setenv("P2PKIT_P2P_DISABLE", "1", 1);
  p2pk_param_reset();
  CHECK_OK(p2pkit_ctx_create(t, &ctx));
  CHECK_OK(p2pkit_copy_choose(ctx, 1, 0, 64, &path, &why));
  CHECK_EQ(path, P2PKIT_PATH_STAGED);
  CHECK_STR(why, "STAGED/host (P2P disabled by P2PKIT_P2P_DISABLE)");
  for (int pth = P2PKIT_PATH_P2P_CE; pth <= P2PKIT_PATH_P2P_SM_PULL; pth++) {
    CHECK_EQ(p2pkit_copy(ctx, b, 1, a, 0, 8, NULL, (p2pkit_path_t)pth), P2PKIT_ERR_UNSUPPORTED);
    CHECK(strstr(p2pkit_last_error(), "P2P disabled by P2PKIT_P2P_DISABLE") != NULL);
  }
  p2pkit_ctx_destroy(ctx);

  setenv("P2PKIT_P2P_LEVEL", "FAR", 1);
  p2pk_param_reset();
  ctx = NULL;
  CHECK_EQ(p2pkit_ctx_create(t, &ctx), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(ctx == NULL);
  CHECK_EQ(p2pkit_ctx_create(t, NULL), P2PKIT_ERR_INVALID_ARGUMENT);
  clear_env();
  p2pkit_ctx_destroy(NULL);
  p2pkit_topo_destroy(t);
}

/* A one-rank communicator refuses the environment's settings with a message
 * containing `want`, before it looks for a GPU (no communicator made). */
static int comm_refused_with(const char *want) {
  p2pkit_comm_opts_t o;
  p2pkit_comm_opts_init(&o);
  o.nranks = 1;
  o.rank = 0;
  o.device = 0;
  o.addr = "127.0.0.1";
  o.port = 1;
  o.secret = "settings-test";
  o.timeout_s = 5;
  p2pkit_comm_t comm = NULL;
  const p2pkit_status_t st = p2pkit_comm_init_rank(&o, &comm);
  if (st == P2PKIT_ERR_INVALID_ARGUMENT && !comm && strstr(p2pkit_last_error(), want)) return 1;
  printf("communicator: %s, said: %s\n", p2pkit_strerror(st), p2pkit_last_error());
  return 0;
}

/* Copies and communicators read P2PKIT_P2P_LEVEL through one parser: the
 * same values refused with the same message, before any CUDA call (the
 * communicator reads its settings before it counts GPUs). */
TEST(level_one_parser_for_copies_and_communicators) {
  static const char *const bad[] = {"NEAR", "NODE", "2", "nvlink"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("P2PKIT_P2P_LEVEL", bad[i], 1);
    p2pk_param_reset();
    char want[96];
    snprintf(want, sizeof want, "P2PKIT_P2P_LEVEL='%s' is not one of LOC, NVL, PIX, PXB, PHB, SYS",
             bad[i]);
    p2pk_xfer_settings s;
    CHECK_EQ(p2pk_xfer_settings_read(&s), P2PKIT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(p2pkit_last_error(), want) != NULL);
    CHECK(comm_refused_with(want));
  }
  /* A boolean that is not a number is refused by both, not read as 0. */
  clear_env();
  setenv("P2PKIT_P2P_DISABLE", "yes", 1);
  p2pk_param_reset();
  p2pk_xfer_settings s;
  CHECK_EQ(p2pk_xfer_settings_read(&s), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_STR(p2pkit_last_error(), "P2PKIT_P2P_DISABLE='yes' must be a whole number from 0 to 1");
  CHECK(comm_refused_with("P2PKIT_P2P_DISABLE='yes' must be a whole number from 0 to 1"));
  unsetenv("P2PKIT_P2P_DISABLE");
  for (int lv = P2PK_PL_LOC; lv < P2PK_PL_ANY; lv++) {
    setenv("P2PKIT_P2P_LEVEL", p2pk_p2p_level_name(lv), 1);
    p2pk_param_reset();
    int got = -1;
    CHECK_EQ(p2pk_p2p_level_read(&got), P2PKIT_SUCCESS);
    CHECK_EQ(got, lv);
  }
  clear_env();
}

TEST(context_without_gpu) {
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) {
    printf("note: this machine has a GPU; the no-GPU case is not checked here\n");
    return;
  }
  p2pkit_ctx_t ctx = NULL;
  p2pkit_status_t st = p2pkit_ctx_create(NULL, &ctx);
  CHECK(st == P2PKIT_ERR_NO_DRIVER || st == P2PKIT_ERR_NO_DEVICE);
  CHECK(ctx == NULL);
  char said[256];
  snprintf(said, sizeof said, "%s", p2pkit_last_error());
  /* A communicator says why in the same words as discovery (p2pk_gpu_count). */
  p2pkit_comm_t comm = NULL;
  p2pkit_comm_opts_t o;
  p2pkit_comm_opts_init(&o);
  o.nranks = 1;
  o.rank = 0;
  o.secret = "no-gpu";
  CHECK_EQ(p2pkit_comm_init_rank(&o, &comm), st);
  CHECK(comm == NULL);
  if (!strstr(p2pkit_last_error(), "no usable GPU: ") || !strstr(p2pkit_last_error(), said))
    T_FAIL("communicator: '%s'; discovery: '%s'", p2pkit_last_error(), said);
  CHECK(strstr(p2pkit_last_error(), "insufficient") == NULL); /* not the runtime's raw words */
}

/* The recorded machines (tests/data): what AUTO picks for each pair. */
static p2pkit_ctx_t fixture(const char *name, p2pkit_topo_t *t) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", P2PK_TEST_DATA, name);
  *t = NULL;
  p2pkit_status_t st = p2pkit_topo_load(path, t);
  if (st != P2PKIT_SUCCESS) {
    T_FAIL("loading %s: %s", path, p2pkit_last_error());
    return NULL;
  }
  p2pkit_ctx_t ctx = NULL;
  CHECK_OK(p2pkit_ctx_create(*t, &ctx));
  return ctx;
}

static void expect(p2pkit_ctx_t ctx, int a, int b, size_t bytes, p2pkit_path_t want,
                   const char *desc) {
  p2pkit_path_t p;
  const char *why = NULL;
  CHECK_OK(p2pkit_copy_choose(ctx, a, b, bytes, &p, &why));
  if (p != want || !why || strcmp(why, desc) != 0)
    T_FAIL("GPU%d -> GPU%d, %zu bytes: %s '%s', expected %s '%s'", a, b, bytes,
           p2pkit_path_name(p), why ? why : "", p2pkit_path_name(want), desc);
}

TEST(recorded_machines) {
  clear_env();
  p2pkit_topo_t t;
  p2pkit_ctx_t c;
  if ((c = fixture("nvswitch8.p2pkit", &t))) {
    for (int a = 0; a < 8; a++)
      for (int b = 0; b < 8; b++)
        if (a != b) {
          expect(c, a, b, 256u << 20, P2PKIT_PATH_P2P_CE, "P2P/NVLink/CE");
          expect(c, a, b, 8, P2PKIT_PATH_P2P_SM_PUSH, "P2P/NVLink/SM");
        }
    p2pkit_ctx_destroy(c);
  }
  p2pkit_topo_destroy(t);
  if ((c = fixture("nvlink_direct.p2pkit", &t))) {
    expect(c, 0, 1, 1u << 30, P2PKIT_PATH_P2P_CE, "P2P/NVLink/CE");
    expect(c, 0, 3, 1u << 30, P2PKIT_PATH_P2P_CE, "P2P/PCIe/CE"); /* no NVLink: NODE */
    p2pkit_ctx_destroy(c);
  }
  p2pkit_topo_destroy(t);
  if ((c = fixture("sys.p2pkit", &t))) {
    expect(c, 0, 1, 1u << 20, P2PKIT_PATH_STAGED,
           "STAGED/host (no peer access: cudaDeviceCanAccessPeer(GPU0, GPU1) = 0)");
    p2pkit_ctx_destroy(c);
  }
  p2pkit_topo_destroy(t);
  static const char *const pcie[] = {"pix.p2pkit", "pxb.p2pkit", "phb.p2pkit", "node.p2pkit"};
  for (size_t i = 0; i < 4; i++) {
    if ((c = fixture(pcie[i], &t))) {
      expect(c, 0, 1, 1u << 20, P2PKIT_PATH_P2P_CE, "P2P/PCIe/CE");
      p2pkit_ctx_destroy(c);
    }
    p2pkit_topo_destroy(t);
  }
  /* NCCL_P2P_LEVEL semantics on recorded pairs. */
  setenv("P2PKIT_P2P_LEVEL", "PIX", 1);
  p2pk_param_reset();
  if ((c = fixture("pxb.p2pkit", &t))) {
    p2pkit_pair_t pr;
    for (int a = 0; a < p2pkit_topo_gpu_count(t); a++)
      for (int b = 0; b < p2pkit_topo_gpu_count(t); b++) {
        if (a == b) continue;
        CHECK_OK(p2pkit_topo_pair(t, a, b, &pr));
        char d[96];
        snprintf(d, sizeof d, "STAGED/host (path %s is beyond P2PKIT_P2P_LEVEL=PIX)", pr.label);
        if (pr.link == P2PKIT_LINK_PIX) expect(c, a, b, 1u << 20, P2PKIT_PATH_P2P_CE, "P2P/PCIe/CE");
        else expect(c, a, b, 1u << 20, P2PKIT_PATH_STAGED, d);
      }
    p2pkit_ctx_destroy(c);
  }
  p2pkit_topo_destroy(t);
  clear_env();
}

/* The staged pipeline's piece sizes: they cover the copy, fit a slot, ramp. */
TEST(stage_pieces) {
  static const size_t sizes[] = {1, 4095, 4096, 1u << 20, (8u << 20) + 1, 256u << 20,
                                 (1u << 30) + 7};
  for (int ramp = 0; ramp <= 1; ramp++)
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
      p2pk_stage_plan plan = {8u << 20, 4, ramp};
      size_t done = 0, k = 0, maxp = 0;
      while (done < sizes[i] && k < 100000) {
        size_t n = p2pk_stage_piece(&plan, sizes[i], done, k++);
        if (n == 0 || n > plan.chunk) {
          T_FAIL("piece %zu of %zu bytes: %zu", k, sizes[i], n);
          break;
        }
        if (n > maxp) maxp = n;
        done += n;
      }
      CHECK_EQ(done, sizes[i]);
      if (sizes[i] >= 256u << 20) CHECK_EQ(maxp, plan.chunk);
    }
  p2pk_stage_plan plan = {8u << 20, 4, 1};
  size_t bytes = 256u << 20;
  CHECK_EQ(p2pk_stage_piece(&plan, bytes, 0, 0), 1u << 20); /* chunk / 8 first */
  CHECK_EQ(p2pk_stage_piece(&plan, bytes, 1u << 20, 1), 2u << 20);
  CHECK_EQ(p2pk_stage_piece(&plan, bytes, 3u << 20, 2), 4u << 20);
  CHECK_EQ(p2pk_stage_piece(&plan, bytes, 7u << 20, 3), 8u << 20);
  CHECK_EQ(p2pk_stage_piece(&plan, bytes, bytes - (8u << 20), 40), 4u << 20); /* winding down */
  plan.ramp = 0;
  CHECK_EQ(p2pk_stage_piece(&plan, bytes, 0, 0), 8u << 20);
  CHECK_EQ(p2pk_stage_piece(&plan, 100, 0, 0), 100);
}

T_MAIN(T_CASE(level_names), T_CASE(pair_levels), T_CASE(nvlink_by_size), T_CASE(disabled_stages),
       T_CASE(level_limits), T_CASE(no_peer_access), T_CASE(same_gpu), T_CASE(path_names),
       T_CASE(settings_from_env), T_CASE(registry_ranges_are_the_copy_paths), T_CASE(context_checks),
       T_CASE(level_one_parser_for_copies_and_communicators), T_CASE(context_without_gpu),
       T_CASE(recorded_machines), T_CASE(stage_pieces))
