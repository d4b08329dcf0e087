/* TF_CONFIG parsing and the cluster spec. */
#include "config/cluster.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_impl.h"

#define MAX_TASKS 1024

struct tfx_cluster {
  char **addr[TFX_ROLE_COUNT];
  int count[TFX_ROLE_COUNT];
  tfx_role task_role;
  int task_index;
  int legacy_master;
};

static const char *const role_names[] = {"none", "master", "worker", "ps", "evaluator"};

int tfx_role_parse(const char *s, tfx_role *out) {
  if (strcmp(s, "chief") == 0 || strcmp(s, "master") == 0) {
    *out = TFX_ROLE_MASTER;
  } else if (strcmp(s, "worker") == 0) {
    *out = TFX_ROLE_WORKER;
  } else if (strcmp(s, "ps") == 0) {
    *out = TFX_ROLE_PS;
  } else if (strcmp(s, "evaluator") == 0) {
    *out = TFX_ROLE_EVALUATOR;
  } else {
    return TFX_EINVAL;
  }
  return TFX_OK;
}

const char *tfx_role_name(tfx_role role) {
  return (role >= 0 && role < TFX_ROLE_COUNT) ? role_names[role] : "none";
}

tfx_cluster *tfx_cluster_create(void) {
  tfx_cluster *c = calloc(1, sizeof *c);
  if (c) {
    c->task_role = TFX_ROLE_NONE;
  }
  return c;
}

void tfx_cluster_destroy(tfx_cluster *c) {
  if (!c) {
    return;
  }
  for (int r = 0; r < TFX_ROLE_COUNT; r++) {
    for (int i = 0; i < c->count[r]; i++) {
      free(c->addr[r][i]);
    }
    free(c->addr[r]);
  }
  free(c);
}

static int parse_port(const char *p, const char *address, tfx_err *err) {
  if (!*p) {
    return tfx_err_set(err, TFX_ECONFIG, "address '%s': missing port", address);
  }
  if (strspn(p, "0123456789") != strlen(p)) {
    return tfx_err_set(err, TFX_ECONFIG, "address '%s': port '%s' is not a number in 1..65535", address, p);
  }
  char *end;
  long port = strtol(p, &end, 10);
  if (*end || port < 1 || port > 65535) {
    return tfx_err_set(err, TFX_ECONFIG, "address '%s': port '%s' is not a number in 1..65535", address, p);
  }
  return TFX_OK;
}

static int split_address(const char *address, char *host, size_t hn, const char **port, tfx_err *err) {
  const char *colon;
  if (address[0] == '[') {
    const char *close = strchr(address, ']');
    if (!close || close[1] != ':') {
      return tfx_err_set(err, TFX_ECONFIG, "address '%s': bracketed IPv6 needs ']:port'", address);
    }
    colon = close + 1;
  } else {
    colon = strrchr(address, ':');
    if (!colon) {
      return tfx_err_set(err, TFX_ECONFIG, "address '%s': expected host:port", address);
    }
    if (memchr(address, ':', (size_t)(colon - address))) {
      return tfx_err_set(err, TFX_ECONFIG, "address '%s': IPv6 hosts must be bracketed", address);
    }
  }
  size_t len = (size_t)(colon - address);
  const char *allowed = address[0] == '[' ? "[]0123456789abcdefABCDEF:.%"
                                          : "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_";
  if (len == 0 || len >= hn || strspn(address, allowed) < len) {
    return tfx_err_set(err, TFX_ECONFIG, "address '%.200s': bad host", address);
  }
  memcpy(host, address, len);
  host[len] = '\0';
  *port = colon + 1;
  return parse_port(*port, address, err);
}

/* "unix:/abs/path" (gRPC's spelling of a Unix socket address): ZeroMQ's ipc://path, bound and connected alike. */
static int unix_endpoint(const char *address, char *out, size_t n, tfx_err *err) {
  const char *path = address + strlen(TFX_UNIX_PREFIX);
  if (path[0] != '/') {
    return tfx_err_set(err, TFX_ECONFIG, "address '%.200s': a Unix socket address is unix:/absolute/path", address);
  }
  if (strlen(path) >= TFX_UNIX_PATH_MAX) {
    return tfx_err_set(err, TFX_ECONFIG, "address '%.200s': a Unix socket path has at most %d bytes", address,
                       TFX_UNIX_PATH_MAX - 1);
  }
  if ((size_t)snprintf(out, n, "ipc://%s", path) >= n) {
    return tfx_err_set(err, TFX_ECONFIG, "address '%.200s': too long", address);
  }
  return TFX_OK;
}

int tfx_address_is_unix(const char *address) {
  return address && !strncmp(address, TFX_UNIX_PREFIX, strlen(TFX_UNIX_PREFIX));
}

int tfx_cluster_all_unix(const tfx_cluster *c) {
  int any = 0;
  for (int r = 0; r < TFX_ROLE_COUNT; r++) {
    for (int i = 0; i < c->count[r]; i++) {
      if (!tfx_address_is_unix(c->addr[r][i])) {
        return 0;
      }
      any = 1;
    }
  }
  return any;
}

int tfx_address_endpoint(const char *address, int bind, const char *bind_host, char *out, size_t n, tfx_err *err) {
  if (!address) { /* a task the cluster counts without an address of its own */
    return tfx_err_set(err, TFX_ECONFIG, "a task has no address");
  }
  if (tfx_address_is_unix(address)) {
    return unix_endpoint(address, out, n, err);
  }
  char host[256];
  const char *port = "";
  int rc = split_address(address, host, sizeof host, &port, err);
  if (rc) {
    return rc;
  }
  const char *h = bind ? (bind_host && *bind_host ? bind_host : "*") : host;
  if ((size_t)snprintf(out, n, "tcp://%s:%s", h, port) >= n) {
    return tfx_err_set(err, TFX_ECONFIG, "address '%s': too long", address);
  }
  return TFX_OK;
}

/* Checks an address and that no task of the cluster has it yet. */
static int check_new_address(const tfx_cluster *c, tfx_role role, const char *address, tfx_err *err) {
  char ep[300];
  int rc = tfx_address_endpoint(address, 0, NULL, ep, sizeof ep, err);
  for (int r = 0; !rc && r < TFX_ROLE_COUNT; r++) {
    for (int i = 0; i < c->count[r]; i++) {
      if (c->addr[r][i] && strcmp(c->addr[r][i], address) == 0) {
        return tfx_err_set(err, TFX_ECONFIG, "duplicate address '%s' (%s %d and %s)", address, role_names[r], i,
                           role_names[role]);
      }
    }
  }
  return rc;
}

/* Puts address as task index of a job, growing the job with gaps (tasks a sparse spec leaves out) as needed. */
static int put_task(tfx_cluster *c, tfx_role role, int index, const char *address, tfx_err *err) {
  int rc = check_new_address(c, role, address, err);
  if (rc) {
    return rc;
  }
  if (index >= MAX_TASKS) {
    return tfx_err_set(err, TFX_ECONFIG, "too many %s tasks (index %d)", role_names[role], index);
  }
  if (index < c->count[role] && c->addr[role][index]) {
    return tfx_err_set(err, TFX_ECONFIG, "%s task %d given twice", role_names[role], index);
  }
  if (index >= c->count[role]) {
    char **grown = realloc(c->addr[role], sizeof(char *) * (size_t)(index + 1));
    if (!grown) {
      return tfx_err_set(err, TFX_ENOMEM, "out of memory");
    }
    memset(grown + c->count[role], 0, sizeof(char *) * (size_t)(index + 1 - c->count[role]));
    c->addr[role] = grown;
    c->count[role] = index + 1;
  }
  if (!(c->addr[role][index] = strdup(address))) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  return TFX_OK;
}

int tfx_cluster_add(tfx_cluster *c, tfx_role role, const char *address, tfx_err *err) {
  return put_task(c, role, c->count[role], address, err);
}

/* A task index written as a JSON key ("1"), as TensorFlow's sparse cluster spec does; -1 if it is not one. */
static int index_key(const char *key) {
  size_t n = strlen(key);
  return n && n < 8 && strspn(key, "0123456789") == n ? atoi(key) : -1;
}

/* TensorFlow's sparse form of a job, {"1": "host:port"}: only the tasks this process talks to. */
static int parse_sparse_job(tfx_cluster *c, tfx_role role, const char *job, json_object *tasks, tfx_err *err) {
  json_object_object_foreach(tasks, key, a) {
    int index = index_key(key);
    if (index < 0) {
      return tfx_err_set(err, TFX_ECONFIG, "TF_CONFIG cluster.%s: key '%.32s' is not a task index", job, key);
    }
    if (!json_object_is_type(a, json_type_string)) {
      return tfx_err_set(err, TFX_ECONFIG, "TF_CONFIG cluster.%s.%s: expected a \"host:port\" string", job, key);
    }
    int rc = put_task(c, role, index, json_object_get_string(a), err);
    if (rc) {
      return rc;
    }
  }
  return TFX_OK;
}

/* The dense form of a job, ["host:port", ...]. */
static int parse_job_list(tfx_cluster *c, tfx_role role, const char *job, json_object *list, tfx_err *err) {
  size_t n = json_object_array_length(list);
  for (size_t i = 0; i < n; i++) {
    json_object *a = json_object_array_get_idx(list, i);
    if (!json_object_is_type(a, json_type_string)) {
      return tfx_err_set(err, TFX_ECONFIG, "TF_CONFIG cluster.%s[%zu]: expected a \"host:port\" string", job, i);
    }
    int rc = tfx_cluster_add(c, role, json_object_get_string(a), err);
    if (rc) {
      return rc;
    }
  }
  return TFX_OK;
}

static int parse_job(tfx_cluster *c, const char *job, json_object *list, tfx_err *err) {
  tfx_role role;
  if (tfx_role_parse(job, &role)) {
    return tfx_err_set(err, TFX_ECONFIG,
                       "TF_CONFIG cluster.%s: unknown job (want chief, master, worker, ps, evaluator)", job);
  }
  int sparse = json_object_is_type(list, json_type_object);
  if (!sparse && !json_object_is_type(list, json_type_array)) {
    return tfx_err_set(err, TFX_ECONFIG,
                       "TF_CONFIG cluster.%s: expected a list of \"host:port\" (or an object of task index to "
                       "\"host:port\", TensorFlow's sparse form)",
                       job);
  }
  if (role == TFX_ROLE_MASTER && c->count[role] > 0) {
    return tfx_err_set(err, TFX_ECONFIG, "TF_CONFIG cluster: 'chief' and 'master' may not both be given");
  }
  int rc = sparse ? parse_sparse_job(c, role, job, list, err) : parse_job_list(c, role, job, list, err);
  if (rc) {
    return rc;
  }
  if (role == TFX_ROLE_MASTER && c->count[role] > 1) {
    return tfx_err_set(err, TFX_ECONFIG, "TF_CONFIG cluster.%s: at most one chief, got %d", job, c->count[role]);
  }
  if (strcmp(job, "master") == 0) {
    c->legacy_master = 1;
  }
  return TFX_OK;
}

static int parse_task(tfx_cluster *c, json_object *task, tfx_err *err) {
  json_object *type, *index;
  if (!json_object_is_type(task, json_type_object)) {
    return tfx_err_set(err, TFX_ECONFIG, "TF_CONFIG task: expected an object {type, index}");
  }
  if (!json_object_object_get_ex(task, "type", &type) || !json_object_is_type(type, json_type_string)) {
    return tfx_err_set(err, TFX_ECONFIG, "TF_CONFIG task.type: missing or not a string");
  }
  tfx_role role;
  const char *tname = json_object_get_string(type);
  if (tfx_role_parse(tname, &role)) {
    return tfx_err_set(err, TFX_ECONFIG, "TF_CONFIG task.type '%s': unknown job", tname);
  }
  int idx = 0;
  if (json_object_object_get_ex(task, "index", &index)) {
    const char *text = json_object_is_type(index, json_type_string) ? json_object_get_string(index) : NULL;
    if (text && *text && strspn(text, "0123456789") == strlen(text) && strlen(text) < 8) {
      idx = atoi(text); /* "index": "1", as TensorFlow reads it */
    } else if (!json_object_is_type(index, json_type_int)) {
      return tfx_err_set(err, TFX_ECONFIG, "TF_CONFIG task.index: expected an integer (or a string of digits)");
    } else {
      idx = json_object_get_int(index);
    }
  }
  if (role == TFX_ROLE_EVALUATOR && c->count[role] == 0 && idx >= 0) {
    /* TensorFlow's train_and_evaluate layout: the evaluator is a task outside the training cluster. */
    c->task_role = role;
    c->task_index = idx;
    return TFX_OK;
  }
  return tfx_cluster_set_task(c, role, idx, err);
}

static int parse_root(tfx_cluster *c, json_object *root, tfx_err *err) {
  json_object *cluster, *task;
  if (!json_object_is_type(root, json_type_object)) {
    return tfx_err_set(err, TFX_ECONFIG, "TF_CONFIG: expected a JSON object");
  }
  if (json_object_object_get_ex(root, "cluster", &cluster)) {
    if (!json_object_is_type(cluster, json_type_object)) {
      return tfx_err_set(err, TFX_ECONFIG, "TF_CONFIG cluster: expected an object of jobs");
    }
    json_object_object_foreach(cluster, job, list) {
      int rc = parse_job(c, job, list, err);
      if (rc) {
        return rc;
      }
    }
  }
  if (json_object_object_get_ex(root, "task", &task)) {
    return parse_task(c, task, err);
  }
  return TFX_OK;
}

int tfx_cluster_parse(const char *json, tfx_cluster **out, tfx_err *err) {
  json_object *root = config__json_parse(json, "TF_CONFIG", err);
  if (!root) {
    return err ? err->code : TFX_ECONFIG;
  }
  tfx_cluster *c = tfx_cluster_create();
  int rc = c ? parse_root(c, root, err) : tfx_err_set(err, TFX_ENOMEM, "out of memory");
  json_object_put(root);
  if (rc) {
    tfx_cluster_destroy(c);
    return rc;
  }
  *out = c;
  return TFX_OK;
}

int tfx_cluster_promote_worker0(tfx_cluster *c) {
  if (c->count[TFX_ROLE_MASTER] || !c->count[TFX_ROLE_WORKER] || !c->addr[TFX_ROLE_WORKER][0]) {
    return 0;
  }
  char **list = malloc(sizeof(char *));
  if (!list || !(list[0] = strdup(c->addr[TFX_ROLE_WORKER][0]))) {
    return free(list), 0;
  }
  c->addr[TFX_ROLE_MASTER] = list;
  c->count[TFX_ROLE_MASTER] = 1;
  return 1;
}

int tfx_cluster_set_task(tfx_cluster *c, tfx_role role, int index, tfx_err *err) {
  if (role <= TFX_ROLE_NONE || role >= TFX_ROLE_COUNT) {
    return tfx_err_set(err, TFX_ECONFIG, "task: no role given");
  }
  if (c->count[role] == 0) {
    return tfx_err_set(err, TFX_ECONFIG, "task.type '%s': the cluster has no such job", role_names[role]);
  }
  if (index < 0 || index >= c->count[role]) {
    return tfx_err_set(err, TFX_ECONFIG, "task.index %d out of range: job '%s' has %d task(s)", index, role_names[role],
                       c->count[role]);
  }
  if (!c->addr[role][index]) {
    return tfx_err_set(err, TFX_ECONFIG, "task.index %d: job '%s' lists no address for it", index, role_names[role]);
  }
  c->task_role = role;
  c->task_index = index;
  return TFX_OK;
}

int tfx_cluster_count(const tfx_cluster *c, tfx_role role) {
  return (role > TFX_ROLE_NONE && role < TFX_ROLE_COUNT) ? c->count[role] : 0;
}

const char *tfx_cluster_address(const tfx_cluster *c, tfx_role role, int index) {
  if (index < 0 || index >= tfx_cluster_count(c, role)) {
    return NULL;
  }
  return c->addr[role][index];
}

tfx_role tfx_cluster_task_role(const tfx_cluster *c) {
  return c->task_role;
}

int tfx_cluster_task_index(const tfx_cluster *c) {
  return c->task_index;
}

const char *tfx_cluster_master_job(const tfx_cluster *c) {
  return c->legacy_master ? "master" : "chief";
}

/* Whether a job has tasks it does not list (a sparse spec's). */
static int has_gaps(const tfx_cluster *c, tfx_role role) {
  for (int i = 0; i < c->count[role]; i++) {
    if (!c->addr[role][i]) {
      return 1;
    }
  }
  return 0;
}

/* A job as TF_CONFIG writes it: a list, or the sparse object {"index": "host:port"} when it has gaps. */
static json_object *job_json(const tfx_cluster *c, tfx_role role) {
  int sparse = has_gaps(c, role);
  json_object *job = sparse ? json_object_new_object() : json_object_new_array();
  for (int i = 0; i < c->count[role]; i++) {
    char key[16];
    snprintf(key, sizeof key, "%d", i);
    if (!sparse) {
      json_object_array_add(job, json_object_new_string(c->addr[role][i]));
    } else if (c->addr[role][i]) {
      json_object_object_add(job, key, json_object_new_string(c->addr[role][i]));
    }
  }
  return job;
}

/* The jobs a role talks to (a bit per role): the chief every task; a worker or evaluator the chief and every ps. */
static unsigned peers_of(tfx_role role) {
  unsigned all = 1u << TFX_ROLE_MASTER | 1u << TFX_ROLE_WORKER | 1u << TFX_ROLE_PS;
  return role == TFX_ROLE_MASTER ? all : role == TFX_ROLE_PS ? 0u : all & ~(1u << TFX_ROLE_WORKER);
}

int tfx_cluster_check_peers(const tfx_cluster *c, tfx_role role, tfx_err *err) {
  for (int r = TFX_ROLE_NONE + 1; r < TFX_ROLE_COUNT; r++) {
    for (int i = 0; (peers_of(role) >> r & 1u) && i < c->count[r]; i++) {
      if (!c->addr[r][i]) {
        return tfx_err_set(err, TFX_ECONFIG,
                           "TF_CONFIG cluster.%s lists no task %d, and a %s talks to every %s task (a sparse "
                           "cluster spec may leave out only the tasks this process never talks to)",
                           r == TFX_ROLE_MASTER ? tfx_cluster_master_job(c) : role_names[r], i,
                           role == TFX_ROLE_MASTER ? "chief" : role_names[role], role_names[r]);
      }
    }
  }
  return TFX_OK;
}

char *tfx_cluster_to_json(const tfx_cluster *c, tfx_role role, int index) {
  json_object *root = json_object_new_object(), *cl = json_object_new_object(), *task = json_object_new_object();
  for (int r = 1; r < TFX_ROLE_COUNT; r++) {
    if (!c->count[r]) {
      continue;
    }
    json_object *list = job_json(c, (tfx_role)r);
    json_object_object_add(cl, r == TFX_ROLE_MASTER ? tfx_cluster_master_job(c) : role_names[r], list);
  }
  json_object_object_add(root, "cluster", cl);
  json_object_object_add(
      task, "type", json_object_new_string(role == TFX_ROLE_MASTER ? tfx_cluster_master_job(c) : role_names[role]));
  json_object_object_add(task, "index", json_object_new_int(index));
  json_object_object_add(root, "task", task);
  char *s = strdup(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN));
  json_object_put(root);
  return s;
}
