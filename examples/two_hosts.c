/* SPDX-License-Identifier: BSD-3-Clause */
/* A job across hosts: one process per GPU, on two machines (or several
 * "hosts" simulated on one with P2PKIT_HOSTID), created from a unique id
 * as with NCCL, an all-reduce over every rank (hierarchical: p2pkit inside
 * each host, NCCL across), then a split into one communicator per host and
 * an all-reduce in each; every result checked on the host.
 *
 *   two_hosts --make-id                     print a unique id (hex) and exit
 *   two_hosts --nranks N --rank R [--id-file F] [--device D] [--count C]
 *
 * The id: TWO_HOSTS_ID (hex, from --make-id) if set, else rank 0 makes one
 * and writes it to --id-file (default two_hosts.id, on a file system every
 * rank sees), the others read it from there. Rank 0 listens on MASTER_ADDR
 * if that is one of its addresses, else on its host name.
 *
 * Two machines, two GPUs each:
 *   hostA$ two_hosts --nranks 4 --rank 0 --device 0 & two_hosts --nranks 4 --rank 1 --device 1
 *   hostB$ two_hosts --nranks 4 --rank 2 --device 0 & two_hosts --nranks 4 --rank 3 --device 1
 * One machine, one GPU, two simulated hosts of two ranks (ranks share the GPU):
 *   export P2PKIT_SHARE_GPUS=1 TWO_HOSTS_ID=$(two_hosts --make-id)
 *   for r in 0 1 2 3; do P2PKIT_HOSTID=sim$((r / 2)) NCCL_HOSTID=sim$r \
 *     two_hosts --nranks 4 --rank $r --device 0 & done; wait
 * (NCCL refuses two ranks on one GPU under one NCCL host id: each rank gets
 * its own NCCL_HOSTID; p2pkit groups hosts by P2PKIT_HOSTID.)
 * Exit: 0 every result right, 1 a result wrong or a call failed, 2 bad
 * arguments or no GPU. Needs NCCL (libnccl.so.2) across hosts. */
#include <cuda_runtime_api.h>
#include <p2pkit.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fail(const char *what, p2pkit_status_t st) {
  fprintf(stderr, "two_hosts: %s: %s: %s\n", what, p2pkit_strerror(st), p2pkit_last_error());
  return st == P2PKIT_ERR_INVALID_ARGUMENT || st == P2PKIT_ERR_NO_DEVICE ||
                 st == P2PKIT_ERR_NO_DRIVER
             ? 2
             : 1;
}

static void to_hex(const p2pkit_unique_id_t *id, char *out) {
  for (int i = 0; i < P2PKIT_UNIQUE_ID_BYTES; i++)
    sprintf(out + 2 * i, "%02x", (unsigned char)id->internal[i]);
}

static int from_hex(const char *s, p2pkit_unique_id_t *id) {
  if (strlen(s) != 2 * P2PKIT_UNIQUE_ID_BYTES) return -1;
  for (int i = 0; i < P2PKIT_UNIQUE_ID_BYTES; i++) {
    unsigned v;
    if (sscanf(s + 2 * i, "%2x", &v) != 1) return -1;
    id->internal[i] = (char)v;
  }
  return 0;
}

/* The id: from TWO_HOSTS_ID, else made by rank 0 and passed by a file. */
static int get_id(int rank, const char *file, p2pkit_unique_id_t *id) {
  const char *env = getenv("TWO_HOSTS_ID");
  if (env && *env) {
    if (from_hex(env, id) == 0) return 0;
    fprintf(stderr, "two_hosts: TWO_HOSTS_ID is not an id (%d hex digits)\n",
            2 * P2PKIT_UNIQUE_ID_BYTES);
    return 2;
  }
  if (rank == 0) {
    p2pkit_status_t st = p2pkit_get_unique_id(id);
    if (st != P2PKIT_SUCCESS) return fail("get_unique_id", st);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp%d", file, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(id, sizeof *id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, file) != 0) {
      perror("two_hosts: writing the id file");
      return 1;
    }
    return 0;
  }
  for (int tries = 0; tries < 600; tries++, usleep(100 * 1000)) { /* 60 s */
    FILE *f = fopen(file, "rb");
    if (!f) continue;
    const size_t got = fread(id, sizeof *id, 1, f);
    fclose(f);
    if (got == 1) return 0;
  }
  fprintf(stderr, "two_hosts: no id in %s after 60 s (is rank 0 running?)\n", file);
  return 1;
}

/* A host's name as a number: P2PKIT_HOSTID if set (simulated hosts), else
 * the host name (FNV-1a). */
static int64_t host_hash(void) {
  char name[256] = "";
  const char *sim = getenv("P2PKIT_HOSTID");
  if (sim && *sim) snprintf(name, sizeof name, "%s", sim);
  else gethostname(name, sizeof name - 1);
  uint64_t h = 1469598103934665603ull;
  for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  return (int64_t)(h >> 1);
}

/* x[i] = (r + 1) * (1 + i % 7) on every rank r: the sum over `ranks` is
 * (sum of r + 1) * (1 + i % 7), exact in float. */
static int all_reduce_check(p2pkit_comm_t comm, const char *what, int rank_sum, size_t count,
                            cudaStream_t s) {
  const int r = p2pkit_comm_rank(comm);
  float *h = malloc(count * sizeof *h), *d = NULL;
  for (size_t i = 0; i < count; i++) h[i] = (float)((r + 1) * (int)(1 + i % 7));
  cudaMalloc((void **)&d, count * sizeof *d);
  cudaMemcpy(d, h, count * sizeof *h, cudaMemcpyHostToDevice);
  p2pkit_status_t st = p2pkit_all_reduce(d, d, count, P2PKIT_FLOAT32, P2PKIT_SUM, comm, s);
  cudaStreamSynchronize(s);
  cudaMemcpy(h, d, count * sizeof *h, cudaMemcpyDeviceToHost);
  size_t wrong = 0;
  for (size_t i = 0; st == P2PKIT_SUCCESS && i < count; i++)
    wrong += h[i] != (float)(rank_sum * (int)(1 + i % 7));
  cudaFree(d);
  free(h);
  if (st != P2PKIT_SUCCESS) return fail(what, st);
  if (wrong) fprintf(stderr, "two_hosts: %s: %zu of %zu elements wrong\n", what, wrong, count);
  return wrong ? 1 : 0;
}

/* Every rank's host (an all-gather of the hashes) into host_of[], and the
 * number of this rank's host. */
static int hosts_of(p2pkit_comm_t comm, int n, cudaStream_t s, int *host_of) {
  int64_t mine = host_hash(), *all = NULL, h[64];
  cudaMalloc((void **)&all, (size_t)n * sizeof *all);
  int64_t *d_mine = NULL;
  cudaMalloc((void **)&d_mine, sizeof mine);
  cudaMemcpy(d_mine, &mine, sizeof mine, cudaMemcpyHostToDevice);
  p2pkit_status_t st = p2pkit_all_gather(d_mine, all, 1, P2PKIT_INT64, comm, s);
  cudaStreamSynchronize(s);
  cudaMemcpy(h, all, (size_t)n * sizeof *all, cudaMemcpyDeviceToHost);
  cudaFree(all);
  cudaFree(d_mine);
  if (st != P2PKIT_SUCCESS) return fail("all_gather of the host names", st);
  for (int r = 0; r < n; r++) {
    host_of[r] = r;
    for (int q = 0; q < r; q++)
      if (h[q] == h[r]) {
        host_of[r] = host_of[q];
        break;
      }
  }
  return 0;
}

static int usage(FILE *f, int rc) {
  fprintf(f, "usage: two_hosts --make-id\n"
             "       two_hosts --nranks N --rank R [--id-file FILE] [--device D] [--count C]\n");
  return rc;
}

/* Both all-reduces: every rank, then each host's ranks after the split. */
static int run(p2pkit_comm_t comm, int n, int rank, size_t count, cudaStream_t s) {
  int rc = all_reduce_check(comm, "all_reduce over every rank", n * (n + 1) / 2, count, s);
  int host_of[64];
  if (!rc) rc = hosts_of(comm, n, s, host_of);
  if (rc) return rc;
  int local = 0, local_n = 0;
  for (int r = 0; r < n; r++)
    if (host_of[r] == host_of[rank]) local_n++, local += r < rank;
  p2pkit_comm_t host = NULL;
  p2pkit_status_t st = p2pkit_comm_split(comm, host_of[rank], rank, NULL, &host);
  if (st != P2PKIT_SUCCESS) return fail("comm_split by host", st);
  /* In the host's communicator rank r is rank `local`: its x uses local + 1. */
  int local_sum = local_n * (local_n + 1) / 2;
  rc = all_reduce_check(host, "all_reduce inside the host", local_sum, count, s);
  p2pkit_comm_destroy(host);
  if (!rc)
    printf("two_hosts: rank %d of %d (host %d, local rank %d of %d): both all-reduces right\n",
           rank, n, host_of[rank], local, local_n);
  return rc;
}

int main(int argc, char **argv) {
  int n = -1, rank = -1, device = -1;
  size_t count = 1 << 20;
  const char *file = "two_hosts.id";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return usage(stdout, 0);
    if (strcmp(a, "--make-id") == 0) {
      p2pkit_unique_id_t id;
      char hex[2 * P2PKIT_UNIQUE_ID_BYTES + 1];
      p2pkit_status_t st = p2pkit_get_unique_id(&id);
      if (st != P2PKIT_SUCCESS) return fail("get_unique_id", st);
      to_hex(&id, hex);
      printf("%s\n", hex);
      return 0;
    }
    if (!v) return usage(stderr, 2);
    if (strcmp(a, "--nranks") == 0) n = atoi(v);
    else if (strcmp(a, "--rank") == 0) rank = atoi(v);
    else if (strcmp(a, "--device") == 0) device = atoi(v);
    else if (strcmp(a, "--count") == 0) count = (size_t)strtoull(v, NULL, 10);
    else if (strcmp(a, "--id-file") == 0) file = v;
    else return usage(stderr, 2);
    i++;
  }
  if (n < 1 || n > 64 || rank < 0 || rank >= n || count < 1) return usage(stderr, 2);
  p2pkit_unique_id_t id;
  int rc = get_id(rank, file, &id);
  if (rc) return rc;
  p2pkit_config_t cfg = P2PKIT_CONFIG_INIT;
  cfg.device = device;
  if (device >= 0 && cudaSetDevice(device) != cudaSuccess) {
    fprintf(stderr, "two_hosts: no GPU %d\n", device);
    return 2;
  }
  p2pkit_comm_t comm = NULL;
  p2pkit_status_t st = p2pkit_comm_init_rank_config(&comm, n, &id, rank, &cfg);
  if (st != P2PKIT_SUCCESS) return fail("comm_init_rank_config", st);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  rc = run(comm, n, rank, count, s);
  cudaStreamDestroy(s);
  p2pkit_comm_destroy(comm);
  if (rank == 0 && !getenv("TWO_HOSTS_ID")) unlink(file);
  return rc;
}
