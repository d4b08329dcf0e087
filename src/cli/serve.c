/* tfx-node serve: TensorFlow Serving's REST API over a run's newest checkpoint, following the run as it trains, or
 * over an export (serve.h). The main thread watches the run directory; the HTTP thread parses; the scorer thread
 * scores. */
#include <dirent.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/serve.h"
#include "common/log.h"
#include "observe/notify.h"
#include "store/ckpt.h"

typedef struct server {
  const tfx_node *n;
  const tfx_cli_opts *o;
  tfx_serve_queue *q;
  tfx_serve_http *http;
  int64_t served, failed; /* the step served, and the newest step that could not be loaded */
} server;

/* The newest checkpoint of run_dir whose manifest is written (the master writes it last), by name: cheap enough to
 * look at every 100 ms; the checksums are checked when it is loaded. *step -1 when there is none. */
static void newest(const char *run_dir, int64_t *step) {
  char path[1100];
  snprintf(path, sizeof path, "%s/checkpoints", run_dir);
  DIR *d = opendir(path);
  struct dirent *de;
  *step = -1;
  while (d && (de = readdir(d))) {
    char *end, manifest[1400];
    long long s = strncmp(de->d_name, "ckpt-", 5) ? -1 : strtoll(de->d_name + 5, &end, 10);
    if (s <= *step || strlen(de->d_name) != 17 || *end) {
      continue;
    }
    snprintf(manifest, sizeof manifest, "%s/%s/manifest.json", path, de->d_name);
    if (access(manifest, F_OK) == 0) {
      *step = s;
    }
  }
  if (d) {
    closedir(d);
  }
}

/* When dir/file (file "": dir itself) was last written (Unix seconds), or 0. */
static double written_at(const char *dir, const char *file) {
  char path[1200];
  struct stat st;
  snprintf(path, sizeof path, "%s%s%s", dir, file[0] ? "/" : "", file);
  return stat(path, &st) ? 0 : (double)st.st_mtime;
}

/* The scorer of the checkpoint at step, handed to the queue; a checkpoint that will not load is logged and the
 * model served stays. */
static void follow(server *s, int64_t step) {
  char dir[1100];
  tfx_ckpt_dir(s->n->run_dir, step, dir, sizeof dir);
  tfx_scorer *next = NULL;
  tfx_err err;
  int rc = tfx_scorer_open_run(s->n->run_dir, dir, TFX_SERVE_MAX_INSTANCES, &next, &err);
  if (rc) {
    s->failed = step;
    tfx_serve_http_swap_failed(s->http);
    tfx_log(TFX_LOG_ERROR, "SERVE-SWAP-FAIL", "step %lld not served (step %lld serves on): %s", (long long)step,
            (long long)s->served, err.msg);
    return;
  }
  tfx_serve_queue_swap(s->q, next);
  tfx_serve_http_model(s->http, step, written_at(dir, "manifest.json"));
  tfx_log(TFX_LOG_INFO, "SERVE-SWAP", "serving step %lld (was %lld)", (long long)step, (long long)s->served);
  s->served = step;
}

/* Waits for the run's first checkpoint (a server started beside a cluster comes up before it has one). */
static int first_model(const tfx_node *n, const tfx_cli_opts *o, tfx_scorer **out, tfx_err *err) {
  if (o->target[0]) {
    return tfx_scorer_open_export(o->target, TFX_SERVE_MAX_INSTANCES, out, err);
  }
  int64_t step;
  for (int logged = 0; !tfx_stop_requested(); logged = 1) {
    newest(n->run_dir, &step);
    if (step >= 0) {
      return tfx_scorer_open_run(n->run_dir, NULL, TFX_SERVE_MAX_INSTANCES, out, err);
    }
    if (!logged) {
      tfx_log(TFX_LOG_INFO, "SERVE-WAIT", "%s has no checkpoint yet: waiting for the first", n->run_dir);
      /* Started: a unit started with its cluster (tfx.target) must not hold the target's start until the run's
       * first checkpoint, which may be its last. */
      tfx_notify_ready("waiting for the first checkpoint");
    }
    usleep(200 * 1000);
  }
  return tfx_err_set(err, TFX_EPEER, "stopped before %s had a checkpoint", n->run_dir);
}

void tfx_serve_model_name(const tfx_config *cfg, const char *dir, char *out, size_t n) {
  char copy[1100];
  snprintf(copy, sizeof copy, "%s", dir);
  snprintf(out, n, "%s", cfg->name[0] ? cfg->name : basename(copy));
}

static int start(server *s, tfx_scorer *sc, tfx_err *err) {
  const tfx_cli_opts *o = s->o;
  char name[128];
  tfx_serve_model_name(tfx_scorer_config(sc), o->target[0] ? o->target : s->n->run_dir, name, sizeof name);
  int64_t step = tfx_scorer_step(sc);
  size_t dim = tfx_scorer_inputs(sc), rows = tfx_scorer_lazy_rows(sc), bytes = tfx_scorer_lazy_bytes(sc);
  const char *bind = s->n->bind_host[0] ? s->n->bind_host : "127.0.0.1"; /* loopback unless --bind says otherwise */
  tfx_config *cfg = malloc(sizeof *cfg); /* the scorer is the queue's once handed over */
  if (!cfg) {
    tfx_scorer_close(sc);
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  *cfg = *tfx_scorer_config(sc);
  int rc = tfx_serve_queue_create(sc, o->max_batch, o->batch_wait_us, &s->q, err);
  if (rc) {
    tfx_scorer_close(sc);
  } else if (!(rc = tfx_serve_http_start(bind, o->port, name, cfg, dim, s->q, &s->http, err))) {
    s->served = step;
    tfx_serve_http_model(s->http, step, written_at(tfx_scorer_source(sc), o->target[0] ? "" : "manifest.json"));
    tfx_log(TFX_LOG_INFO, "SERVE-START",
            "serving '%s' step %lld on %s:%d (POST /v1/models/%s:predict); batches of up to %d, wait %d us; lazy "
            "tables: %zu rows indexed in %.1f MiB, read in place",
            name, (long long)step, bind, o->port, name, o->max_batch, o->batch_wait_us, rows,
            (double)bytes / (1 << 20));
  }
  free(cfg);
  return rc;
}

int tfx_serve_run(const tfx_node *n, const tfx_cli_opts *o, tfx_err *err) {
  if (o->port < 1) {
    return tfx_err_set(err, TFX_EINVAL, "serve needs --port N (1..65535)");
  }
  server s = {.n = n, .o = o, .failed = -1};
  tfx_scorer *sc = NULL;
  int rc = first_model(n, o, &sc, err);
  if (!rc) {
    rc = start(&s, sc, err);
  }
  if (!rc) {
    tfx_notify_ready("serving");
  }
  while (!rc && !tfx_stop_requested()) {
    int64_t step;
    usleep(100 * 1000);
    tfx_notify_status("serving step %lld", (long long)s.served);
    if (o->target[0]) {
      continue; /* an export holds one step */
    }
    newest(n->run_dir, &step);
    if (step > s.served && step != s.failed) {
      follow(&s, step);
    }
  }
  tfx_notify_stopping();
  tfx_serve_http_stop(s.http);
  tfx_serve_queue_destroy(s.q);
  return rc;
}
