/* SPDX-License-Identifier: BSD-3-Clause */
/* `p2pkit perf --explain --from FILE`: the selector a communicator would
 * build on a recorded machine, and its decision per size, with no GPU. The
 * communicator is the one init derives (p2pk_comm_derive) from what the file
 * records and this process's settings: the rank count, one process or a
 * process per GPU, whether every pair of the ranks' GPUs allows P2P (the
 * recorded cudaDeviceCanAccessPeer, P2PKIT_P2P_DISABLE, P2PKIT_P2P_LEVEL),
 * the fewest multiprocessors, the hosts (--hosts), and whether NCCL loads
 * here (P2PKIT_NCCL). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/select/nccl_use.h"
#include "core/check.h"
#include "core/param.h"
#include "nccl/nccl_dl.h"
#include "perf/perf.h"
#include "topo/topo.h"
#include "xfer/xfer.h"

static int fail_line(FILE *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail_line(FILE *err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(err, "p2pkit perf: error: ");
  vfprintf(err, fmt, ap);
  fputc('\n', err);
  va_end(ap);
  return P2PK_PERF_EXIT_USAGE;
}

/* LL128 blocks per multiprocessor by threads. A live communicator asks
 * CUDA's occupancy API for its kernel; a file has no kernel to ask, so this
 * is the same estimate test_decisions pins its dump with: 56 registers a
 * thread, the header warp on top, 64K registers and 2048 threads an SM. */
static int ll128_per_sm_estimate(int threads) {
  const int t = threads + 32, a = 2048 / t, b = 65536 / (56 * t);
  return a < b ? a : b;
}

/* Whether the ranks' GPUs 0..n-1 all allow P2P to each other under this
 * process's settings; -1 (with `why`) when the file does not say. */
static int all_p2p(const struct p2pkit_topo *t, int n, int level, char *why, size_t len) {
  if (p2pk_param_int("P2PKIT_P2P_DISABLE")) {
    snprintf(why, len, "P2PKIT_P2P_DISABLE=1");
    return 0;
  }
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++) {
      if (a == b) continue;
      p2pkit_pair_t pr;
      p2pk_pair_info(t, a, b, &pr);
      if (pr.cuda_access < 0) {
        snprintf(why, len, "the file does not record whether GPU%d may reach GPU%d over P2P "
                 "(a p2pkit recording does: p2pkit topo --save)", a, b);
        return -1;
      }
      if (!pr.cuda_access) {
        snprintf(why, len, "GPU%d -> GPU%d: the driver allowed no peer access", a, b);
        return 0;
      }
      if (!p2pk_level_allows(&pr, level, why, len)) return 0;
    }
  return 1;
}

/* c->hosts and c->nccl_mode as init derives them: every rank on this
 * machine (or in --hosts blocks), NCCL loaded or not as it loads here. */
static p2pkit_status_t hosts_of(struct p2pkit_comm *c, const perf_args *a,
                                const struct p2pkit_topo *t, char *nccl_why, size_t len) {
  const int n = c->nranks, h = a->hosts > 1 ? a->hosts : 1;
  char ids[P2PK_COLL_MAX_RANKS][24];
  const char *idp[P2PK_COLL_MAX_RANKS];
  p2pk_nccl_rank r[P2PK_COLL_MAX_RANKS];
  const p2pk_nccl_api *api = NULL;
  const int loaded = p2pk_nccl_shared(&api, nccl_why, len) == P2PKIT_SUCCESS;
  for (int i = 0; i < n; i++) {
    snprintf(ids[i], sizeof ids[i], "perf-host%d", i * h / n);
    idp[i] = ids[i];
    r[i] = (p2pk_nccl_rank){loaded, "recorded", t->gpus[i].busid, ids[i]};
  }
  P2PK_CHECK(p2pk_hosts_group(idp, n, 0, &c->hosts));
  char info[512];
  const int setting = p2pk_nccl_setting(p2pk_param_str("P2PKIT_NCCL"));
  return p2pk_nccl_comm_mode(setting, r, n, 0, &c->hosts, loaded ? "" : nccl_why, &c->nccl_mode,
                             info, sizeof info);
}

/* The fewest multiprocessors of the ranks' GPUs; 0 when one is not recorded. */
static int least_sms(const struct p2pkit_topo *t, int n) {
  int sms = 1 << 30;
  for (int i = 0; i < n; i++)
    if (t->gpus[i].sm_count < sms) sms = t->gpus[i].sm_count;
  return sms > 0 ? sms : 0;
}

/* The communicator's selector for the file's first n GPUs. */
static int derive(struct p2pkit_comm *c, const perf_args *a, const struct p2pkit_topo *t, int n,
                  FILE *out, FILE *err) {
  static p2pk_group one_group; /* one process: only its rank count is read */
  int level = 0;
  char why[256] = "", nccl_why[256] = "";
  p2pk_algo_table table;
  p2pk_algo_force force;
  const char *path = p2pk_param_str("P2PKIT_ALGO_TABLE");
  if (p2pk_param_check() != P2PKIT_SUCCESS || p2pk_p2p_level_read(&level) != P2PKIT_SUCCESS ||
      p2pk_algo_force_from_env(&force) != P2PKIT_SUCCESS ||
      (path[0] && p2pk_algo_table_load(path, &table) != P2PKIT_SUCCESS))
    return fail_line(err, "%s", p2pkit_last_error());
  if (!path[0]) p2pk_algo_table_default(&table);
  const int p2p = all_p2p(t, n, level, why, sizeof why), sms = least_sms(t, n);
  if (p2p < 0) return fail_line(err, "--from %s: %s", a->from, why);
  if (!sms) return fail_line(err, "--from %s: the file does not record the GPUs' multiprocessors", a->from);
  memset(c, 0, sizeof *c);
  c->nranks = n;
  c->multiproc = a->nprocs > 0;
  c->staged = !p2p || force.algo == P2PK_ALGO_STAGED;
  if (!c->multiproc) {
    one_group.n = n;
    c->group = &one_group;
  }
  p2pkit_status_t st = hosts_of(c, a, t, nccl_why, sizeof nccl_why);
  if (st == P2PKIT_SUCCESS)
    st = p2pk_comm_derive(c, sms, p2pk_param_size("P2PKIT_BUFFER_SIZE"), &table, &force);
  p2pk_hosts_free(&c->hosts); /* the selector keeps what it reads */
  if (st != P2PKIT_SUCCESS) return fail_line(err, "%s", p2pkit_last_error());
  if (c->sel.geom.ll128_cap)
    for (int k = 2; k < P2PK_ALGO_THREAD_STEPS; k++) c->sel.geom.ll128_per_sm[k] = ll128_per_sm_estimate(32 * k);
  c->sel.max_blocks = (int)p2pk_param_int("P2PKIT_MAX_BLOCKS");
  fprintf(out, "# p2pkit perf --explain for %s (%s): %d rank%s of %s, %s, %d multiprocessors, "
          "%s%s%s; NCCL %s%s; LL128 occupancy estimated, not measured\n", a->from, t->format, n,
          n == 1 ? "" : "s", t->gpus[0].name, c->multiproc ? "a process per GPU" : "one process",
          sms, c->staged ? "staged through host memory" : "over P2P", why[0] ? ": " : "", why,
          nccl_why[0] ? "not loadable here: " : "loadable here", nccl_why);
  return P2PK_PERF_EXIT_OK;
}

int p2pk_perf_explain_file(const perf_args *a, FILE *out, FILE *err) {
  p2pkit_topo_t topo = NULL;
  if (p2pkit_topo_load(a->from, &topo) != P2PKIT_SUCCESS) return fail_line(err, "%s", p2pkit_last_error());
  const struct p2pkit_topo *t = topo;
  int n = a->nprocs > 0 ? a->nprocs : a->ngpus ? a->ngpus : t->ngpus;
  int rc = P2PK_PERF_EXIT_OK;
  if (n > t->ngpus)
    rc = fail_line(err, "%s %d: %s records %d GPU%s", a->nprocs ? "--procs" : "-g", n, a->from,
                   t->ngpus, t->ngpus == 1 ? "" : "s");
  else if (n > P2PK_COLL_MAX_RANKS)
    rc = fail_line(err, "%d ranks: a communicator holds at most %d", n, P2PK_COLL_MAX_RANKS);
  static struct p2pkit_comm c; /* large: not on the stack */
  if (rc == P2PK_PERF_EXIT_OK) rc = derive(&c, a, t, n, out, err);
  if (rc == P2PK_PERF_EXIT_OK) {
    size_t sizes[P2PK_PERF_MAX_SIZES], bytes[P2PK_PERF_MAX_SIZES];
    const int ns = p2pk_perf_sizes(a, sizes, P2PK_PERF_MAX_SIZES);
    const size_t ts = p2pkit_dtype_size(a->dtype);
    for (int s = 0; s < ns; s++) {
      perf_counts k;
      p2pk_perf_counts(a->coll, sizes[s], ts, n, &k);
      bytes[s] = k.param * ts;
    }
    p2pk_comm_explain(&c, a->coll->name, bytes, ns, a->graph > 0, out);
    if (fflush(out) != 0 || ferror(out)) rc = P2PK_PERF_EXIT_FAIL;
  }
  p2pkit_topo_destroy(topo);
  return rc;
}
