/* SPDX-License-Identifier: BSD-3-Clause */
/* What NCCL does here: one process per GPU (as torchrun starts them), each an
 * NCCL rank of one checked all-reduce, with NCCL_DEBUG=INFO written to a file
 * per rank. The parent starts them by re-running this program
 * (`doctor --nccl-probe RANK N DIR`), so no NCCL or CUDA state is shared, and
 * kills them if they hang. */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/check.h"
#include "core/clock.h"
#include "doctor/doctor.h"
#include "nccl/nccl_dl.h"

extern char **environ;

#define CHILD_SKIP 3
#define ID_WAIT_S 60
#define AR_COUNT (1u << 20) /* floats per rank: 4 MiB */
#define MAX_RANKS 64

/* --- child ------------------------------------------------------------------ */

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static int write_id(const char *dir, const p2pk_nccl_id *id) {
  char tmp[512], fin[512];
  snprintf(tmp, sizeof tmp, "%s/id.tmp", dir);
  snprintf(fin, sizeof fin, "%s/id", dir);
  FILE *f = fopen(tmp, "wb");
  if (!f) return -1;
  size_t n = fwrite(id, 1, sizeof *id, f);
  if (fclose(f) != 0 || n != sizeof *id) return -1;
  return rename(tmp, fin); /* atomic: readers never see half an id */
}

static int read_id(const char *dir, p2pk_nccl_id *id) {
  char fin[512];
  snprintf(fin, sizeof fin, "%s/id", dir);
  for (int i = 0; i < ID_WAIT_S * 20; i++) {
    FILE *f = fopen(fin, "rb");
    if (f) {
      size_t n = fread(id, 1, sizeof *id, f);
      fclose(f);
      if (n == sizeof *id) return 0;
    }
    sleep_ms(50);
  }
  return -1;
}

static int child_fail(const char *what) {
  printf("error: %s\n", what);
  fflush(stdout);
  return 1;
}

/* One rank: init, one all-reduce of (rank+1) everywhere, check the sum. */
static int child_run(const p2pk_nccl_api *api, int rank, int n, const char *dir) {
  char msg[512];
  cudaError_t ce = cudaSetDevice(rank);
  if (ce != cudaSuccess) {
    snprintf(msg, sizeof msg, "rank %d: cudaSetDevice(%d): %s", rank, rank, cudaGetErrorString(ce));
    return child_fail(msg);
  }
  p2pk_nccl_id id;
  memset(&id, 0, sizeof id);
  if (rank == 0) {
    p2pk_nccl_result r = api->GetUniqueId(&id);
    if (r != P2PK_NCCL_SUCCESS || write_id(dir, &id) != 0) {
      snprintf(msg, sizeof msg, "rank 0: ncclGetUniqueId: %s", api->GetErrorString(r));
      return child_fail(msg);
    }
  } else if (read_id(dir, &id) != 0) {
    snprintf(msg, sizeof msg, "rank %d: rank 0 never published the NCCL id", rank);
    return child_fail(msg);
  }
  p2pk_nccl_comm_t comm = NULL;
  p2pk_nccl_result r = api->CommInitRank(&comm, n, id, rank);
  if (r != P2PK_NCCL_SUCCESS) {
    snprintf(msg, sizeof msg, "rank %d: ncclCommInitRank: %s", rank, api->GetErrorString(r));
    return child_fail(msg);
  }
  float *host = malloc(AR_COUNT * sizeof *host);
  float *buf = NULL;
  cudaStream_t s = NULL;
  int rc = 0;
  if (!host) {
    rc = child_fail("out of host memory");
    goto out;
  }
  for (size_t i = 0; i < AR_COUNT; i++) host[i] = (float)(rank + 1);
  if ((ce = cudaMalloc((void **)&buf, AR_COUNT * sizeof *buf)) != cudaSuccess ||
      (ce = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) != cudaSuccess ||
      (ce = cudaMemcpy(buf, host, AR_COUNT * sizeof *buf, cudaMemcpyHostToDevice)) != cudaSuccess) {
    snprintf(msg, sizeof msg, "rank %d: %s", rank, cudaGetErrorString(ce));
    rc = child_fail(msg);
    goto out;
  }
  r = api->AllReduce(buf, buf, AR_COUNT, P2PK_NCCL_FLOAT32, P2PK_NCCL_SUM, comm, (p2pkit_stream_t)s);
  if (r != P2PK_NCCL_SUCCESS) {
    snprintf(msg, sizeof msg, "rank %d: ncclAllReduce: %s", rank, api->GetErrorString(r));
    rc = child_fail(msg);
    goto out;
  }
  if ((ce = cudaStreamSynchronize(s)) != cudaSuccess ||
      (ce = cudaMemcpy(host, buf, AR_COUNT * sizeof *buf, cudaMemcpyDeviceToHost)) != cudaSuccess) {
    snprintf(msg, sizeof msg, "rank %d: after the all-reduce: %s", rank, cudaGetErrorString(ce));
    rc = child_fail(msg);
    goto out;
  }
  float want = (float)n * (float)(n + 1) / 2.0f;
  for (size_t i = 0; i < AR_COUNT; i++)
    if (host[i] != want) {
      snprintf(msg, sizeof msg, "rank %d: all-reduce result wrong at element %zu: %g, expected %g",
               rank, i, (double)host[i], (double)want);
      rc = child_fail(msg);
      goto out;
    }
  printf("ok: rank %d of %d\n", rank, n);
  fflush(stdout);
out:
  if (s) cudaStreamDestroy(s);
  if (buf) cudaFree(buf);
  free(host);
  api->CommDestroy(comm);
  return rc;
}

int p2pk_doc_nccl_child(int argc, char **argv) {
  if (argc != 3) return child_fail("usage: p2pkit doctor --nccl-probe RANK N DIR");
  int rank = atoi(argv[0]), n = atoi(argv[1]);
  if (n < 1 || n > MAX_RANKS || rank < 0 || rank >= n) return child_fail("bad rank or size");
  p2pk_nccl_api api;
  if (p2pk_nccl_load(&api, NULL) != P2PKIT_SUCCESS) {
    printf("skip: %s\n", p2pkit_last_error());
    fflush(stdout);
    return CHILD_SKIP;
  }
  return child_run(&api, rank, n, argv[2]);
}

/* --- parent ----------------------------------------------------------------- */

/* The environment of the ranks: ours (so the user's NCCL_* settings are what
 * is diagnosed) plus the logging settings, and never NVLink multicast. */
static char **child_env(const char *dir, int rank) {
  static const char *drop[] = {"NCCL_DEBUG=", "NCCL_DEBUG_FILE=", "NCCL_DEBUG_SUBSYS=",
                               "NCCL_NVLS_ENABLE="};
  size_t n = 0;
  while (environ[n]) n++;
  char **env = calloc(n + 6, sizeof *env);
  if (!env) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    int skip = 0;
    for (size_t d = 0; d < sizeof drop / sizeof drop[0]; d++)
      skip |= strncmp(environ[i], drop[d], strlen(drop[d])) == 0;
    if (!skip) env[k++] = environ[i];
  }
  char *file = malloc(600);
  if (!file) {
    free(env);
    return NULL;
  }
  snprintf(file, 600, "NCCL_DEBUG_FILE=%s/nccl.%d.log", dir, rank);
  env[k++] = "NCCL_DEBUG=INFO";
  env[k++] = "NCCL_DEBUG_SUBSYS=INIT,P2P,SHM,NET,ENV";
  env[k++] = "NCCL_NVLS_ENABLE=0";
  env[k++] = file;
  env[k] = NULL;
  return env;
}

static char *slurp(const char *path, size_t *len_p) {
  FILE *f = fopen(path, "rb");
  *len_p = 0;
  if (!f) return NULL;
  size_t cap = 1 << 14, len = 0;
  char *buf = malloc(cap + 1);
  size_t n;
  while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
    len += n;
    if (len == cap) {
      if (cap >= (64u << 20)) break;
      char *nb = realloc(buf, cap * 2 + 1);
      if (!nb) break;
      buf = nb;
      cap *= 2;
    }
  }
  fclose(f);
  if (!buf) return NULL;
  buf[len] = '\0';
  *len_p = len;
  return buf;
}

static void append(p2pk_doc_nccl_run *out, const char *text, size_t len) {
  char *nb = realloc(out->log, out->log_len + len + 1);
  if (!nb) return;
  memcpy(nb + out->log_len, text, len);
  out->log = nb;
  out->log_len += len;
  out->log[out->log_len] = '\0';
}

static void remove_dir(const char *dir, int n) {
  char p[600];
  for (int r = 0; r < n; r++) {
    snprintf(p, sizeof p, "%s/nccl.%d.log", dir, r);
    unlink(p);
    snprintf(p, sizeof p, "%s/out.%d", dir, r);
    unlink(p);
  }
  snprintf(p, sizeof p, "%s/id", dir);
  unlink(p);
  snprintf(p, sizeof p, "%s/id.tmp", dir);
  unlink(p);
  rmdir(dir);
}

/* Wait for every child until the deadline; kill what is left. When one rank
 * fails the others would wait for it until the deadline, so they go too. */
static void wait_all(pid_t *pids, int *status, int n, int timeout_s, int *timed_out) {
  const uint64_t t0 = p2pk_now_ns();
  int left = n, failed = 0;
  *timed_out = 0;
  while (left > 0) {
    for (int r = 0; r < n; r++) {
      if (pids[r] <= 0) continue;
      pid_t w = waitpid(pids[r], &status[r], WNOHANG);
      if (w == pids[r] || (w < 0 && errno == ECHILD)) {
        if (w == pids[r] && !(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0)) failed = 1;
        pids[r] = 0;
        left--;
      }
    }
    if (!left) break;
    int late = p2pk_now_ns() - t0 >= (uint64_t)timeout_s * 1000000000u;
    if (late || failed) {
      *timed_out = late;
      for (int r = 0; r < n; r++)
        if (pids[r] > 0) {
          kill(pids[r], SIGKILL);
          waitpid(pids[r], &status[r], 0);
          pids[r] = 0;
        }
      break;
    }
    sleep_ms(50);
  }
}

/* What went wrong, from the rank that failed on its own (its "error: ..."
 * line) before those killed after it. */
static void explain(p2pk_doc_nccl_run *out, char lines[][256], const int *status, int n,
                    int timed_out, int timeout_s, const char *exe) {
  for (int r = 0; r < n && !out->error[0]; r++)
    if (WIFEXITED(status[r]) && WEXITSTATUS(status[r]) != 0 && strncmp(lines[r], "error: ", 7) == 0)
      snprintf(out->error, sizeof out->error, "%s", lines[r] + 7);
  for (int r = 0; r < n && !out->error[0]; r++) {
    int code = WIFEXITED(status[r]) ? WEXITSTATUS(status[r]) : -1;
    if (code == 0) continue;
    if (code == 127)
      snprintf(out->error, sizeof out->error, "could not run %s", exe);
    else if (WIFSIGNALED(status[r]) && WTERMSIG(status[r]) == SIGKILL && timed_out)
      snprintf(out->error, sizeof out->error, "rank %d did not finish in %d s (killed)", r,
               timeout_s);
    else if (WIFSIGNALED(status[r]))
      snprintf(out->error, sizeof out->error, "rank %d died of signal %d%s%s", r,
               WTERMSIG(status[r]), lines[r][0] ? ": " : "", lines[r]);
    else
      snprintf(out->error, sizeof out->error, "rank %d exited with %d%s%s", r, code,
               lines[r][0] ? ": " : "", lines[r]);
  }
}

p2pkit_status_t p2pk_doc_nccl_spawn(const char *self_exe, int n, int timeout_s,
                                    p2pk_doc_nccl_run *out) {
  memset(out, 0, sizeof *out);
  if (n < 2 || n > MAX_RANKS)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "the NCCL probe needs 2 to %d GPUs, not %d",
                     MAX_RANKS, n);
  char exe[512];
  if (self_exe) {
    snprintf(exe, sizeof exe, "%s", self_exe);
  } else {
    ssize_t l = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (l < 0) return p2pk_fail(P2PKIT_ERR_SYSTEM, "/proc/self/exe: %s", strerror(errno));
    exe[l] = '\0';
  }
  const char *tmp = getenv("TMPDIR");
  char dir[512];
  snprintf(dir, sizeof dir, "%s/p2pkit-doctor-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  if (!mkdtemp(dir)) return p2pk_fail(P2PKIT_ERR_SYSTEM, "mkdtemp %s: %s", dir, strerror(errno));

  pid_t pids[MAX_RANKS] = {0};
  int status[MAX_RANKS] = {0};
  char **envs[MAX_RANKS] = {0};
  char outs[MAX_RANKS][600], ranks[MAX_RANKS][16], size[16];
  snprintf(size, sizeof size, "%d", n);
  p2pkit_status_t st = P2PKIT_SUCCESS;
  int started = 0;
  for (int r = 0; r < n; r++) {
    /* Everything the child needs is built here: between fork and exec a
     * process with threads may only make async-signal-safe calls. */
    envs[r] = child_env(dir, r);
    snprintf(outs[r], sizeof outs[r], "%s/out.%d", dir, r);
    snprintf(ranks[r], sizeof ranks[r], "%d", r);
    if (!envs[r]) {
      st = p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory starting the NCCL ranks");
      break;
    }
    char *argv[] = {exe, "doctor", "--nccl-probe", ranks[r], size, dir, NULL};
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
      st = p2pk_fail(P2PKIT_ERR_SYSTEM, "fork: %s", strerror(errno));
      break;
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL); /* a killed doctor takes its ranks along */
      int fd = open(outs[r], O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
      }
      execve(exe, argv, envs[r]);
      _exit(127);
    }
    pids[r] = pid;
    started++;
  }
  int timed_out = 0;
  if (timeout_s <= 0) timeout_s = 60;
  wait_all(pids, status, started, timeout_s, &timed_out);
  for (int r = 0; r < n; r++) {
    if (envs[r]) {
      /* The NCCL_DEBUG_FILE entry is the only one we allocated: the last. */
      size_t k = 0;
      while (envs[r][k]) k++;
      if (k) free(envs[r][k - 1]);
      free(envs[r]);
    }
  }
  if (st == P2PKIT_SUCCESS) {
    char lines[MAX_RANKS][256];
    int ok = 0;
    for (int r = 0; r < n; r++) {
      size_t len = 0;
      char p[600];
      snprintf(p, sizeof p, "%s/nccl.%d.log", dir, r);
      char *log = slurp(p, &len);
      if (log) append(out, log, len);
      free(log);
      char *text = slurp(outs[r], &len);
      snprintf(lines[r], sizeof lines[r], "%.*s", text ? (int)strcspn(text, "\n") : 0,
               text ? text : "");
      free(text);
      int code = WIFEXITED(status[r]) ? WEXITSTATUS(status[r]) : -1;
      if (code == 0) ok++;
      if (code == CHILD_SKIP && !out->skip[0])
        snprintf(out->skip, sizeof out->skip, "%s",
                 strncmp(lines[r], "skip: ", 6) == 0 ? lines[r] + 6 : "NCCL is not available");
    }
    out->ran = ok == n;
    /* No NCCL: every rank says so; nothing failed. */
    if (!out->skip[0] && !out->ran) explain(out, lines, status, n, timed_out, timeout_s, exe);
  }
  remove_dir(dir, n);
  return st;
}

void p2pk_doc_nccl_run_free(p2pk_doc_nccl_run *r) {
  free(r->log);
  memset(r, 0, sizeof *r);
}
