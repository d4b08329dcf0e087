/* The metrics.jsonl writer. */
#include "observe/metrics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

#include "common/fs.h"

struct tfx_metrics {
  FILE *f;
};

int tfx_metrics_open(const char *run_dir, tfx_metrics **out, tfx_err *err) {
  char path[1100];
  snprintf(path, sizeof path, "%s/metrics.jsonl", run_dir);
  tfx_metrics *m = calloc(1, sizeof *m);
  if (!m) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  if (!(m->f = tfx_fopen_write(path, "a"))) {
    free(m);
    return tfx_err_sys(err, TFX_ESYS, "open %s", path);
  }
  *out = m;
  return TFX_OK;
}

void tfx_metrics_close(tfx_metrics *m) {
  if (!m) {
    return;
  }
  fclose(m->f);
  free(m);
}

int64_t tfx_metrics_last_step(const char *run_dir, const char *kind) {
  char path[1100], want[64], *line = NULL;
  snprintf(path, sizeof path, "%s/metrics.jsonl", run_dir);
  snprintf(want, sizeof want, "{\"kind\": \"%s\", \"step\": %%lld", kind);
  FILE *f = fopen(path, "r");
  size_t cap = 0;
  int64_t last = -1;
  while (f && getline(&line, &cap, f) > 0) {
    long long step;
    if (sscanf(line, want, &step) == 1 && step > last) {
      last = step;
    }
  }
  free(line);
  if (f) {
    fclose(f);
  }
  return last;
}

void tfx_metrics_write(tfx_metrics *m, const char *kind, int64_t step, const char *const *names, const double *values,
                       int n) {
  tfx_metrics_write_json(m, kind, step, names, values, n, NULL);
}

void tfx_metrics_write_json(tfx_metrics *m, const char *kind, int64_t step, const char *const *names,
                            const double *values, int n, const char *json) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  fprintf(m->f, "{\"kind\": \"%s\", \"step\": %lld, \"time\": %.3f", kind, (long long)step,
          (double)tv.tv_sec + tv.tv_usec / 1e6);
  for (int i = 0; i < n; i++) {
    if (isfinite(values[i])) {
      fprintf(m->f, ", \"%s\": %.6g", names[i], values[i]);
    } else {
      fprintf(m->f, ", \"%s\": null", names[i]);
    }
  }
  if (json && *json) {
    fprintf(m->f, ", %s", json);
  }
  fputs("}\n", m->f);
  fflush(m->f);
}
