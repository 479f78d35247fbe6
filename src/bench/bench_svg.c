/* SPDX-License-Identifier: BSD-3-Clause */
/* --plot FILE.svg, written by hand: bandwidth against size per method (one
 * way, median over pairs, log-2 x axis), then a heat map of the pair matrix
 * of each method at the largest size. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"
#include "core/check.h"

static const char *const colors[P2PK_BM_COUNT] = {"#000000", "#9467bd", "#2ca02c", "#d62728",
                                                  "#1f77b4", "#ff7f0e", "#8c564b"};

static void xml_text(FILE *out, const char *s) {
  for (; *s; s++) {
    switch (*s) {
      case '<': fputs("&lt;", out); break;
      case '>': fputs("&gt;", out); break;
      case '&': fputs("&amp;", out); break;
      case '"': fputs("&quot;", out); break;
      default:
        if ((unsigned char)*s >= 0x20) fputc(*s, out);
    }
  }
}

static void short_size(size_t b, char *out, size_t len) {
  static const char *const unit[] = {"B", "K", "M", "G", "T"};
  int u = 0;
  double v = (double)b;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  if (v == floor(v)) snprintf(out, len, "%.0f%s", v, unit[u]);
  else snprintf(out, len, "%.1f%s", v, unit[u]);
}

/* 1, 2 or 5 times a power of ten, at least v. */
static double nice_ceil(double v) {
  if (v <= 0) return 1;
  double p = pow(10, floor(log10(v)));
  for (int i = 0; i < 3; i++) {
    static const double m[] = {1, 2, 5};
    if (m[i] * p >= v) return m[i] * p;
  }
  return 10 * p;
}

static int collect_sizes(const p2pk_bench_report *r, size_t *out, int max) {
  int n = 0;
  for (int i = 0; i < r->nrows; i++) {
    const p2pk_bench_row *x = &r->rows[i];
    if (x->mode != P2PK_MODE_ONEWAY || x->status != P2PK_ROW_OK) continue;
    int seen = 0;
    for (int k = 0; k < n; k++) seen |= out[k] == x->bytes;
    if (!seen && n < max) out[n++] = x->bytes;
  }
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && out[j - 1] > out[j]; j--) {
      size_t t = out[j];
      out[j] = out[j - 1];
      out[j - 1] = t;
    }
  return n;
}

#define W 960
#define CX0 90
#define CX1 760
#define CY0 60
#define CY1 360

static void line_chart(const p2pk_bench_report *r, FILE *out, const size_t *sizes, int ns) {
  double ymax = 0;
  for (int m = 0; m < P2PK_BM_COUNT; m++)
    for (int s = 0; s < ns; s++) {
      double g = p2pk_bench_median_gbps(r, P2PK_MODE_ONEWAY, m, sizes[s]);
      if (g > ymax) ymax = g;
    }
  ymax = nice_ceil(ymax * 1.05);
  double lx0 = log2((double)sizes[0]), lx1 = log2((double)sizes[ns - 1]);
  if (lx1 - lx0 < 1) {
    lx0 -= 1;
    lx1 += 1;
  }
#define XP(b) (CX0 + (log2((double)(b)) - lx0) / (lx1 - lx0) * (CX1 - CX0))
#define YP(g) (CY1 - (g) / ymax * (CY1 - CY0))
  fprintf(out, "<text x=\"%d\" y=\"30\" font-size=\"16\" font-weight=\"bold\">Bandwidth against "
          "size, one way (median over pairs)</text>\n", CX0);
  fprintf(out, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>\n",
          CX0, CY0, CX1 - CX0, CY1 - CY0);
  for (int t = 0; t <= 5; t++) {
    double g = ymax * t / 5;
    double y = YP(g);
    fprintf(out, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", CX0, y, CX1,
            y);
    fprintf(out, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%g</text>\n",
            CX0 - 6, y + 4, g);
  }
  int every = ns > 12 ? (ns + 11) / 12 : 1;
  for (int s = 0; s < ns; s += every) {
    char lab[16];
    short_size(sizes[s], lab, sizeof lab);
    double x = XP(sizes[s]);
    fprintf(out, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#eee\"/>\n", x, CY0, x,
            CY1);
    fprintf(out, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%s</text>\n", x,
            CY1 + 16, lab);
  }
  fprintf(out, "<text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\">bytes per copy "
          "(log scale)</text>\n", (CX0 + CX1) / 2, CY1 + 36);
  fprintf(out, "<text x=\"20\" y=\"%d\" font-size=\"12\" transform=\"rotate(-90 20 %d)\" "
          "text-anchor=\"middle\">GB/s (10^9 B/s)</text>\n", (CY0 + CY1) / 2, (CY0 + CY1) / 2);
  int legend = 0;
  for (int m = 0; m < P2PK_BM_COUNT; m++) {
    int any = 0;
    for (int s = 0; s < ns; s++) any |= p2pk_bench_median_gbps(r, P2PK_MODE_ONEWAY, m, sizes[s]) > 0;
    if (!any) continue;
    fprintf(out, "<polyline class=\"method\" data-method=\"%s\" fill=\"none\" stroke=\"%s\" "
            "stroke-width=\"2\" points=\"", p2pk_bench_method_name(m), colors[m]);
    for (int s = 0; s < ns; s++) {
      double g = p2pk_bench_median_gbps(r, P2PK_MODE_ONEWAY, m, sizes[s]);
      if (g > 0) fprintf(out, "%.1f,%.1f ", XP(sizes[s]), YP(g));
    }
    fputs("\"/>\n", out);
    for (int s = 0; s < ns; s++) {
      double g = p2pk_bench_median_gbps(r, P2PK_MODE_ONEWAY, m, sizes[s]);
      if (g > 0)
        fprintf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>%s %zu B: %.2f "
                "GB/s</title></circle>\n", XP(sizes[s]), YP(g), colors[m],
                p2pk_bench_method_name(m), sizes[s], g);
    }
    int ly = CY0 + 10 + 18 * legend++;
    fprintf(out, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"3\"/>\n",
            CX1 + 15, ly, CX1 + 40, ly, colors[m]);
    fprintf(out, "<text x=\"%d\" y=\"%d\" font-size=\"12\">%s</text>\n", CX1 + 46, ly + 4,
            p2pk_bench_method_name(m));
  }
#undef XP
#undef YP
}

/* GPUs in the one-way rows at `bytes`, ascending. */
static int heat_gpus(const p2pk_bench_report *r, size_t bytes, int *gpus) {
  int n = 0;
  for (int i = 0; i < r->nrows; i++) {
    const p2pk_bench_row *x = &r->rows[i];
    if (x->bytes != bytes || x->mode != P2PK_MODE_ONEWAY || x->src < 0) continue;
    int e[2] = {x->src, x->dst};
    for (int k = 0; k < 2; k++) {
      int seen = 0;
      for (int j = 0; j < n; j++) seen |= gpus[j] == e[k];
      if (!seen && n < P2PK_MAX_GPUS) gpus[n++] = e[k];
    }
  }
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && gpus[j - 1] > gpus[j]; j--) {
      int t = gpus[j];
      gpus[j] = gpus[j - 1];
      gpus[j - 1] = t;
    }
  return n;
}

static int heat_methods(const p2pk_bench_report *r, size_t bytes) {
  int k = 0;
  for (int m = 0; m < P2PK_BM_COUNT; m++)
    for (int i = 0; i < r->nrows; i++) {
      const p2pk_bench_row *x = &r->rows[i];
      if (x->bytes == bytes && x->mode == P2PK_MODE_ONEWAY && x->method == m && !x->total) {
        k++;
        break;
      }
    }
  return k;
}

static int heat_cell(int n) { return n <= 4 ? 48 : n <= 8 ? 30 : 240 / n; }

/* Height the heat maps take (0 when there are none). */
static int heat_height(const p2pk_bench_report *r, size_t bytes) {
  int gpus[P2PK_MAX_GPUS], n = heat_gpus(r, bytes, gpus);
  if (n < 2) return 0;
  int boxw = heat_cell(n) * n + 70, boxh = heat_cell(n) * n + 60;
  int per_row = (W - 40) / boxw > 0 ? (W - 40) / boxw : 1;
  int rows = (heat_methods(r, bytes) + per_row - 1) / per_row;
  return 40 + rows * boxh;
}

/* Heat maps of one-way GB/s at `bytes`, one per method, from y0 down. */
static void heat_maps(const p2pk_bench_report *r, FILE *out, size_t bytes, int y0) {
  int gpus[P2PK_MAX_GPUS], n = heat_gpus(r, bytes, gpus);
  if (n < 2) return;
  int cell = heat_cell(n);
  int side = cell * n, boxw = side + 70, boxh = side + 60;
  char sz[32];
  p2pk_bench_fmt_size(bytes, sz, sizeof sz);
  fprintf(out, "<text x=\"%d\" y=\"%d\" font-size=\"16\" font-weight=\"bold\">Pair matrix at %s, "
          "one way, GB/s (rows: source, columns: destination)</text>\n", CX0, y0 + 20, sz);
  int k = 0, per_row = (W - 40) / boxw > 0 ? (W - 40) / boxw : 1;
  for (int m = 0; m < P2PK_BM_COUNT; m++) {
    double vmax = 0;
    int any = 0;
    for (int i = 0; i < r->nrows; i++) {
      const p2pk_bench_row *x = &r->rows[i];
      if (x->bytes == bytes && x->mode == P2PK_MODE_ONEWAY && x->method == m && !x->total) {
        any = 1;
        if (x->status == P2PK_ROW_OK && x->gbps > vmax) vmax = x->gbps;
      }
    }
    if (!any) continue;
    int bx = 40 + (k % per_row) * boxw, by = y0 + 40 + (k / per_row) * boxh;
    k++;
    fprintf(out, "<g class=\"heatmap\" data-method=\"%s\">\n", p2pk_bench_method_name(m));
    fprintf(out, "<text x=\"%d\" y=\"%d\" font-size=\"12\">%s</text>\n", bx + 20, by + 12,
            p2pk_bench_method_name(m));
    for (int a = 0; a < n; a++) {
      fprintf(out, "<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"end\">%d</text>\n",
              bx + 16, by + 20 + a * cell + cell / 2 + 4, gpus[a]);
      fprintf(out, "<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\">%d</text>\n",
              bx + 20 + a * cell + cell / 2, by + 20 + side + 12, gpus[a]);
      for (int b = 0; b < n; b++) {
        const p2pk_bench_row *x = NULL;
        for (int i = 0; i < r->nrows && a != b; i++) {
          const p2pk_bench_row *y = &r->rows[i];
          if (y->bytes == bytes && y->mode == P2PK_MODE_ONEWAY && y->method == m && !y->total &&
              y->src == gpus[a] && y->dst == gpus[b])
            x = y;
        }
        const char *fill = "#cccccc";
        char rgb[16];
        int ok = x && x->status == P2PK_ROW_OK && x->verified && vmax > 0;
        if (ok) {
          /* white -> blue with the rate */
          double f = x->gbps / vmax;
          int c = (int)(255 - 200 * f);
          snprintf(rgb, sizeof rgb, "#%02x%02xff", c < 0 ? 0 : c, c < 0 ? 0 : c);
          fill = rgb;
        } else if (x) {
          fill = "#ff9999";
        }
        int cx = bx + 20 + b * cell, cy = by + 20 + a * cell;
        int low = ok && x->low;
        fprintf(out, "<rect class=\"cell\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" "
                "stroke=\"%s\" stroke-width=\"%d\">", cx + low, cy + low, cell - 2 * low,
                cell - 2 * low, fill, low ? "#d62728" : "#fff", low ? 2 : 1);
        if (x) {
          fprintf(out, "<title>%d->%d %s: ", gpus[a], gpus[b], p2pk_bench_method_name(m));
          if (ok) fprintf(out, "%.1f GB/s", x->gbps);
          else xml_text(out, x->status == P2PK_ROW_OK ? "wrong data" : x->note);
          fputs("</title>", out);
        }
        fputs("</rect>\n", out);
        if (ok && cell >= 30)
          fprintf(out, "<text x=\"%d\" y=\"%d\" font-size=\"%d\" text-anchor=\"middle\" fill=\"%s\">"
                  "%.0f%s</text>\n", cx + cell / 2, cy + cell / 2 + 4, cell >= 48 ? 11 : 9,
                  x->gbps > 0.6 * vmax ? "#fff" : "#000", x->gbps, low ? "!" : "");
      }
    }
    fputs("</g>\n", out);
  }
}

p2pkit_status_t p2pk_bench_write_svg(const p2pk_bench_report *r, FILE *out) {
  size_t sizes[P2PK_BENCH_MAX_SIZES];
  int ns = collect_sizes(r, sizes, P2PK_BENCH_MAX_SIZES);
  int hm = ns > 0 ? heat_height(r, sizes[ns - 1]) : 0;
  int height = ns > 0 ? CY1 + 60 + hm + 20 : 120;
  fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
          "font-family=\"sans-serif\">\n", W, height, W, height);
  fprintf(out, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n<!-- p2pkit bench, ");
  xml_text(out, r->hostname);
  fprintf(out, ", %s -->\n", r->date);
  if (ns == 0) {
    fputs("<text x=\"20\" y=\"60\" font-size=\"14\">no one-way bandwidth measurements to plot</text>\n",
          out);
  } else {
    line_chart(r, out, sizes, ns);
    heat_maps(r, out, sizes[ns - 1], CY1 + 60);
  }
  fputs("</svg>\n", out);
  if (ferror(out)) return p2pk_fail(P2PKIT_ERR_IO, "writing the SVG plot failed");
  return P2PKIT_SUCCESS;
}
