/* p2pkit bench: parse, run, print. The work is in src/bench/. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"
#include "cli/cli.h"

typedef p2pkit_status_t (*writer_fn)(const p2pk_bench_report *, FILE *);

static int write_to(const char *path, writer_fn fn, const p2pk_bench_report *r) {
  FILE *f = fopen(path, "w");
  if (!f) {
    cli_error("bench", "cannot write %s: %s", path, strerror(errno));
    return -1;
  }
  p2pkit_status_t st = fn(r, f);
  if (fclose(f) != 0 && st == P2PKIT_SUCCESS) st = P2PKIT_ERR_IO;
  if (st != P2PKIT_SUCCESS) {
    cli_error("bench", "writing %s failed", path);
    return -1;
  }
  return 0;
}

static int outputs(const p2pk_bench_opts *o, const p2pk_bench_report *r) {
  int rc = 0;
  if (!o->quiet && o->json != 1 && o->csv != 1) p2pk_bench_write_table(r, stdout);
  if (o->json == 1) p2pk_bench_write_json(r, stdout);
  if (o->csv == 1) p2pk_bench_write_csv(r, stdout);
  if (o->json == 2 && write_to(o->json_path, p2pk_bench_write_json, r)) rc = -1;
  if (o->csv == 2 && write_to(o->csv_path, p2pk_bench_write_csv, r)) rc = -1;
  if (o->plot_path[0] && write_to(o->plot_path, p2pk_bench_write_svg, r)) rc = -1;
  fflush(stdout);
  return rc;
}

/* Wrong data, a failed measurement or a sweep none of whose configurations
 * ran makes the run fail, after the report; a few failed sweep configurations
 * get a note (their reasons are in the table). */
static int check_results(const p2pk_bench_report *r) {
  char msg[256];
  if (p2pk_bench_failures(r, msg, sizeof msg) != 0) {
    cli_error("bench", "%s", msg);
    return CLI_EXIT_FAIL;
  }
  int failed = p2pk_bench_sweep_failed(r);
  if (failed)
    fprintf(stderr, "p2pkit bench: note: %d of %d sweep configuration%s failed (see the notes)\n",
            failed, r->nsweeps, r->nsweeps == 1 ? "" : "s");
  return CLI_EXIT_OK;
}

int cmd_bench(int argc, char **argv) {
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
    cli_error("bench", "%s", err);
    if (rc == -2) p2pk_bench_usage(stderr);
    return CLI_EXIT_USAGE;
  }
  p2pkit_topo_t topo = NULL;
  p2pkit_ctx_t ctx = NULL;
  p2pk_bench_report r;
  p2pk_bench_report_init(&r);
  rc = cli_get_topo("bench", o.from[0] ? o.from : NULL, &topo);
  if (rc != CLI_EXIT_OK) goto out;
  if (p2pk_bench_validate(&o, p2pkit_topo_gpu_count(topo), err, sizeof err) != 0) {
    cli_error("bench", "%s", err);
    rc = CLI_EXIT_USAGE;
    goto out;
  }
  p2pkit_status_t st = p2pkit_ctx_create(topo, &ctx);
  if (st != P2PKIT_SUCCESS) {
    cli_error("bench", "%s", p2pkit_last_error());
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
    if (r.nrows || r.nlats || r.nsweeps) outputs(&o, &r);
    cli_error("bench", "%s", why);
    rc = st == P2PKIT_ERR_INVALID_ARGUMENT ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
    goto out;
  }
  rc = outputs(&o, &r) ? CLI_EXIT_FAIL : check_results(&r);
out:
  p2pk_bench_report_free(&r);
  p2pkit_ctx_destroy(ctx);
  if (topo) p2pkit_topo_destroy(topo);
  p2pk_bench_opts_free(&o);
  return rc;
}
