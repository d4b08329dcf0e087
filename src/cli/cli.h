/* The commands of tfx-node besides the cluster roles: local, train, status, config, model, plan, export,
 * inspect, predict. Each returns a tfx code; main maps TFX_ECONFIG/TFX_EINVAL to exit 2, others to 1. */
#ifndef TFX_CLI_H
#define TFX_CLI_H

#include <stdint.h>

#include "config/node.h"

typedef struct tfx_cli_opts {
  char address[300];    /* status */
  char input[512];      /* predict */
  char output[512];     /* predict */
  char out_dir[512];    /* export */
  char keys[128];       /* predict */
  char target[512];     /* inspect */
  char var[128];        /* inspect --var */
  int workers, ps;      /* local, plan */
  int trials, parallel; /* search */
  int64_t max_steps;    /* train, local: override (0 = from config) */
  char checkpoint[512]; /* evaluate: a step or a checkpoint directory */
  int64_t steps;        /* evaluate: batches of 1000 (0 = the whole set) */
  char data[32];        /* evaluate: a validation set's name (default: the eval set) */
  char where[256];      /* runs --where */
  char compare[2][256]; /* runs --compare RUN RUN */
  int rebuild;          /* runs --rebuild */
  char key_name[72];    /* keygen --name */
  int port;             /* serve --port */
  int serve_port;       /* local --serve-port: a server beside the cluster (0: none) */
  int max_batch;        /* serve --max-batch: instances scored as one batch */
  int batch_wait_us;    /* serve --batch-wait-us: how long a batch waits for more requests */
  long lines;           /* spool --lines: lines a file (0: 10000) */
} tfx_cli_opts;

/* Trains in one process (the reference for distributed runs); writes metrics, config and checkpoints. */
int tfx_train_run(tfx_node *n, const tfx_cli_opts *o, tfx_err *err);
/* Hyperparameter search: trials as local clusters, median early stopping, a ranked summary. */
int tfx_search_run(tfx_node *n, const tfx_cli_opts *o, const char *self_exe, tfx_err *err);
/* Writes RUN/report.html (or --output): plots, final metrics, variables and their ps, the resolved config. */
int tfx_report_run(const tfx_node *n, const tfx_cli_opts *o, tfx_err *err);
/* Lists (--where filters) or compares (--compare) the runs below a root directory (--root) through the
 * experiment index, which it first brings up to date from the runs' metrics.jsonl files. */
int tfx_runs_run(const tfx_cli_opts *o, tfx_err *err);
/* The evaluator task: evaluates every new checkpoint of the run directory until max_steps. */
int tfx_evaluator_run(tfx_node *n, tfx_err *err);
/* Starts master, ps and workers as real processes on loopback and supervises them. */
int tfx_local_run(tfx_node *n, const tfx_cli_opts *o, const char *self_exe, tfx_err *err);
/* Asks a running node for its role, state and uptime; prints them. */
int tfx_status_run(const tfx_cli_opts *o, tfx_err *err);
/* Writes a CURVE key pair: OUT/NAME.key (0600) and OUT/NAME.pub; prints their paths and the public key. */
int tfx_keygen_run(const tfx_cli_opts *o, tfx_err *err);
/* Copies standard input into files of o->lines lines landed by rename in --out DIR, for data.train.follow. */
int tfx_spool_run(const tfx_cli_opts *o, tfx_err *err);
/* Prints the model's layer table. */
int tfx_model_cmd(const tfx_node *n, tfx_err *err);
/* Prints the placement plan for o->ps parameter servers. */
int tfx_plan_cmd(const tfx_node *n, const tfx_cli_opts *o, tfx_err *err);
/* Exports the newest checkpoint of a run as a safetensors model directory. */
int tfx_export_run(const tfx_node *n, const tfx_cli_opts *o, tfx_err *err);
/* Lists the variables of a run, checkpoint or export. */
int tfx_inspect_run(const tfx_cli_opts *o, tfx_err *err);
/* Evaluates the newest (or a given) checkpoint on the eval set; appends an eval line to metrics.jsonl. */
int tfx_evaluate_run(const tfx_node *n, const tfx_cli_opts *o, tfx_err *err);
/* TensorFlow Serving's REST API (predict, model status, /metrics) over a run's newest checkpoint, swapping to each
 * newer one, or over an export (--export); until SIGTERM. */
int tfx_serve_run(const tfx_node *n, const tfx_cli_opts *o, tfx_err *err);
/* Batch inference on an IDX file with a run's newest checkpoint or an export. */
int tfx_predict_run(const tfx_node *n, const tfx_cli_opts *o, tfx_err *err);

#endif
