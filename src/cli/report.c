/* tfx-node report --run-dir RUN: a static, offline HTML report of a run: plots (inline SVG) of training loss and
 * eval accuracy against step, the final metrics, the variables and which ps held them, the resolved config. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "observe/metrics.h"
#include "store/weights.h"

#define MAX_POINTS 4096

typedef struct series {
  double x[MAX_POINTS], y[MAX_POINTS];
  int n;
} series;

static void add(series *s, double x, double y) {
  if (s->n < MAX_POINTS && isfinite(y)) {
    s->x[s->n] = x;
    s->y[s->n++] = y;
  }
}

/* Reads train loss and eval accuracy series; *last_eval gets the last eval line. */
static void read_series(const char *run_dir, series *loss, series *acc, char *last_eval, size_t n) {
  char path[1100], line[1024];
  snprintf(path, sizeof path, "%s/metrics.jsonl", run_dir);
  FILE *f = fopen(path, "r");
  while (f && fgets(line, sizeof line, f)) {
    const char *st = strstr(line, "\"step\": "), *l = strstr(line, "\"loss\": "), *a = strstr(line, "\"accuracy\": ");
    double step = st ? strtod(st + 8, NULL) : 0;
    if (strstr(line, "\"kind\": \"train\"") && l) {
      add(loss, step, strtod(l + 8, NULL));
    }
    if (strstr(line, "\"kind\": \"eval\"") && a) {
      add(acc, step, strtod(a + 12, NULL));
      line[strcspn(line, "\n")] = '\0';
      snprintf(last_eval, n, "%s", line);
    }
  }
  if (f) {
    fclose(f);
  }
}

/* An inline SVG line plot. */
static void svg(FILE *out, const char *title, const series *s, const char *color) {
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (int i = 0; i < s->n; i++) {
    x0 = fmin(x0, s->x[i]);
    x1 = fmax(x1, s->x[i]);
    y0 = fmin(y0, s->y[i]);
    y1 = fmax(y1, s->y[i]);
  }
  if (x1 <= x0) {
    x1 = x0 + 1;
  }
  if (y1 <= y0) {
    y1 = y0 + 1;
  }
  fprintf(out, "<figure><figcaption>%s</figcaption><svg width=\"480\" height=\"240\" style=\"border:1px solid #ccc\">",
          title);
  fprintf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", color);
  for (int i = 0; i < s->n; i++) {
    fprintf(out, "%.1f,%.1f ", 40 + (s->x[i] - x0) / (x1 - x0) * 430, 220 - (s->y[i] - y0) / (y1 - y0) * 200);
  }
  fprintf(out,
          "\"/><text x=\"2\" y=\"20\" font-size=\"11\">%.4g</text><text x=\"2\" y=\"220\" font-size=\"11\">%.4g</text>",
          y1, y0);
  fprintf(out,
          "<text x=\"40\" y=\"236\" font-size=\"11\">step %.0f</text><text x=\"420\" y=\"236\" "
          "font-size=\"11\">%.0f</text>",
          x0, x1);
  fprintf(out, "</svg></figure>\n");
}

static void escaped(FILE *out, const char *s) {
  for (; s && *s; s++) {
    if (*s == '<') {
      fputs("&lt;", out);
    } else if (*s == '&') {
      fputs("&amp;", out);
    } else {
      fputc(*s, out);
    }
  }
}

static void variables(FILE *out, const char *run_dir) {
  tfx_weights ws;
  if (tfx_weights_from_run(run_dir, &ws, NULL) != TFX_OK) {
    fputs("<p>No complete checkpoint.</p>\n", out);
    return;
  }
  fprintf(
      out,
      "<h2>Variables (checkpoint at step %lld)</h2><table><tr><th>variable</th><th>values</th><th>held by</th></tr>\n",
      (long long)ws.step);
  for (int i = 0; i < ws.n; i++) {
    fprintf(out, "<tr><td>%s</td><td>%zu</td><td>%s</td></tr>\n", ws.w[i].name, ws.w[i].count, ws.w[i].holders);
  }
  fputs("</table>\n", out);
  tfx_weights_fini(&ws);
}

static char *read_all(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    return NULL;
  }
  size_t cap = 1 << 20, len;
  char *s = malloc(cap);
  if (s) {
    len = fread(s, 1, cap - 1, f);
    s[len] = '\0';
  }
  fclose(f);
  return s;
}

int tfx_report_run(const tfx_node *n, const tfx_cli_opts *o, tfx_err *err) {
  static series loss, acc;
  char last[1024] = "none", path[1100], cfgpath[1100];
  loss.n = acc.n = 0;
  read_series(n->run_dir, &loss, &acc, last, sizeof last);
  snprintf(path, sizeof path, "%s", o->output[0] ? o->output : "");
  if (!path[0]) {
    snprintf(path, sizeof path, "%s/report.html", n->run_dir);
  }
  FILE *out = fopen(path, "w");
  if (!out) {
    return tfx_err_sys(err, TFX_ESYS, "open %s", path);
  }
  fprintf(
      out,
      "<!doctype html><html><head><meta charset=utf-8><title>tfx report: %s</title><style>body{font:14px sans-serif;"
      "margin:16px}figure{display:inline-block;margin:8px}td,th{padding:2px "
      "8px;text-align:left}</style></head><body>\n",
      n->run_dir);
  fprintf(out, "<h1>tfx run %s</h1><p>Last evaluation: <code>", n->run_dir);
  escaped(out, last);
  fputs("</code></p>\n", out);
  svg(out, "training loss", &loss, "#c33");
  svg(out, "eval accuracy", &acc, "#36c");
  variables(out, n->run_dir);
  snprintf(cfgpath, sizeof cfgpath, "%s/config.json", n->run_dir);
  char *cfg = read_all(cfgpath);
  fputs("<h2>Resolved experiment</h2><pre>", out);
  escaped(out, cfg ? cfg : "(no config.json)");
  fputs("</pre></body></html>\n", out);
  free(cfg);
  int bad = fclose(out) != 0;
  if (bad) {
    return tfx_err_sys(err, TFX_ESYS, "write %s", path);
  }
  printf("report: %s (%d training points, %d evaluations)\n", path, loss.n, acc.n);
  return TFX_OK;
}
