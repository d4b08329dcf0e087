/* The cluster spec and the task of this process, read from TF_CONFIG exactly as TensorFlow and Kubeflow's
 * TFJob write it: {"cluster": {"chief"|"master": [...], "worker": [...], "ps": [...], "evaluator": [...]},
 * "task": {"type": ..., "index": N}, "environment": ..., "rpc_layer": ...}.
 * A tfx_cluster is created by tfx_cluster_parse or tfx_cluster_create and owned by the caller.
 * Not thread-safe; errors: TFX_ECONFIG naming the field and the value. */
#ifndef TFX_CLUSTER_H
#define TFX_CLUSTER_H

#include <stddef.h>

#include "common/err.h"

typedef enum tfx_role {
  TFX_ROLE_NONE,
  TFX_ROLE_MASTER,
  TFX_ROLE_WORKER,
  TFX_ROLE_PS,
  TFX_ROLE_EVALUATOR,
  TFX_ROLE_COUNT
} tfx_role;

typedef struct tfx_cluster tfx_cluster;

/* Parses a TF_CONFIG JSON text; caller owns *out; free with tfx_cluster_destroy. */
int tfx_cluster_parse(const char *json, tfx_cluster **out, tfx_err *err);
/* An empty cluster (no jobs, no task); caller owns; free with tfx_cluster_destroy. NULL when out of memory. */
tfx_cluster *tfx_cluster_create(void);
/* Frees the cluster; NULL does nothing. */
void tfx_cluster_destroy(tfx_cluster *c);
/* Appends an address to a job (validated); the cluster copies it. */
int tfx_cluster_add(tfx_cluster *c, tfx_role role, const char *address, tfx_err *err);
/* When the cluster has no chief, makes worker 0's address the chief's (TensorFlow: worker 0 takes the chief's
 * duties). Returns 1 if it did, 0 if there is a chief already or no worker. */
int tfx_cluster_promote_worker0(tfx_cluster *c);
/* Sets (overrides) this process's task, checking that the job exists and the index is in range. */
int tfx_cluster_set_task(tfx_cluster *c, tfx_role role, int index, tfx_err *err);
/* The number of tasks of a job. */
int tfx_cluster_count(const tfx_cluster *c, tfx_role role);
/* Checks that the cluster lists every task a role talks to (a sparse spec, TensorFlow's {"1": "host:port"},
 * may leave out the others: a worker needs the chief and every ps, the chief every task); TFX_ECONFIG naming the
 * first missing task otherwise. */
int tfx_cluster_check_peers(const tfx_cluster *c, tfx_role role, tfx_err *err);
/* The address "host:port" of a task, borrowed from the cluster; NULL if out of range or not listed (a sparse
 * spec's gap). */
const char *tfx_cluster_address(const tfx_cluster *c, tfx_role role, int index);
/* This process's task: role (TFX_ROLE_NONE if TF_CONFIG named none) and index. */
tfx_role tfx_cluster_task_role(const tfx_cluster *c);
/* This process's task index. */
int tfx_cluster_task_index(const tfx_cluster *c);
/* The name the cluster used for the chief job: "chief" or "master". Static. */
const char *tfx_cluster_master_job(const tfx_cluster *c);
/* Writes the cluster back as TF_CONFIG JSON for a given task; caller owns; free with free(). */
char *tfx_cluster_to_json(const tfx_cluster *c, tfx_role role, int index);

/* Parses "chief", "master", "worker", "ps", "evaluator"; returns 0 or TFX_EINVAL. */
int tfx_role_parse(const char *s, tfx_role *out);
/* The canonical name of a role ("master", "worker", "ps", "evaluator"); static. */
const char *tfx_role_name(tfx_role role);

#define TFX_UNIX_PREFIX "unix:"
#define TFX_UNIX_PATH_MAX 108 /* sun_path, with its terminating NUL */
/* Whether an address is a Unix socket ("unix:/path", as gRPC writes it). */
int tfx_address_is_unix(const char *address);
/* Whether every address of the cluster is a Unix socket (a cluster on one host: no keys needed). */
int tfx_cluster_all_unix(const tfx_cluster *c);
/* Checks "host:port" (DNS name, IPv4 or [IPv6]) or "unix:/path" and writes its ZeroMQ endpoint to out:
 * "tcp://host:port" to connect, "tcp://ANY:port" (ANY = * or bind_host) to bind, "ipc:///path" for both. Returns 0 or
 * TFX_ECONFIG naming the address. */
int tfx_address_endpoint(const char *address, int bind, const char *bind_host, char *out, size_t n, tfx_err *err);

#endif
