/* TensorBoard scalar event files. */
#include "observe/events.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/log.h"
#include "data/tfrecord.h"
#include "event.pb-c.h"

struct tfx_events {
  char path[1200];        /* created at the first event: a run refused before it writes nothing */
  tfx_tfrecord_writer *w; /* NULL until then */
  int failed;             /* creating it failed (logged once): events are dropped */
};

static double now(void) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return (double)tv.tv_sec + tv.tv_usec / 1e6;
}

/* Packs and appends one Event. */
static void put(tfx_events *e, Tensorflow__Event *ev) {
  size_t n = tensorflow__event__get_packed_size(ev);
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf) {
    return;
  }
  tensorflow__event__pack(ev, buf);
  tfx_tfrecord_writer_write(e->w, buf, n, NULL);
  free(buf);
}

/* Creates the file and writes its file_version record; logs once and drops events when it cannot. */
static int create(tfx_events *e) {
  tfx_err err = {0};
  if (e->failed || tfx_tfrecord_writer_open(e->path, &e->w, &err)) {
    if (!e->failed) {
      tfx_log(TFX_LOG_WARN, "EVENTS-OPEN", "no TensorBoard events for this run: %s", err.msg);
    }
    e->failed = 1;
    return err.code ? err.code : TFX_ESYS;
  }
  Tensorflow__Event ev;
  tensorflow__event__init(&ev);
  ev.wall_time = now();
  ev.what_case = TENSORFLOW__EVENT__WHAT_FILE_VERSION;
  ev.file_version = "brain.Event:2";
  put(e, &ev);
  return TFX_OK;
}

int tfx_events_open(const char *run_dir, tfx_events **out, tfx_err *err) {
  char host[64] = "host";
  gethostname(host, sizeof host - 1);
  tfx_events *e = calloc(1, sizeof *e);
  if (!e) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  snprintf(e->path, sizeof e->path, "%s/events.out.tfevents.%lld.%s.%d.tfx", run_dir, (long long)now(), host,
           (int)getpid());
  *out = e;
  return TFX_OK;
}

/* Writes names/values[0..n) (n <= 32; the undefined ones and `worker` left out) as one summary event at step,
 * tagged kind/name plus who. */
static void write_summary(tfx_events *e, const char *kind, int64_t step, const char *const *names,
                          const double *values, int n, const char *who) {
  Tensorflow__Summary__Value vals[32], *ptrs[32];
  char tags[32][96];
  int k = 0;
  for (int i = 0; i < n; i++) {
    if (!isfinite(values[i]) || !strcmp(names[i], "worker")) {
      continue;
    }
    tensorflow__summary__value__init(&vals[k]);
    snprintf(tags[k], sizeof tags[k], "%s/%s%s", kind, names[i], who);
    vals[k].tag = tags[k];
    vals[k].simple_value = (float)values[i];
    vals[k].value_case = TENSORFLOW__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
    ptrs[k] = &vals[k];
    k++;
  }
  Tensorflow__Summary summary;
  tensorflow__summary__init(&summary);
  summary.value = ptrs;
  summary.n_value = (size_t)k;
  Tensorflow__Event ev;
  tensorflow__event__init(&ev);
  ev.wall_time = now();
  ev.step = step;
  ev.what_case = TENSORFLOW__EVENT__WHAT_SUMMARY;
  ev.summary = &summary;
  put(e, &ev);
}

void tfx_events_write(tfx_events *e, const char *kind, int64_t step, const char *const *names, const double *values,
                      int n) {
  if (!e || n <= 0 || (!e->w && create(e))) {
    return;
  }
  char who[32] = "";
  for (int i = 0; i < n; i++) {
    if (!strcmp(names[i], "worker") && isfinite(values[i])) {
      snprintf(who, sizeof who, "/worker_%d", (int)values[i]); /* each worker's series under its own tags */
    }
  }
  for (int i = 0; i < n; i += 32) { /* a record of many fields (per_class) as several events of one step */
    write_summary(e, kind, step, names + i, values + i, n - i < 32 ? n - i : 32, who);
  }
}

void tfx_events_close(tfx_events *e) {
  if (!e) {
    return;
  }
  tfx_tfrecord_writer_close(e->w, NULL);
  free(e);
}
