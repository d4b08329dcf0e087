/* tfx-node runs --root DIR: every run directory below DIR (one holding metrics.jsonl) as a table: steps, last
 * eval accuracy and loss, state (checkpointed step), time. The files are the source of truth; this only reads. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt.h"
#include "cli.h"

typedef struct run_row {
  char name[256];
  long long last_step, eval_step, ckpt;
  double accuracy, loss, start, end;
} run_row;

/* Reads what the table shows from one run's metrics.jsonl; 0 if dir is not a run. */
static int read_run(const char *dir, run_row *r) {
  char path[1400], line[1024];
  snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
  FILE *f = fopen(path, "r");
  if (!f) {
    return 0;
  }
  r->accuracy = r->loss = -1, r->start = 0;
  while (fgets(line, sizeof line, f)) {
    const char *st = strstr(line, "\"step\": "), *t = strstr(line, "\"time\": ");
    long long step = st ? strtoll(st + 8, NULL, 10) : 0;
    double when = t ? strtod(t + 8, NULL) : 0;
    if (!r->start) {
      r->start = when;
    }
    r->end = when, r->last_step = step > r->last_step ? step : r->last_step;
    if (strstr(line, "\"kind\": \"eval\"")) {
      const char *a = strstr(line, "\"accuracy\": "), *l = strstr(line, "\"loss\": ");
      r->eval_step = step, r->accuracy = a ? strtod(a + 12, NULL) : -1, r->loss = l ? strtod(l + 8, NULL) : -1;
    }
  }
  fclose(f);
  int64_t ck;
  char cdir[1100];
  r->ckpt = tfx_ckpt_latest(dir, &ck, cdir, sizeof cdir, NULL) == TFX_OK ? ck : -1;
  return 1;
}

int tfx_runs_run(const tfx_cli_opts *o, tfx_err *err) {
  const char *root = o->target[0] ? o->target : "runs";
  DIR *d = opendir(root);
  if (!d) {
    return tfx_err_sys(err, TFX_ENOTFOUND, "runs --root %s", root);
  }
  printf("%-32s %10s %10s %10s %10s %10s %8s\n", "run", "step", "eval_step", "accuracy", "loss", "ckpt", "seconds");
  struct dirent *de;
  int count = 0;
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.') {
      continue;
    }
    char dir[1200];
    run_row r;
    memset(&r, 0, sizeof r);
    snprintf(dir, sizeof dir, "%s/%s", root, de->d_name);
    if (!read_run(dir, &r)) {
      continue;
    }
    printf("%-32s %10lld %10lld %10.4f %10.4f %10lld %8.1f\n", de->d_name, r.last_step, r.eval_step, r.accuracy, r.loss,
           r.ckpt, r.end - r.start);
    count++;
  }
  closedir(d);
  printf("%d run(s) under %s\n", count, root);
  return TFX_OK;
}
