/* Argument parsing for tfx-node. */
#include "cli/args.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/log.h"
#include "common/version.h"
#include "config/plugin.h"

static const char *const commands[] = {"local",  "train",  "status",  "config",  "model",
                                       "plan",   "export", "inspect", "predict", "evaluate",
                                       "search", "runs",   "report",  "keygen",  "serve", "spool", NULL};

static const char usage[] =
    "usage: tfx-node [COMMAND] [OPTIONS]\n"
    "\n"
    "Without a command, runs the role that TF_CONFIG (or --role/--index) names: chief|master, worker or ps;\n"
    "with no TF_CONFIG and a --config, trains in this process (local mode, like `train`).\n"
    "\n"
    "commands:\n"
    "  local    --config X [--workers N] [--ps M] [--run-dir D] [--max-steps N]   a whole cluster on this host\n"
    "           [--fresh] [--http-port N] [--bind HOST] (children listen on 127.0.0.1 unless --bind says otherwise)\n"
    "           [--serve-port N] (also `serve` the run on port N while it trains; the live page links it)\n"
    "  train    --config X [--run-dir D] [--max-steps N] [--fresh]  single-process training\n"
    "  status   --address HOST:PORT [--config X]                ask a running node for its role and state (keys: X's\n"
    "                                                           security section or TFX_SECURITY_* variables)\n"
    "  config   --config X                                      print the resolved experiment\n"
    "  model    --config X                                      print the layer table\n"
    "  plan     --config X --ps N                               print the placement plan\n"
    "  report   --run-dir RUN [--output FILE]                   static HTML report (plots, metrics, variables)\n"
    "  runs     [--root DIR] [--where 'accuracy>0.88'] [--compare RUN RUN] [--rebuild]   list, filter or compare\n"
    "                                                           the runs below DIR (default runs)\n"
    "  search   --config X [--trials N] [--parallel P] [--run-dir ROOT] [--max-steps N]   hyperparameter search\n"
    "  evaluate --run-dir RUN [--checkpoint STEP|DIR|best] [--data NAME] [--steps N]  evaluate a checkpoint\n"
    "           (--steps N: the first N batches of 1000 examples of the eval set; default all)\n"
    "  export   --run-dir RUN --out DIR [--checkpoint STEP|DIR|best] [--best]  safetensors model directory\n"
    "           (--best: the best checkpoint by checkpoint.keep_best, as RUN/checkpoints/best.json names it)\n"
    "  inspect  RUN|CHECKPOINT_DIR|EXPORT_DIR [--var NAME]      list variables (or print one)\n"
    "  predict  --run-dir RUN [--checkpoint STEP|DIR|best]|--export DIR --input IDX [--output FILE]\n"
    "           [--keys probabilities,classes]\n"
    "  serve    --run-dir RUN|--export DIR --port N [--bind HOST] [--max-batch N] [--batch-wait-us N]\n"
    "           TensorFlow Serving's REST API (POST /v1/models/NAME:predict, GET /v1/models/NAME, /metrics),\n"
    "           following the run to each newer checkpoint\n"
    "  keygen   --out DIR [--name NAME]                         CURVE key pair: DIR/NAME.key (0600), DIR/NAME.pub\n"
    "  spool    --out DIR [--lines N]                           standard input into files landed in DIR (follow)\n"
    "\n"
    "options:\n"
    "  --role=ROLE --index=N   override TF_CONFIG's task\n"
    "  --tf-config=FILE        read TF_CONFIG from a file instead of the environment\n"
    "  --config=FILE           the experiment JSON\n"
    "  --set KEY=VALUE         override one experiment option (repeatable), e.g. --set optimizer.learning_rate=0.05\n"
    "  --run-dir=DIR           run directory (metrics.jsonl, config.json, checkpoints/); default tfx-run\n"
    "  --bind=HOST             bind on HOST instead of all interfaces\n"
    "  --http-port=N           serve /metrics (Prometheus) and /status (JSON) on port N\n"
    "  --fresh                 do not resume from the run directory's newest checkpoint\n"
    "  --log-level=LEVEL       debug|info|warn|error\n"
    "  --help, --version, --help-options (the experiment option table)\n";

/* Whether an option line of the usage ("  --run-dir=DIR ...") belongs in the help of a command whose usage lines
 * are text[0..n): the options those lines name, --set beside --config, and the log level and help every command
 * takes. */
static int option_applies(const char *opt, const char *text, size_t n) {
  char name[32];
  if (sscanf(opt, " --%31[a-z-]", name) != 1) {
    return 0;
  }
  char flag[40];
  snprintf(flag, sizeof flag, "--%s", name);
  int named = memmem(text, n, flag, strlen(flag)) != NULL;
  int set_beside_config = !strcmp(name, "set") && memmem(text, n, "--config", 8);
  return named || set_beside_config || !strcmp(name, "log-level") || !strcmp(name, "help");
}

/* The command's own help: its lines of the usage's command list (and their continuation lines), then the options
 * it takes, not every global option. */
static void print_command_help(const char *cmd) {
  char head[32];
  snprintf(head, sizeof head, "  %s ", cmd);
  const char *line = strstr(usage, head), *start = line, *opts = strstr(usage, "\noptions:\n");
  printf("usage: tfx-node %s [OPTIONS]\n\n", cmd);
  for (int first = 1; line && *line && (first || !strncmp(line, "           ", 11)); first = 0) {
    const char *end = strchr(line, '\n');
    printf("%.*s\n", (int)(end - line), line);
    line = end + 1;
  }
  size_t n = start ? (size_t)(line - start) : 0;
  printf("\noptions:\n");
  for (const char *o = opts ? opts + 10 : ""; *o;) {
    const char *end = strchr(o, '\n');
    size_t len = end ? (size_t)(end - o) : strlen(o);
    if (option_applies(o, start ? start : "", n)) {
      printf("%.*s\n", (int)len, o);
    }
    o += len + (end != NULL);
  }
}

/* The command named anywhere in argv (the help of `tfx-node --help train` is train's), or NULL. */
static const char *command_in(int argc, char **argv);

static int is_command(const char *s) {
  for (int i = 0; commands[i]; i++) {
    if (!strcmp(s, commands[i])) {
      return 1;
    }
  }
  return 0;
}

typedef struct raw {
  const char *role, *index, *tf_config, *config, *log_level, *max_steps, *workers, *ps;
  const char *sets[64];
  int n_sets;
} raw;

static int set_str(char *dst, size_t n, const char *v, const char *flag, tfx_err *err) {
  if (strlen(v) >= n) {
    return tfx_err_set(err, TFX_EINVAL, "%s: value too long", flag);
  }
  strcpy(dst, v);
  return TFX_OK;
}

static int parse_int(const char *s, const char *flag, long lo, long hi, long *out, tfx_err *err);

/* The flags read after every flag is seen (the task, TF_CONFIG, the experiment and its overrides): where each
 * value is kept in raw. */
static const struct raw_flag {
  const char *name;
  size_t off;
} raw_flags[] = {
    {"role", offsetof(raw, role)},           {"index", offsetof(raw, index)},
    {"tf-config", offsetof(raw, tf_config)}, {"config", offsetof(raw, config)},
    {"log-level", offsetof(raw, log_level)}, {"max-steps", offsetof(raw, max_steps)},
    {"workers", offsetof(raw, workers)},     {"ps", offsetof(raw, ps)},
};

/* The flags whose value is text copied into the arguments: where and how much room. */
#define TEXT_FLAG(name, field) \
  { name, offsetof(tfx_args, field), sizeof(((tfx_args *)0)->field) }
static const struct text_flag {
  const char *name;
  size_t off, size;
} text_flags[] = {
    TEXT_FLAG("run-dir", node.run_dir),      TEXT_FLAG("bind", node.bind_host),
    TEXT_FLAG("address", cli.address),       TEXT_FLAG("input", cli.input),
    TEXT_FLAG("output", cli.output),         TEXT_FLAG("out", cli.out_dir),
    TEXT_FLAG("export", cli.target),         TEXT_FLAG("keys", cli.keys),
    TEXT_FLAG("name", cli.key_name),         TEXT_FLAG("var", cli.var),
    TEXT_FLAG("checkpoint", cli.checkpoint), TEXT_FLAG("data", cli.data),
    TEXT_FLAG("root", cli.target),           TEXT_FLAG("where", cli.where),
    TEXT_FLAG("compare", cli.compare[0]),
};
#undef TEXT_FLAG

/* Stores a numeric flag's value; returns TFX_EINVAL for unknown flags. */
static int take_number(tfx_args *a, const char *flag, const char *v, tfx_err *err) {
  tfx_cli_opts *c = &a->cli;
  long n = 0;
  int rc;
  if (!strcmp(flag, "steps")) {
    rc = parse_int(v, flag, 1, 2000000000L, &n, err); /* evaluate --steps: batches of the eval set */
    c->steps = n;
  } else if (!strcmp(flag, "trials")) {
    rc = parse_int(v, flag, 1, 100000, &n, err);
    c->trials = (int)n;
  } else if (!strcmp(flag, "http-port")) {
    rc = parse_int(v, flag, 0, 65535, &n, err);
    a->node.http_port = (int)n;
  } else if (!strcmp(flag, "port")) {
    rc = parse_int(v, flag, 1, 65535, &n, err);
    c->port = (int)n;
  } else if (!strcmp(flag, "serve-port")) {
    rc = parse_int(v, flag, 1, 65535, &n, err);
    c->serve_port = (int)n;
  } else if (!strcmp(flag, "max-batch")) {
    rc = parse_int(v, flag, 1, 10000, &n, err);
    c->max_batch = (int)n;
  } else if (!strcmp(flag, "batch-wait-us")) {
    rc = parse_int(v, flag, 0, 1000000, &n, err);
    c->batch_wait_us = (int)n;
  } else if (!strcmp(flag, "lines")) {
    rc = parse_int(v, flag, 1, 2000000000L, &n, err);
    c->lines = n;
  } else if (!strcmp(flag, "parallel")) {
    rc = parse_int(v, flag, 1, 1024, &n, err);
    c->parallel = (int)n;
  } else {
    rc = tfx_err_set(err, TFX_EINVAL, "unknown option --%s (see --help)", flag);
  }
  return rc;
}

/* Stores one --flag value; returns TFX_EINVAL for unknown flags. */
static int take_flag(tfx_args *a, raw *r, const char *flag, const char *v, tfx_err *err) {
  for (size_t i = 0; i < sizeof raw_flags / sizeof raw_flags[0]; i++) {
    if (!strcmp(flag, raw_flags[i].name)) {
      *(const char **)((char *)r + raw_flags[i].off) = v;
      return TFX_OK;
    }
  }
  if (!strcmp(flag, "set")) {
    if (r->n_sets == 64) {
      return tfx_err_set(err, TFX_EINVAL, "--set: at most 64");
    }
    r->sets[r->n_sets++] = v;
    return TFX_OK;
  }
  for (size_t i = 0; i < sizeof text_flags / sizeof text_flags[0]; i++) {
    if (!strcmp(flag, text_flags[i].name)) {
      return set_str((char *)a + text_flags[i].off, text_flags[i].size, v, flag, err);
    }
  }
  return take_number(a, flag, v, err);
}

static int parse_int(const char *s, const char *flag, long lo, long hi, long *out, tfx_err *err) {
  char *end;
  long v = strtol(s, &end, 10);
  if (!*s || *end || v < lo || v > hi) {
    return tfx_err_set(err, TFX_EINVAL, "--%s: '%s' is not an integer in %ld..%ld", flag, s, lo, hi);
  }
  *out = v;
  return TFX_OK;
}

static const char *command_in(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (is_command(argv[i])) {
      return argv[i];
    }
  }
  return NULL;
}

/* Takes a flag without a value (--fresh, --rebuild, --best: --checkpoint best); 0 when arg is none of them. */
static int take_switch(tfx_args *a, const char *arg) {
  if (!strcmp(arg, "--fresh")) {
    a->node.resume = 0;
  } else if (!strcmp(arg, "--rebuild")) {
    a->cli.rebuild = 1;
  } else if (!strcmp(arg, "--best")) {
    snprintf(a->cli.checkpoint, sizeof a->cli.checkpoint, "best");
  } else {
    return 0;
  }
  return 1;
}

static int scan(tfx_args *a, raw *r, int argc, char **argv, tfx_err *err) {
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
      const char *cmd = a->command ? a->command : command_in(argc, argv);
      if (cmd) {
        print_command_help(cmd);
      } else {
        fputs(usage, stdout);
      }
      a->done = 1;
      return TFX_OK;
    }
    if (!strcmp(arg, "--version")) {
      printf("%s\n", tfx_version_line());
      a->done = 1;
      return TFX_OK;
    }
    if (!strcmp(arg, "--help-options")) {
      tfx_config_print_options();
      a->done = 1;
      return TFX_OK;
    }
    if (take_switch(a, arg)) {
      continue;
    }
    if (strncmp(arg, "--", 2)) {
      if (!a->command && is_command(arg)) {
        a->command = arg;
      } else if (a->command && !strcmp(a->command, "inspect") && !a->cli.target[0]) {
        set_str(a->cli.target, sizeof a->cli.target, arg, "inspect", err);
      } else if (a->cli.compare[0][0] && !a->cli.compare[1][0]) {
        set_str(a->cli.compare[1], sizeof a->cli.compare[1], arg, "compare", err); /* --compare RUN RUN */
      } else {
        return tfx_err_set(err, TFX_EINVAL, "unexpected argument '%s' (see --help)", arg);
      }
      continue;
    }
    char flag[64];
    const char *eq = strchr(arg + 2, '='), *val;
    snprintf(flag, sizeof flag, "%.*s", eq ? (int)(eq - arg - 2) : (int)strlen(arg + 2), arg + 2);
    if (eq) {
      val = eq + 1;
    } else if (i + 1 < argc) {
      val = argv[++i];
    } else {
      return tfx_err_set(err, TFX_EINVAL, "--%s needs a value", flag);
    }
    int rc = take_flag(a, r, flag, val, err);
    if (rc) {
      return rc;
    }
  }
  return TFX_OK;
}

/* Whether a parsed TF_CONFIG names no process at all ('{}'). */
static int cluster_is_empty(const tfx_cluster *c) {
  for (int r = 0; r < TFX_ROLE_COUNT; r++) {
    if (tfx_cluster_count(c, (tfx_role)r)) {
      return 0;
    }
  }
  return tfx_cluster_task_role(c) == TFX_ROLE_NONE;
}

static int load_cluster(tfx_args *a, const raw *r, tfx_err *err) {
  char *text = NULL;
  const char *json = getenv("TF_CONFIG");
  if (r->tf_config) {
    if (!(text = tfx_read_text(r->tf_config, 64u << 20, TFX_ECONFIG, err))) {
      return TFX_ECONFIG;
    }
    if (!text[strspn(text, " \t\r\n")]) {
      free(text); /* a file asked for and empty is a mistake; only the environment's empty TF_CONFIG means local */
      return tfx_err_set(err, TFX_ECONFIG, "--tf-config %s is empty (want TF_CONFIG's JSON)", r->tf_config);
    }
    json = text;
  }
  int rc = TFX_OK;
  if (json && *json) {
    rc = tfx_cluster_parse(json, &a->node.cluster, err);
  }
  free(text);
  if (rc || !a->node.cluster) {
    return rc;
  }
  if (cluster_is_empty(a->node.cluster)) {
    tfx_cluster_destroy(a->node.cluster); /* TF_CONFIG='{}': local mode, as TensorFlow reads it */
    a->node.cluster = NULL;
    return TFX_OK;
  }
  a->node.role = tfx_cluster_task_role(a->node.cluster);
  a->node.index = tfx_cluster_task_index(a->node.cluster);
  return TFX_OK;
}

static int apply_role(tfx_args *a, const raw *r, tfx_err *err) {
  tfx_node *n = &a->node;
  long idx = n->index;
  int rc;
  if (r->index && (rc = parse_int(r->index, "index", 0, 1 << 20, &idx, err))) {
    return rc;
  }
  tfx_role role = n->role;
  if (r->role && tfx_role_parse(r->role, &role)) {
    return tfx_err_set(err, TFX_ECONFIG, "--role '%s': want chief, master, worker or ps", r->role);
  }
  if (a->command) {
    return TFX_OK;
  }
  if (!n->cluster && r->config && !r->role) {
    a->command = "train"; /* no TF_CONFIG means local mode, as in TensorFlow: train in this process */
    return TFX_OK;
  }
  if (!n->cluster) {
    return tfx_err_set(err, TFX_ECONFIG,
                       "no TF_CONFIG: give a cluster (TF_CONFIG or --tf-config), an experiment to train locally "
                       "(--config), or a command such as 'local' (see --help)");
  }
  if ((r->role || r->index) && (rc = tfx_cluster_set_task(n->cluster, role, (int)idx, err))) {
    return rc;
  }
  if (tfx_cluster_task_role(n->cluster) == TFX_ROLE_NONE) {
    return tfx_err_set(err, TFX_ECONFIG, "TF_CONFIG names no task and no --role was given");
  }
  n->role = tfx_cluster_task_role(n->cluster);
  n->index = tfx_cluster_task_index(n->cluster);
  return TFX_OK;
}

/* The numbers of --max-steps, --workers and --ps, where given. */
static int take_counts(tfx_args *a, const raw *r, tfx_err *err) {
  long v = 0;
  int rc;
  if (r->max_steps && (rc = parse_int(r->max_steps, "max-steps", 1, 2000000000L, &v, err))) {
    return rc;
  }
  if (r->max_steps) {
    a->cli.max_steps = v;
  }
  if (r->workers && (rc = parse_int(r->workers, "workers", 1, 256, &v, err))) {
    return rc;
  }
  if (r->workers) {
    a->cli.workers = (int)v;
  }
  if (r->ps && (rc = parse_int(r->ps, "ps", 1, 256, &v, err))) {
    return rc;
  }
  if (r->ps) {
    a->cli.ps = (int)v;
  }
  return TFX_OK;
}

/* The experiment's model plugin (from beside the experiment file), or the hooks of a plugin-free experiment. */
static int load_plugin(tfx_args *a, const char *config, tfx_err *err) {
  if (!a->node.cfg.plugin[0]) {
    return tfx_hooks_create(&a->node.cfg, &a->node.plugin, err);
  }
  char base[512];
  snprintf(base, sizeof base, "%s", config);
  char *slash = strrchr(base, '/');
  if (slash) {
    *slash = '\0';
  } else {
    strcpy(base, ".");
  }
  return tfx_plugin_load(&a->node.cfg, base, &a->node.plugin, err);
}

static int load_experiment(tfx_args *a, const raw *r, tfx_err *err) {
  int rc;
  if (r->config && (rc = tfx_config_load(&a->node.cfg, r->config, err))) {
    return rc;
  }
  if ((rc = tfx_config_apply_env(&a->node.cfg, err))) {
    return rc;
  }
  if (r->config) {
    set_str(a->node.config_path, sizeof a->node.config_path, r->config, "config", err);
  }
  for (int i = 0; i < r->n_sets; i++) {
    if ((rc = tfx_config_set(&a->node.cfg, r->sets[i], err))) {
      return rc;
    }
  }
  if ((rc = take_counts(a, r, err))) {
    return rc;
  }
  int needs = !a->command || (strcmp(a->command, "status") && strcmp(a->command, "inspect") &&
                              strcmp(a->command, "runs") && strcmp(a->command, "keygen") &&
                              strcmp(a->command, "spool"));
  if (needs && !r->config && a->command && strcmp(a->command, "export") && strcmp(a->command, "predict") && strcmp(a->command, "serve") &&
      strcmp(a->command, "evaluate") && strcmp(a->command, "report")) {
    return tfx_err_set(err, TFX_ECONFIG, "%s needs --config EXPERIMENT.json", a->command);
  }
  if (needs && r->config && (rc = load_plugin(a, r->config, err))) {
    return rc;
  }
  return needs && r->config ? tfx_config_validate(&a->node.cfg, err) : TFX_OK;
}

/* cluster.replicas auto, decided for the cluster this process is part of (TF_CONFIG's counts), or for the one
 * `local` and `plan` make (--ps, --workers). */
static void resolve_replicas(tfx_args *a) {
  const tfx_cluster *c = a->node.cluster;
  int n_ps = c ? tfx_cluster_count(c, TFX_ROLE_PS) : a->cli.ps;
  int n_workers = c ? tfx_cluster_count(c, TFX_ROLE_WORKER) : a->cli.workers;
  tfx_config_resolve_replicas(&a->node.cfg, n_ps, n_workers);
}

int tfx_args_parse(tfx_args *a, int argc, char **argv, tfx_err *err) {
  raw r;
  memset(a, 0, sizeof *a);
  memset(&r, 0, sizeof r);
  tfx_config_init(&a->node.cfg);
  a->node.resume = 1;
  a->cli.workers = 2;
  a->cli.ps = 2;
  a->cli.trials = 4;
  a->cli.parallel = 1;
  a->cli.max_batch = 256;
  a->cli.batch_wait_us = 200;
  strcpy(a->node.run_dir, "tfx-run");
  ssize_t n = readlink("/proc/self/exe", a->self_exe, sizeof a->self_exe - 1);
  if (n > 0) {
    a->self_exe[n] = '\0';
  }
  int rc = scan(a, &r, argc, argv, err);
  if (rc || a->done) {
    return rc;
  }
  tfx_log_level level;
  if (r.log_level && tfx_log_parse_level(r.log_level, &level)) {
    return tfx_err_set(err, TFX_EINVAL, "--log-level '%s'", r.log_level);
  }
  if (r.log_level) {
    tfx_log_set_level(level);
  }
  if ((rc = load_cluster(a, &r, err)) || (rc = apply_role(a, &r, err)) || (rc = load_experiment(a, &r, err))) {
    return rc;
  }
  resolve_replicas(a);
  tfx_log_init(a->command ? a->command : tfx_role_name(a->node.role), a->command ? 0 : a->node.index);
  return TFX_OK;
}

void tfx_args_fini(tfx_args *a) {
  tfx_plugin_close(a->node.plugin);
  a->node.plugin = NULL;
  tfx_cluster_destroy(a->node.cluster);
  a->node.cluster = NULL;
}
