/* SPDX-License-Identifier: BSD-3-Clause */
/* The live runner: gather the inputs (topology, the PCIe link under load,
 * each GPU's link to host memory, the bandwidth probe, what NCCL does),
 * then analyse. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "core/check.h"
#include "core/outfile.h"
#include "core/param.h"
#include "doctor/doctor.h"
#include "doctor/nccl_log.h"
#include "topo/topo.h"

#define DEFAULT_PROBE_BYTES (64u << 20)
#define MAX_LOG_BYTES (256u << 20)

static p2pkit_status_t read_file(const char *path, char **text_p, size_t *len_p) {
  FILE *f = fopen(path, "rb");
  if (!f) return p2pk_fail(P2PKIT_ERR_IO, "cannot open NCCL log %s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
    fclose(f);
    return p2pk_fail(P2PKIT_ERR_IO, "NCCL log %s is a directory; give the log file", path);
  }
  size_t cap = 1 << 16, len = 0, n;
  char *buf = malloc(cap + 1);
  while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
    len += n;
    if (len < cap) continue;
    char *nb = cap < MAX_LOG_BYTES ? realloc(buf, cap * 2 + 1) : NULL;
    if (!nb) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = nb;
    cap *= 2;
  }
  const int bad = ferror(f);
  const int e = errno;
  fclose(f);
  if (buf && bad) {
    free(buf);
    return p2pk_fail(P2PKIT_ERR_IO, "reading NCCL log %s failed: %s", path, strerror(e));
  }
  if (!buf) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "%s: too large or out of memory", path);
  buf[len] = '\0';
  *text_p = buf;
  *len_p = len;
  return P2PKIT_SUCCESS;
}

typedef struct {
  p2pk_doc_input in;
  p2pkit_topo_t topo;
  char topo_err[512], bw_skip[256], host_skip[256], nccl_skip[320], nccl_error[512];
  p2pk_doc_link_load *load;
  p2pk_doc_bw *bw;
  p2pk_doc_host_bw *host;
  p2pk_nccl_log *nccl;
  p2pk_doc_nccl_run run;
} state;

static p2pkit_status_t get_topology(const p2pk_doc_opts *o, state *s) {
  const char *file = o->from ? o->from : p2pk_param_str("P2PKIT_TOPO_FILE");
  if (file[0]) {
    P2PK_CHECK(p2pkit_topo_load(file, &s->topo));
    s->in.live = 0;
    return P2PKIT_SUCCESS;
  }
  s->in.live = 1;
  p2pkit_status_t st = p2pkit_topo_discover(&s->topo);
  if (st != P2PKIT_SUCCESS) {
    s->topo = NULL;
    snprintf(s->topo_err, sizeof s->topo_err, "%s: %s",
             st == P2PKIT_ERR_NO_DRIVER   ? "no NVIDIA driver"
             : st == P2PKIT_ERR_NO_DEVICE ? "no usable GPU"
                                          : "GPU discovery failed",
             p2pkit_last_error());
  }
  return P2PKIT_SUCCESS;
}

/* Why a probe of `need` GPUs (1: each GPU's host link; 2: the pairs) does
 * not run here, or NULL. */
static const char *probe_skip(const p2pk_doc_opts *o, const state *s, int need) {
  int n = s->topo ? s->topo->ngpus : 0;
  return !s->topo      ? "needs the driver"
         : !s->in.live ? "a recorded machine, nothing to measure"
         : n < need    ? (need > 1 ? "needs two GPUs" : "no GPU")
         : !o->probe   ? "--no-probe"
                       : NULL;
}

/* Each GPU's link to host memory: one GPU is enough. */
static void run_host_probe(const p2pk_doc_opts *o, state *s) {
  int n = s->topo ? s->topo->ngpus : 0;
  const char *why = probe_skip(o, s, 1);
  if (!why && !(s->host = calloc((size_t)n, sizeof *s->host))) why = "out of memory";
  if (why) {
    snprintf(s->host_skip, sizeof s->host_skip, "%s", why);
    return;
  }
  p2pk_doc_probe_host(s->topo, o->probe_bytes ? o->probe_bytes : DEFAULT_PROBE_BYTES, s->host);
  s->in.host_bw = s->host;
  s->in.nhost_bw = n;
}

static void run_probe(const p2pk_doc_opts *o, state *s) {
  const char *why = probe_skip(o, s, 2);
  if (why) {
    snprintf(s->bw_skip, sizeof s->bw_skip, "%s", why);
    return;
  }
  int nbw = 0;
  size_t bytes = o->probe_bytes ? o->probe_bytes : DEFAULT_PROBE_BYTES;
  if (p2pk_doc_probe(s->topo, bytes, &s->bw, &nbw) != P2PKIT_SUCCESS) {
    snprintf(s->bw_skip, sizeof s->bw_skip, "it could not start: %s", p2pkit_last_error());
    s->bw = NULL;
    return;
  }
  s->in.bw = s->bw;
  s->in.nbw = nbw;
}

static p2pkit_status_t run_nccl(const p2pk_doc_opts *o, state *s) {
  if (o->nccl_log) {
    char *text = NULL;
    size_t len = 0;
    P2PK_CHECK(read_file(o->nccl_log, &text, &len));
    p2pk_nccl_log_parse(text, len, s->nccl);
    free(text);
    s->in.nccl = s->nccl;
    return P2PKIT_SUCCESS;
  }
  int n = s->topo ? s->topo->ngpus : 0;
  const char *why = !s->topo    ? "needs the driver"
                    : !s->in.live ? "a recorded machine (give its NCCL log with --nccl-log FILE)"
                    : n < 2       ? "needs two GPUs"
                    : !o->nccl    ? "--no-nccl"
                                  : NULL;
  if (why) {
    snprintf(s->nccl_skip, sizeof s->nccl_skip, "%s", why);
    return P2PKIT_SUCCESS;
  }
  if (p2pk_doc_nccl_spawn(o->self_exe, n, o->nccl_timeout_s, &s->run) != P2PKIT_SUCCESS) {
    snprintf(s->nccl_error, sizeof s->nccl_error, "could not start the ranks: %s",
             p2pkit_last_error());
    s->in.nccl_error = s->nccl_error;
    return P2PKIT_SUCCESS;
  }
  if (s->run.skip[0]) {
    snprintf(s->nccl_skip, sizeof s->nccl_skip, "%s", s->run.skip);
  } else if (!s->run.ran) {
    snprintf(s->nccl_error, sizeof s->nccl_error, "%s", s->run.error);
    s->in.nccl_error = s->nccl_error;
  } else {
    p2pk_nccl_log_parse(s->run.log ? s->run.log : "", s->run.log_len, s->nccl);
    s->in.nccl = s->nccl;
  }
  return P2PKIT_SUCCESS;
}

/* --save-nccl-log: the NCCL ranks' log, or one line saying why there is
 * none; a write that fails is the doctor's failure. */
static p2pkit_status_t save_nccl_log(const p2pk_doc_opts *o, p2pk_outfile *out, const state *s) {
  FILE *f = p2pk_outfile_take(out);
  if (!f) return P2PKIT_SUCCESS;
  if (s->run.log && s->run.log_len) fwrite(s->run.log, 1, s->run.log_len, f);
  else
    fprintf(f, "# p2pkit doctor: NCCL did not run: %s\n",
            o->nccl_log        ? "its log was read from --nccl-log"
            : s->nccl_skip[0]  ? s->nccl_skip
            : s->nccl_error[0] ? s->nccl_error
                               : "no log");
  const int bad = ferror(f);
  int e = errno;
  const int closed = fclose(f) == 0;
  if (!closed) e = errno;
  if (bad || !closed)
    return p2pk_fail(P2PKIT_ERR_IO, "writing %s failed: %s", out->path, e ? strerror(e) : "write error");
  return P2PKIT_SUCCESS;
}

static void make_title(const p2pk_doc_opts *o, const state *s, char *title, size_t len) {
  const char *root = s->in.sysfs_root;
  char sys[300] = "";
  if (root && root[0]) snprintf(sys, sizeof sys, "; sysfs read under %s", root);
  else if (s->in.sysfs_missing) snprintf(sys, sizeof sys, "; its sysfs not given");
  if (!s->in.live)
    snprintf(title, len, "recorded machine %s (%s)%s", s->topo->source,
             s->topo->hostname[0] ? s->topo->hostname : "host unknown", sys);
  else if (s->topo)
    snprintf(title, len, "this machine (%s)%s", s->topo->hostname, sys);
  else
    snprintf(title, len, "this machine, without a usable GPU%s", sys);
  (void)o;
}

p2pkit_status_t p2pk_doctor_run(const p2pk_doc_opts *o, p2pk_findings *f, char *title,
                                size_t title_len, int *output_failed) {
  /* Opened first: a path that cannot be written fails before minutes of probes. */
  p2pk_outfile saved = {0};
  *output_failed = 0;
  if (o->save_nccl_log && p2pk_outfile_open(&saved, o->save_nccl_log) != 0) {
    *output_failed = 1;
    return p2pk_fail(P2PKIT_ERR_IO, "cannot write %s: %s", o->save_nccl_log, strerror(errno));
  }
  state *s = calloc(1, sizeof *s);
  p2pkit_status_t st = P2PKIT_SUCCESS;
  if (!s || !(s->nccl = calloc(1, sizeof *s->nccl))) {
    free(s);
    p2pk_outfile_close(&saved, 1);
    return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory");
  }
  s->in.sysfs_root = p2pk_param_str("P2PKIT_SYSFS_ROOT");
  P2PK_CHECK_GOTO(get_topology(o, s), st, out);
  s->in.topo = s->topo;
  s->in.topo_error = s->topo_err;
  /* This machine's /sys says nothing about a recorded one. */
  if (!s->in.live && !s->in.sysfs_root[0])
    s->in.sysfs_missing = "a recorded machine without its /sys and /proc (give them with "
                          "P2PKIT_SYSFS_ROOT=DIR)";
  if (o->dump_nccl) {
    if (!s->topo) {
      st = p2pk_fail(P2PKIT_ERR_NO_DEVICE, "--dump-nccl needs a topology: %s", s->topo_err);
      goto out;
    }
    *output_failed = 1;
    P2PK_CHECK_GOTO(p2pkit_topo_write_nccl(s->topo, o->dump_nccl), st, out);
    *output_failed = 0;
  }
  /* NCCL first: its ranks then find the GPUs as idle as we did. */
  P2PK_CHECK_GOTO(run_nccl(o, s), st, out);
  *output_failed = 1;
  P2PK_CHECK_GOTO(save_nccl_log(o, &saved, s), st, out);
  *output_failed = 0;
  s->in.nccl_skip = s->nccl_skip;
  if (s->topo && s->in.live && s->topo->ngpus > 0) {
    s->load = calloc((size_t)s->topo->ngpus, sizeof *s->load);
    if (s->load) {
      p2pk_doc_link_under_load(s->topo, s->load);
      s->in.load = s->load;
    }
  }
  run_host_probe(o, s);
  s->in.host_bw_skip = s->host_skip;
  run_probe(o, s);
  s->in.bw_skip = s->bw_skip;
  make_title(o, s, title, title_len);
  st = p2pk_doctor_analyze(&s->in, f);
out:
  p2pk_outfile_close(&saved, 1); /* still open: the run failed before NCCL */
  p2pk_doc_nccl_run_free(&s->run);
  if (s->topo) p2pkit_topo_destroy(s->topo);
  free(s->load);
  free(s->bw);
  free(s->host);
  free(s->nccl);
  free(s);
  return st;
}
