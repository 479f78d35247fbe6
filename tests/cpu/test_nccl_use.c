/* SPDX-License-Identifier: BSD-3-Clause */
/* What a communicator may hand NCCL, from every rank's view at init
 * (nccl_use.h): P2PKIT_NCCL's words, auto without NCCL (p2pkit's own paths,
 * one INFO sentence), P2PKIT_NCCL=1 without it, ranks NCCL would refuse
 * (one GPU, one NCCL host id), and a communicator spanning hosts, which
 * fails with one line naming what is missing. Also this process's host
 * info (comm_hosts.c): NCCL_HOSTID handed from P2PKIT_HOSTID only when
 * unset. */
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/select/nccl_use.h"
#include "core/param.h"
#include "test.h"

TEST(setting_words) {
  CHECK_EQ(p2pk_nccl_setting(NULL), P2PK_NCCL_AUTO);
  CHECK_EQ(p2pk_nccl_setting(""), P2PK_NCCL_AUTO);
  CHECK_EQ(p2pk_nccl_setting("AUTO"), P2PK_NCCL_AUTO);
  CHECK_EQ(p2pk_nccl_setting("0"), P2PK_NCCL_OFF);
  CHECK_EQ(p2pk_nccl_setting("1"), P2PK_NCCL_ALL);
  CHECK_EQ(p2pk_nccl_setting("yes"), -1);
  CHECK_STR(p2pk_nccl_mode_name(P2PK_NCCL_ALL), "1");
  /* the registry refuses what the words do not allow */
  setenv("P2PKIT_NCCL", "2", 1);
  p2pk_param_reset();
  CHECK_EQ(p2pk_param_check(), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(p2pkit_last_error(), "P2PKIT_NCCL='2' is not one of auto, 0, 1") != NULL);
  setenv("P2PKIT_NCCL", "Auto", 1);
  p2pk_param_reset();
  CHECK_OK(p2pk_param_check());
  unsetenv("P2PKIT_NCCL");
  p2pk_param_reset();
}

/* n ranks: host ids `hosts` (one letter a rank), machines `machines`, GPUs
 * `gpus` (one letter a rank), NCCL host ids = the host ids, loaded by
 * `loaded` (one 0/1 a rank). */
typedef struct {
  int n;
  char ids[16][2], mach[16][2], bus[16][2];
  const char *idp[16];
  p2pk_nccl_rank r[16];
  p2pk_hosts h;
} layout_t;

static void layout(layout_t *L, const char *hosts, const char *machines, const char *gpus,
                   const char *loaded) {
  memset(L, 0, sizeof *L);
  L->n = (int)strlen(hosts);
  for (int i = 0; i < L->n; i++) {
    L->ids[i][0] = hosts[i], L->mach[i][0] = machines[i], L->bus[i][0] = gpus[i];
    L->idp[i] = L->ids[i];
    L->r[i] = (p2pk_nccl_rank){loaded[i] == '1', L->mach[i], L->bus[i], L->ids[i]};
  }
  CHECK_OK(p2pk_hosts_group(L->idp, L->n, 0, &L->h));
}

static p2pkit_status_t mode_of(layout_t *L, int setting, int rank, const char *why, int *mode,
                               char *info) {
  return p2pk_nccl_comm_mode(setting, L->r, L->n, rank, &L->h, why, mode, info, 512);
}

TEST(one_host) {
  layout_t L;
  char info[512];
  int mode = -1;
  layout(&L, "aaaa", "mmmm", "0123", "1111");
  CHECK_OK(mode_of(&L, P2PK_NCCL_AUTO, 0, "", &mode, info));
  CHECK_EQ(mode, P2PK_NCCL_AUTO);
  CHECK_STR(info, "");
  CHECK_OK(mode_of(&L, P2PK_NCCL_ALL, 0, "", &mode, info));
  CHECK_EQ(mode, P2PK_NCCL_ALL);
  CHECK_OK(mode_of(&L, P2PK_NCCL_OFF, 0, "", &mode, info));
  CHECK_EQ(mode, P2PK_NCCL_OFF);
  p2pk_hosts_free(&L.h);
  /* auto without NCCL on some rank: p2pkit's own paths, one sentence */
  layout(&L, "aaaa", "mmmm", "0123", "1101");
  CHECK_OK(mode_of(&L, P2PK_NCCL_AUTO, 1, "", &mode, info));
  CHECK_EQ(mode, P2PK_NCCL_OFF);
  CHECK(strstr(info, "rank 2 cannot load NCCL") != NULL);
  CHECK(strstr(info, "p2pkit's own paths carry every call") != NULL);
  CHECK_OK(mode_of(&L, P2PK_NCCL_AUTO, 2, "cannot load NCCL (libnccl.so.2): not found", &mode, info));
  CHECK(strstr(info, "this rank cannot load NCCL: cannot load NCCL (libnccl.so.2)") != NULL);
  /* P2PKIT_NCCL=1 without it: refused, naming it */
  CHECK_EQ(mode_of(&L, P2PK_NCCL_ALL, 0, "", &mode, info), P2PKIT_ERR_UNSUPPORTED);
  CHECK(strstr(p2pkit_last_error(), "P2PKIT_NCCL=1 puts every call through NCCL, but rank 2") != NULL);
  p2pk_hosts_free(&L.h);
  /* two ranks on one GPU under one NCCL host id: NCCL would refuse them */
  layout(&L, "aa", "mm", "00", "11");
  CHECK_OK(mode_of(&L, P2PK_NCCL_AUTO, 0, "", &mode, info));
  CHECK_EQ(mode, P2PK_NCCL_OFF);
  CHECK(strstr(info, "ranks 0 and 1 share GPU 0") != NULL);
  CHECK(strstr(info, "Duplicate GPU detected") != NULL);
  p2pk_hosts_free(&L.h);
  /* the same GPU number on two machines is two GPUs */
  layout(&L, "ab", "mn", "00", "11");
  int a, b;
  CHECK_EQ(p2pk_nccl_duplicate(L.r, 2, &a, &b), 0);
  p2pk_hosts_free(&L.h);
}

TEST(spanning_hosts) {
  layout_t L;
  char info[512];
  int mode = -1;
  /* two simulated hosts on one machine and GPU, NCCL host id each: fine */
  layout(&L, "aabb", "mmmm", "0000", "1111");
  L.r[1].busid = "1", L.r[3].busid = "1";
  CHECK_OK(mode_of(&L, P2PK_NCCL_AUTO, 0, "", &mode, info));
  CHECK_EQ(mode, P2PK_NCCL_AUTO);
  /* P2PKIT_NCCL=0: refused, one line naming the hosts and the setting */
  CHECK_EQ(mode_of(&L, P2PK_NCCL_OFF, 3, "", &mode, info), P2PKIT_ERR_UNSUPPORTED);
  CHECK_STR(p2pkit_last_error(), "rank 3: the communicator spans 2 hosts of 2 ranks; across hosts "
            "p2pkit needs NCCL, and P2PKIT_NCCL=0 turns it off");
  /* NCCL missing: refused, naming it */
  L.r[2].loaded = 0;
  CHECK_EQ(mode_of(&L, P2PK_NCCL_AUTO, 2, "cannot load NCCL (libnccl.so.2): no such file", &mode,
                   info), P2PKIT_ERR_UNSUPPORTED);
  CHECK(strstr(p2pkit_last_error(), "spans 2 hosts of 2 ranks; across hosts p2pkit needs NCCL, "
               "but this rank cannot load NCCL: cannot load NCCL (libnccl.so.2)") != NULL);
  CHECK(strchr(p2pkit_last_error(), '\n') == NULL);
  L.r[2].loaded = 1;
  /* two ranks of one simulated host on one GPU: NCCL refuses */
  L.r[1].busid = "0";
  CHECK_EQ(mode_of(&L, P2PK_NCCL_AUTO, 0, "", &mode, info), P2PKIT_ERR_UNSUPPORTED);
  CHECK(strstr(p2pkit_last_error(), "ranks 0 and 1 share GPU 0 under one NCCL host id") != NULL);
  p2pk_hosts_free(&L.h);
  /* uneven hosts, in words */
  layout(&L, "aabc", "mmmm", "0123", "1111");
  char text[96];
  p2pk_hosts_text(&L.h, text, sizeof text);
  CHECK_STR(text, "3 hosts: 2+1+1 ranks");
  p2pk_hosts_free(&L.h);
}

/* NCCL_HOSTID from P2PKIT_HOSTID when unset; the caller's wins. */
TEST(host_info_hands_nccl_the_host_id) {
  unsetenv("NCCL_HOSTID");
  setenv("P2PKIT_HOSTID", "simA", 1);
  setenv("P2PKIT_NCCL", "auto", 1);
  p2pk_param_reset();
  static p2pk_host_info m;
  char why[400];
  CHECK_OK(p2pk_host_info_mine(&m, why, sizeof why));
  CHECK_STR(m.hostid, "simA");
  CHECK(strcmp(m.machine, "simA") != 0);
  CHECK_EQ(m.nccl_setting, P2PK_NCCL_AUTO);
  /* NCCL is installed here or not; either way the id is handed over */
  CHECK(m.nccl_loaded || why[0]);
  CHECK_STR(getenv("NCCL_HOSTID"), "simA");
  CHECK_STR(m.nccl_host, "simA");
  setenv("NCCL_HOSTID", "mine", 1);
  CHECK_OK(p2pk_host_info_mine(&m, why, sizeof why));
  CHECK_STR(getenv("NCCL_HOSTID"), "mine");
  CHECK_STR(m.nccl_host, "mine");
  /* P2PKIT_NCCL=0: NCCL is neither loaded nor told */
  unsetenv("NCCL_HOSTID");
  setenv("P2PKIT_NCCL", "0", 1);
  p2pk_param_reset();
  CHECK_OK(p2pk_host_info_mine(&m, why, sizeof why));
  CHECK(getenv("NCCL_HOSTID") == NULL);
  CHECK_EQ(m.nccl_loaded, 0);
  CHECK_STR(m.nccl_host, m.machine);
  unsetenv("P2PKIT_HOSTID");
  unsetenv("P2PKIT_NCCL");
  p2pk_param_reset();
}

T_MAIN(T_CASE(setting_words), T_CASE(one_host), T_CASE(spanning_hosts),
          T_CASE(host_info_hands_nccl_the_host_id))
