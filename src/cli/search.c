/* tfx-node search: hyperparameter trials, each a local cluster in its own run directory, run P at a time;
 * poor trials are stopped at validation points by the median rule; the summary is ranked by eval accuracy. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/fs.h"
#include "common/log.h"
#include "config/hparams.h"
#include "data/epochs.h"
#include "net/net.h"
#include "observe/metrics.h"
#include "store/ckpt.h"

#define MAX_TRIALS 256
#define MAX_EVALS 64

typedef struct trial {
  pid_t pid;
  int state; /* 0 waiting, 1 running, 2 done, 3 stopped early, 4 failed */
  char dir[1100], *summary;
  int n_evals;
  int64_t steps[MAX_EVALS];
  double acc[MAX_EVALS];
  int64_t last_step; /* where the trial's run ends: --max-steps or its max_steps, lowered by its epoch budget */
} trial;

static const char *const state_names[] = {"waiting", "running", "done", "stopped early", "failed"};

/* Reads the eval lines of a trial's metrics.jsonl (step, accuracy). */
static void read_evals(trial *t) {
  char path[1200], line[1024];
  snprintf(path, sizeof path, "%s/metrics.jsonl", t->dir);
  FILE *f = fopen(path, "r");
  t->n_evals = 0;
  while (f && fgets(line, sizeof line, f) && t->n_evals < MAX_EVALS) {
    const char *st = strstr(line, "\"step\": "), *acc = strstr(line, "\"accuracy\": ");
    if (!strstr(line, "\"kind\": \"eval\"") || !st || !acc) {
      continue;
    }
    t->steps[t->n_evals] = strtoll(st + 8, NULL, 10);
    t->acc[t->n_evals++] = strtod(acc + 12, NULL);
  }
  if (f) {
    fclose(f);
  }
}

static double acc_at(const trial *t, int64_t step) {
  double a = -1;
  for (int i = 0; i < t->n_evals && t->steps[i] <= step; i++) {
    a = t->acc[i];
  }
  return a;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median rule: a running trial whose latest accuracy is below the median of the others at that step stops. */
/* The median of the other trials' accuracy at step, over those that reached it; -1 if fewer than 2 did. */
static double median_at(trial *all, int n, int k, int64_t step) {
  double others[MAX_TRIALS];
  int m = 0;
  for (int i = 0; i < n; i++) {
    if (i != k && all[i].n_evals && all[i].steps[all[i].n_evals - 1] >= step) {
      others[m++] = acc_at(&all[i], step);
    }
  }
  if (m < 2) {
    return -1;
  }
  qsort(others, (size_t)m, sizeof(double), cmp_double);
  return m % 2 ? others[m / 2] : (others[m / 2 - 1] + others[m / 2]) / 2;
}

/* Median rule: at the latest of its validation points that at least two other trials have reached (a trial
 * ahead of the others is judged where they stand), a running trial below their median stops. */
static int below_median(trial *all, int n, int k) {
  trial *t = &all[k];
  for (int e = t->n_evals - 1; e >= 0; e--) {
    if (t->steps[e] >= t->last_step) {
      continue; /* the final evaluation: the trial is finishing anyway */
    }
    double median = median_at(all, n, k, t->steps[e]);
    if (median >= 0) {
      return t->acc[e] < median;
    }
  }
  return 0;
}

static int start_trial(trial *t, const char *self, const tfx_cli_opts *o, const tfx_node *n) {
  char exp[1200], log[1200], steps[32], workers[16], ps[16];
  snprintf(workers, sizeof workers, "%d", o->workers);
  snprintf(ps, sizeof ps, "%d", o->ps);
  snprintf(exp, sizeof exp, "%s/trial.json", t->dir);
  snprintf(log, sizeof log, "%s.log", t->dir);
  snprintf(steps, sizeof steps, "%lld", (long long)(o->max_steps > 0 ? o->max_steps : n->cfg.max_steps));
  if ((t->pid = fork()) < 0) {
    return -1;
  }
  if (t->pid == 0) {
    FILE *f = freopen(log, "w", stdout);
    if (f) {
      dup2(fileno(stdout), STDERR_FILENO);
    }
    execl(self, "tfx-node", "local", "--config", exp, "--run-dir", t->dir, "--max-steps", steps, "--workers", workers,
          "--ps", ps, (char *)NULL);
    _exit(127);
  }
  t->state = 1;
  tfx_log(TFX_LOG_INFO, "SEARCH-START", "%s: %s", t->dir, t->summary);
  return 0;
}

static void reap(trial *all, int n) {
  int status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    for (int i = 0; i < n; i++) {
      if (all[i].pid != pid) {
        continue;
      }
      int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      all[i].state = all[i].state == 3 ? 3 : ok ? 2 : 4;
      read_evals(&all[i]);
    }
  }
}

static int count_state(const trial *all, int n, int state) {
  int c = 0;
  for (int i = 0; i < n; i++) {
    c += all[i].state == state;
  }
  return c;
}

static void supervise(trial *all, int n, const char *self, const tfx_cli_opts *o, const tfx_node *n_) {
  int next = 0;
  while ((next < n || count_state(all, n, 1)) && !tfx_stop_requested()) {
    while (next < n && count_state(all, n, 1) < o->parallel) {
      start_trial(&all[next++], self, o, n_);
    }
    sleep(1);
    reap(all, n);
    for (int i = 0; i < n; i++) {
      if (all[i].state != 1) {
        continue;
      }
      read_evals(&all[i]);
      if (n_->cfg.search_early_stopping && below_median(all, n, i)) {
        all[i].state = 3;
        kill(all[i].pid, SIGTERM);
        tfx_log(TFX_LOG_INFO, "SEARCH-STOP", "%s: below the median at step %lld", all[i].dir,
                (long long)all[i].steps[all[i].n_evals - 1]);
      }
    }
  }
  for (int i = 0; i < n; i++) {
    if (all[i].state == 1) {
      kill(all[i].pid, SIGTERM);
    }
  }
  while (count_state(all, n, 1) && waitpid(-1, NULL, 0) > 0) {
    reap(all, n);
  }
}

static double final_acc(const trial *t) {
  return t->n_evals ? t->acc[t->n_evals - 1] : -1;
}

/* Prints the ranked table and writes ROOT/search.json. */
static int summarize(trial *all, int n, const char *root, tfx_err *err) {
  int order[MAX_TRIALS];
  for (int i = 0; i < n; i++) {
    order[i] = i;
  }
  for (int i = 1; i < n; i++) {
    for (int j = i; j > 0 && final_acc(&all[order[j]]) > final_acc(&all[order[j - 1]]); j--) {
      int x = order[j];
      order[j] = order[j - 1];
      order[j - 1] = x;
    }
  }
  char *json = malloc(65536), path[1100];
  size_t len = (size_t)snprintf(json, 65536, "{\"metric\": \"accuracy\", \"trials\": [");
  printf("%-4s %-28s %-9s %-8s %-14s %s\n", "rank", "trial", "accuracy", "step", "status", "hyperparameters");
  for (int r = 0; r < n; r++) {
    const trial *t = &all[order[r]];
    int64_t step = t->n_evals ? t->steps[t->n_evals - 1] : 0;
    printf("%-4d %-28s %-9.4f %-8lld %-14s %s\n", r + 1, strrchr(t->dir, '/') + 1, final_acc(t), (long long)step,
           state_names[t->state], t->summary);
    if (len < 60000) {
      len += (size_t)snprintf(json + len, 65536 - len,
                              "%s{\"rank\": %d, \"dir\": \"%s\", \"accuracy\": %.6g, \"step\": %lld, \"status\": "
                              "\"%s\", \"hyperparameters\": \"%s\"}",
                              r ? ", " : "", r + 1, t->dir, final_acc(t), (long long)step, state_names[t->state],
                              t->summary);
    }
  }
  snprintf(json + len, 65536 - len, "]}\n");
  snprintf(path, sizeof path, "%s/search.json", root);
  int rc = tfx_write_file(path, json, err);
  free(json);
  return rc;
}

static char *read_file(const char *path, tfx_err *err) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    tfx_err_sys(err, TFX_ECONFIG, "%s", path);
    return NULL;
  }
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)len + 1);
  if (s && fread(s, 1, (size_t)len, f) == (size_t)len) {
    s[len] = '\0';
  } else {
    free(s);
    s = NULL;
    tfx_err_set(err, TFX_ESYS, "read %s", path);
  }
  fclose(f);
  return s;
}

/* The step trial experiment exp ends at, as its `tfx-node local` run computes it (--max-steps over the file's
 * max_steps, then the epoch budget of its own batch size), into *last. */
static int trial_last_step(const char *exp, const tfx_cli_opts *o, int64_t *last, tfx_err *err) {
  tfx_config cfg;
  tfx_config_init(&cfg);
  int64_t budget;
  int rc = tfx_config_parse(&cfg, exp, "trial", err);
  if (!rc && o->max_steps > 0) {
    cfg.max_steps = o->max_steps;
    cfg.max_steps_given = 1;
  }
  if (!rc && !(rc = tfx_epochs_apply(&cfg, o->workers, &budget, err))) {
    *last = cfg.max_steps;
  }
  return rc;
}

/* Writes every trial's experiment; stops early at the end of a grid. */
static int prepare(trial *all, int *n, const char *text, const tfx_node *node, const tfx_cli_opts *o, tfx_err *err) {
  for (int i = 0; i < *n; i++) {
    char *exp, path[1200];
    snprintf(all[i].dir, sizeof all[i].dir, "%s/trial-%03d", node->run_dir, i);
    int rc = tfx_hparams_trial(text, node->cfg.search_method, (uint64_t)node->cfg.seed, i, &exp, &all[i].summary, err);
    if (rc == TFX_ENOTFOUND && i > 0) {
      return *n = i, TFX_OK;
    }
    if (rc || (rc = tfx_mkdirs(all[i].dir, err))) {
      return rc;
    }
    snprintf(path, sizeof path, "%s/trial.json", all[i].dir);
    if (!(rc = tfx_write_file(path, exp, err))) {
      rc = trial_last_step(exp, o, &all[i].last_step, err);
    }
    free(exp);
    if (rc) {
      return rc;
    }
  }
  return TFX_OK;
}

int tfx_search_run(tfx_node *n, const tfx_cli_opts *o, const char *self, tfx_err *err) {
  if (!n->config_path[0]) {
    return tfx_err_set(err, TFX_ECONFIG, "search needs --config EXPERIMENT.json with hyperparameters");
  }
  int count = o->trials < 1 ? 1 : o->trials > MAX_TRIALS ? MAX_TRIALS : o->trials;
  if (o->parallel < 1) {
    return tfx_err_set(err, TFX_EINVAL, "--parallel must be at least 1");
  }
  char *text = read_file(n->config_path, err);
  trial *all = calloc((size_t)count, sizeof *all);
  int rc = !text ? TFX_ECONFIG : !all ? tfx_err_set(err, TFX_ENOMEM, "out of memory") : tfx_mkdirs(n->run_dir, err);
  if (!rc) {
    rc = prepare(all, &count, text, n, o, err);
  }
  if (!rc) {
    tfx_log(TFX_LOG_INFO, "SEARCH", "%d trial(s), %d at a time, %s search, results in %s", count, o->parallel,
            tfx_config_choice_name("search.method", n->cfg.search_method), n->run_dir);
    supervise(all, count, self, o, n);
    rc = summarize(all, count, n->run_dir, err);
  }
  for (int i = 0; all && i < count; i++) {
    free(all[i].summary);
  }
  free(all);
  free(text);
  return rc;
}
