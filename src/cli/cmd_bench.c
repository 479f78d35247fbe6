/* SPDX-License-Identifier: BSD-3-Clause */
/* p2pkit bench: parse, run, print. The work is in src/bench/. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"
#include "cli/cli.h"
#include "core/outfile.h"

typedef p2pkit_status_t (*writer_fn)(const p2pk_bench_report *, FILE *);

/* The files --json=FILE, --csv=FILE and --plot FILE name, opened before the
 * GPUs are looked at: a path that cannot be written fails in a second, not
 * after a run of minutes whose results would then be lost. */
enum { OUT_JSON, OUT_CSV, OUT_PLOT, OUT_COUNT };

typedef struct {
  p2pk_outfile out[OUT_COUNT];
} out_files;

/* Closes what is still open; `discard`: a run that ended without results
 * removes the files it created, so a failure leaves no empty report behind. */
static void close_files(out_files *of, int discard) {
  for (int i = 0; i < OUT_COUNT; i++) p2pk_outfile_close(&of->out[i], discard);
}

/* 0, or the exit code after one line: 1 a file that cannot be written (as in
 * every command), 2 two options naming the same file (a bad command line). */
static int open_files(const p2pk_bench_opts *o, out_files *of) {
  memset(of, 0, sizeof *of);
  const char *path[OUT_COUNT] = {o->json == 2 ? o->json_path : NULL,
                                 o->csv == 2 ? o->csv_path : NULL,
                                 o->plot_path[0] ? o->plot_path : NULL};
  for (int i = 0; i < OUT_COUNT; i++) {
    if (!path[i]) continue;
    if (p2pk_outfile_open(&of->out[i], path[i]) != 0) {
      p2pk_cli_error("bench", "cannot write %s: %s", path[i], strerror(errno));
      close_files(of, 1);
      return CLI_EXIT_FAIL;
    }
    for (int k = 0; k < i; k++)
      if (p2pk_outfile_same(&of->out[i], &of->out[k])) {
        p2pk_cli_error("bench", "%s and %s name the same file", path[k], path[i]);
        of->out[i].created = 0; /* the first one's; remove it once */
        close_files(of, 1);
        return CLI_EXIT_USAGE;
      }
  }
  return 0;
}

/* Writes the report into an opened output and closes it. */
static int write_to(out_files *of, int i, writer_fn fn, const p2pk_bench_report *r) {
  FILE *f = p2pk_outfile_take(&of->out[i]);
  if (!f) return 0;
  p2pkit_status_t st = fn(r, f);
  if (fclose(f) != 0 && st == P2PKIT_SUCCESS) st = P2PKIT_ERR_IO;
  if (st != P2PKIT_SUCCESS) {
    p2pk_cli_error("bench", "writing %s failed", of->out[i].path);
    return -1;
  }
  return 0;
}

static int outputs(const p2pk_bench_opts *o, out_files *of, const p2pk_bench_report *r) {
  int rc = 0;
  if (!o->quiet && o->json != 1 && o->csv != 1) p2pk_bench_write_table(r, stdout);
  if (o->json == 1) p2pk_bench_write_json(r, stdout);
  if (o->csv == 1) p2pk_bench_write_csv(r, stdout);
  if (write_to(of, OUT_JSON, p2pk_bench_write_json, r)) rc = -1;
  if (write_to(of, OUT_CSV, p2pk_bench_write_csv, r)) rc = -1;
  if (write_to(of, OUT_PLOT, p2pk_bench_write_svg, r)) rc = -1;
  fflush(stdout);
  return rc;
}

/* Wrong data, a failed measurement or a sweep none of whose configurations
 * ran makes the run fail, after the report; a few failed sweep configurations
 * get a note (their reasons are in the table). */
static int check_results(const p2pk_bench_report *r) {
  char msg[256];
  if (p2pk_bench_failures(r, msg, sizeof msg) != 0) {
    p2pk_cli_error("bench", "%s", msg);
    return CLI_EXIT_FAIL;
  }
  int failed = p2pk_bench_sweep_failed(r);
  if (failed)
    fprintf(stderr, "p2pkit bench: note: %d of %d sweep configuration%s failed (see the notes)\n",
            failed, r->nsweeps, r->nsweeps == 1 ? "" : "s");
  return CLI_EXIT_OK;
}

/* --plot-from: the saved run's plot, no GPU. */
static int replot(const p2pk_bench_opts *o, out_files *files) {
  p2pk_bench_report r;
  p2pk_bench_report_init(&r);
  char err[1024];
  int rc = CLI_EXIT_OK;
  if (p2pk_bench_load_json(o->plot_from, &r, err, sizeof err) != 0) {
    p2pk_cli_error("bench", "%s", err);
    rc = CLI_EXIT_USAGE;
  } else if (write_to(files, OUT_PLOT, p2pk_bench_write_svg, &r)) {
    rc = CLI_EXIT_FAIL;
  }
  p2pk_bench_report_free(&r);
  return rc;
}

int p2pk_cmd_bench(int argc, char **argv) {
  p2pk_bench_opts o;
  p2pk_bench_opts_init(&o);
  char err[512];
  int rc = p2pk_bench_parse(argc, argv, &o, err, sizeof err);
  if (rc != 0) {
    p2pk_bench_opts_free(&o);
    if (rc > 0) {
      p2pk_bench_usage(stdout);
      return CLI_EXIT_OK;
    }
    p2pk_cli_error("bench", "%s", err);
    if (rc == -2) p2pk_bench_usage(stderr);
    return CLI_EXIT_USAGE;
  }
  out_files files;
  if ((rc = open_files(&o, &files)) != 0) {
    p2pk_bench_opts_free(&o);
    return rc;
  }
  if (o.plot_from[0]) {
    rc = replot(&o, &files);
    close_files(&files, 1);
    p2pk_bench_opts_free(&o);
    return rc;
  }
  p2pkit_topo_t topo = NULL;
  p2pkit_ctx_t ctx = NULL;
  p2pk_bench_report r;
  p2pk_bench_report_init(&r);
  rc = p2pk_cli_get_topo("bench", o.from[0] ? o.from : NULL, &topo);
  if (rc != CLI_EXIT_OK) goto out;
  if (p2pk_bench_validate(&o, p2pkit_topo_gpu_count(topo), err, sizeof err) != 0) {
    p2pk_cli_error("bench", "%s", err);
    rc = CLI_EXIT_USAGE;
    goto out;
  }
  p2pkit_status_t st = p2pkit_ctx_create(topo, &ctx);
  if (st != P2PKIT_SUCCESS) {
    p2pk_cli_error("bench", "%s", p2pkit_last_error());
    rc = st == P2PKIT_ERR_INVALID_ARGUMENT ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
    goto out;
  }
  if (o.dry_run) {
    rc = p2pk_bench_print_plan(&o, ctx, stdout) == P2PKIT_SUCCESS ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    goto out;
  }
  st = p2pk_bench_run(&o, ctx, &r);
  if (st != P2PKIT_SUCCESS) {
    /* What was measured before the failure is still worth having. */
    char why[1024];
    snprintf(why, sizeof why, "%s", p2pkit_last_error());
    if (r.nrows || r.nlats || r.nsweeps) outputs(&o, &files, &r);
    p2pk_cli_error("bench", "%s", why);
    rc = st == P2PKIT_ERR_INVALID_ARGUMENT ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
    goto out;
  }
  rc = outputs(&o, &files, &r) ? CLI_EXIT_FAIL : check_results(&r);
out:
  close_files(&files, 1); /* still open: nothing was measured */
  p2pk_bench_report_free(&r);
  p2pkit_ctx_destroy(ctx);
  if (topo) p2pkit_topo_destroy(topo);
  p2pk_bench_opts_free(&o);
  return rc;
}
