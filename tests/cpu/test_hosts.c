/* SPDX-License-Identifier: BSD-3-Clause */
/* Host identity (hostname + boot id, P2PKIT_HOSTID over both) and the
 * grouping of ranks by host: host count, host index, local rank and size,
 * the cross-host groups, regular or not, and NCCL_HOSTID for simulated
 * hosts; over a table of layouts. */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coll/rdv/hosts.h"
#include "core/param.h"
#include "test.h"

/* A fake root with proc/sys/kernel/random/boot_id holding `boot`. */
static void make_root(char *root, size_t len, const char *boot) {
  snprintf(root, len, "/tmp/p2pk_hosts_XXXXXX");
  if (!mkdtemp(root)) T_FAIL("mkdtemp failed");
  char p[512];
  const char *dirs[] = {"/proc", "/proc/sys", "/proc/sys/kernel", "/proc/sys/kernel/random"};
  for (int i = 0; i < 4; i++) {
    snprintf(p, sizeof p, "%s%s", root, dirs[i]);
    mkdir(p, 0700);
  }
  snprintf(p, sizeof p, "%s/proc/sys/kernel/random/boot_id", root);
  FILE *f = fopen(p, "w");
  if (!f) return;
  fputs(boot, f);
  fclose(f);
}

static void remove_root(const char *root) {
  char p[512];
  snprintf(p, sizeof p, "%s/proc/sys/kernel/random/boot_id", root);
  unlink(p);
  const char *dirs[] = {"/proc/sys/kernel/random", "/proc/sys/kernel", "/proc/sys", "/proc", ""};
  for (int i = 0; i < 5; i++) {
    snprintf(p, sizeof p, "%s%s", root, dirs[i]);
    rmdir(p);
  }
}

TEST(host_id) {
  char root[64], id[P2PK_HOSTID_MAX];
  make_root(root, sizeof root, "0e3c1a52-8f7b-4bde-9c1e-1f2a3b4c5d6e\n");
  CHECK_OK(p2pk_host_id_from(NULL, "node7", root, id, sizeof id));
  CHECK_STR(id, "node7:0e3c1a52-8f7b-4bde-9c1e-1f2a3b4c5d6e");
  CHECK_OK(p2pk_host_id_from("", "node7", root, id, sizeof id)); /* empty: not set */
  CHECK_STR(id, "node7:0e3c1a52-8f7b-4bde-9c1e-1f2a3b4c5d6e");
  CHECK_OK(p2pk_host_id_from("simA", "node7", root, id, sizeof id));
  CHECK_STR(id, "simA");
  /* a small buffer shortens the hostname, never the boot id */
  char small[44];
  CHECK_OK(p2pk_host_id_from(NULL, "a-very-long-hostname", root, small, sizeof small));
  CHECK_STR(small, "a-very:0e3c1a52-8f7b-4bde-9c1e-1f2a3b4c5d6e");
  remove_root(root);
  /* no boot id (a root without /proc): the hostname alone, as NCCL */
  CHECK_OK(p2pk_host_id_from(NULL, "node7", "/nonexistent-root", id, sizeof id));
  CHECK_STR(id, "node7");
  char big[300];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  CHECK_EQ(p2pk_host_id_from(big, "node7", NULL, id, sizeof id), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(p2pkit_last_error(), "is 299 bytes; a host id has at most 127") != NULL);
}

TEST(host_id_from_settings) {
  char root[64], id[P2PK_HOSTID_MAX], host[256] = "";
  make_root(root, sizeof root, "11111111-2222-3333-4444-555555555555");
  gethostname(host, sizeof host - 1);
  setenv("P2PKIT_SYSFS_ROOT", root, 1);
  p2pk_param_reset();
  CHECK_OK(p2pk_host_id(id, sizeof id));
  char want[400];
  snprintf(want, sizeof want, "%s:11111111-2222-3333-4444-555555555555", host);
  CHECK_STR(id, want);
  setenv("P2PKIT_HOSTID", "sim-host-1", 1);
  p2pk_param_reset();
  CHECK_OK(p2pk_host_id(id, sizeof id));
  CHECK_STR(id, "sim-host-1");
  unsetenv("P2PKIT_HOSTID");
  unsetenv("P2PKIT_SYSFS_ROOT");
  p2pk_param_reset();
  remove_root(root);
}

/* One layout: each rank's host name (one letter), and what every rank must see. */
typedef struct {
  const char *name;
  const char *hosts; /* rank r sits on host hosts[r] */
  int nhosts, regular, local_max;
  const char *host_of, *local_of; /* digits per rank */
} layout_t;

static const layout_t table[] = {
    {"1x8", "AAAAAAAA", 1, 1, 8, "00000000", "01234567"},
    {"2x4", "AAAABBBB", 2, 1, 4, "00001111", "01230123"},
    {"4x2", "AABBCCDD", 4, 1, 2, "00112233", "01010101"},
    {"3x1", "ABC", 3, 1, 1, "012", "000"},
    {"3+1", "AAAB", 2, 0, 3, "0001", "0120"},
    {"1+3", "ABBB", 2, 0, 3, "0111", "0012"},
    {"interleaved 2x4", "ABABABAB", 2, 1, 4, "01010101", "00112233"},
    {"interleaved 4x2", "DCBADCBA", 4, 1, 2, "01230123", "00001111"},
    {"scattered 2x3", "BAABBA", 2, 1, 3, "011001", "001122"},
};

static void check_layout(const layout_t *t) {
  int n = (int)strlen(t->hosts);
  char ids[16][8];
  const char *idp[16];
  for (int r = 0; r < n; r++) {
    snprintf(ids[r], sizeof ids[r], "host%c", t->hosts[r]);
    idp[r] = ids[r];
  }
  for (int rank = 0; rank < n; rank++) {
    p2pk_hosts h;
    CHECK_OK(p2pk_hosts_group(idp, n, rank, &h));
    CHECK_EQ(h.nranks, n);
    CHECK_EQ(h.nhosts, t->nhosts);
    CHECK_EQ(h.regular, t->regular);
    CHECK_EQ(h.local_max, t->local_max);
    for (int r = 0; r < n; r++) {
      CHECK_EQ(h.host_of[r], t->host_of[r] - '0');
      CHECK_EQ(h.local_of[r], t->local_of[r] - '0');
    }
    CHECK_EQ(h.host, t->host_of[rank] - '0');
    CHECK_EQ(h.local_rank, t->local_of[rank] - '0');
    CHECK_EQ(h.local_size, h.host_size[h.host]);
    int total = 0, ranks[16];
    for (int k = 0; k < h.nhosts; k++) {
      total += h.host_size[k];
      int m = p2pk_hosts_local_ranks(&h, k, ranks);
      CHECK_EQ(m, h.host_size[k]);
      CHECK_EQ(ranks[0], h.host_first[k]);
      for (int i = 0; i < m; i++) {
        CHECK_EQ(h.host_of[ranks[i]], k);
        CHECK_EQ(h.local_of[ranks[i]], i);
        CHECK_EQ(p2pk_hosts_rank_at(&h, k, i), ranks[i]);
      }
      CHECK_EQ(p2pk_hosts_rank_at(&h, k, m), -1);
    }
    CHECK_EQ(total, n);
    /* cross groups: one rank per host that has that local index, by host */
    for (int l = 0; l < h.local_max; l++) {
      int m = p2pk_hosts_cross_ranks(&h, l, ranks);
      if (h.regular) CHECK_EQ(m, h.nhosts);
      for (int i = 0; i < m; i++) {
        CHECK_EQ(h.local_of[ranks[i]], l);
        if (i) CHECK(h.host_of[ranks[i]] > h.host_of[ranks[i - 1]]);
      }
    }
    p2pkit_status_t st = p2pk_hosts_check_regular(&h, "p2pkit_comm_init_rank");
    CHECK_EQ(st, t->regular ? P2PKIT_SUCCESS : P2PKIT_ERR_UNSUPPORTED);
    p2pk_hosts_free(&h);
    CHECK(h.host_of == NULL);
  }
}

TEST(layouts) {
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    t_current = table[i].name;
    check_layout(&table[i]);
  }
  t_current = "layouts";
}

TEST(irregular_is_named) {
  const char *ids[] = {"a", "a", "a", "b"};
  p2pk_hosts h;
  CHECK_OK(p2pk_hosts_group(ids, 4, 3, &h));
  CHECK_EQ(p2pk_hosts_check_regular(&h, "p2pkit_all_reduce"), P2PKIT_ERR_UNSUPPORTED);
  CHECK_STR(p2pkit_last_error(), "p2pkit_all_reduce: the 4 ranks sit unevenly on 2 hosts (3+1 "
            "ranks, hosts in the order of their first rank); the hierarchical collectives need "
            "the same number of ranks on every host");
  int ranks[4];
  CHECK_EQ(p2pk_hosts_cross_ranks(&h, 1, ranks), 1); /* host b has no local rank 1 */
  CHECK_EQ(ranks[0], 1);
  p2pk_hosts_free(&h);
}

TEST(bad_input) {
  const char *ids[] = {"a", "", "b"};
  p2pk_hosts h;
  CHECK_EQ(p2pk_hosts_group(ids, 3, 0, &h), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_STR(p2pkit_last_error(), "host grouping: rank 1 sent no host id");
  CHECK(h.host_of == NULL);
  CHECK_EQ(p2pk_hosts_group(ids, 3, 3, &h), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pk_hosts_group(ids, 0, 0, &h), P2PKIT_ERR_INVALID_ARGUMENT);
}

TEST(nccl_hostid) {
  CHECK(p2pk_hosts_nccl_hostid(NULL, NULL) == NULL);   /* real hosts: NCCL's own identity */
  CHECK(p2pk_hosts_nccl_hostid("", NULL) == NULL);
  CHECK_STR(p2pk_hosts_nccl_hostid("simB", NULL), "simB");
  CHECK_STR(p2pk_hosts_nccl_hostid("simB", ""), "simB");
  CHECK(p2pk_hosts_nccl_hostid("simB", "mine") == NULL); /* the caller's NCCL_HOSTID stands */
}

T_MAIN(T_CASE(host_id), T_CASE(host_id_from_settings), T_CASE(layouts), T_CASE(irregular_is_named),
       T_CASE(bad_input), T_CASE(nccl_hostid))
