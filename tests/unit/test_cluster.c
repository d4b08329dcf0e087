/* Unit tests of src/config/cluster.c: TF_CONFIG as TensorFlow and Kubeflow write it, its errors, endpoints,
 * and the JSON round trip. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cluster.h"

/* ---- valid TF_CONFIGs ---- */

typedef struct addr_check {
  tfx_role role;
  int index;
  const char *address;
} addr_check;

typedef struct valid_case {
  const char *what;
  const char *json;
  int n_master, n_worker, n_ps, n_eval;
  tfx_role role;
  int index;
  const char *master_job;
  addr_check addrs[4];
} valid_case;

static const valid_case valid[] = {
    {"Kubeflow TFJob (chief/ps/worker, environment cloud, DNS names)",
     "{\"cluster\": {\"chief\": [\"mnist-chief-0.kubeflow.svc:2222\"],"
     " \"ps\": [\"mnist-ps-0.kubeflow.svc:2222\", \"mnist-ps-1.kubeflow.svc:2222\"],"
     " \"worker\": [\"mnist-worker-0.kubeflow.svc:2222\", \"mnist-worker-1.kubeflow.svc:2222\","
     " \"mnist-worker-2.kubeflow.svc:2222\"]},"
     " \"task\": {\"type\": \"worker\", \"index\": 2}, \"environment\": \"cloud\"}",
     1,
     3,
     2,
     0,
     TFX_ROLE_WORKER,
     2,
     "chief",
     {{TFX_ROLE_MASTER, 0, "mnist-chief-0.kubeflow.svc:2222"},
      {TFX_ROLE_PS, 1, "mnist-ps-1.kubeflow.svc:2222"},
      {TFX_ROLE_WORKER, 2, "mnist-worker-2.kubeflow.svc:2222"}}},
    {"TensorFlow MultiWorkerMirrored style, chief task",
     "{\"cluster\": {\"chief\": [\"host0:2222\"], \"worker\": [\"host1:2222\", \"host2:2222\"],"
     " \"ps\": [\"host3:2222\"]}, \"task\": {\"type\": \"chief\", \"index\": 0}}",
     1,
     2,
     1,
     0,
     TFX_ROLE_MASTER,
     0,
     "chief",
     {{TFX_ROLE_WORKER, 0, "host1:2222"}, {TFX_ROLE_WORKER, 1, "host2:2222"}, {TFX_ROLE_PS, 0, "host3:2222"}}},
    {"legacy master job (TF 1.x CloudML)",
     "{\"cluster\": {\"master\": [\"m0:2222\"], \"worker\": [\"w0:2222\"], \"ps\": [\"p0:2222\"]},"
     " \"task\": {\"type\": \"master\", \"index\": 0}, \"environment\": \"cloud\"}",
     1,
     1,
     1,
     0,
     TFX_ROLE_MASTER,
     0,
     "master",
     {{TFX_ROLE_MASTER, 0, "m0:2222"}}},
    {"evaluator job and task",
     "{\"cluster\": {\"chief\": [\"c:1000\"], \"worker\": [\"w:1001\"], \"evaluator\": [\"e:1002\"]},"
     " \"task\": {\"type\": \"evaluator\", \"index\": 0}}",
     1,
     1,
     0,
     1,
     TFX_ROLE_EVALUATOR,
     0,
     "chief",
     {{TFX_ROLE_EVALUATOR, 0, "e:1002"}}},
    {"bracketed IPv6 and IPv4 addresses",
     "{\"cluster\": {\"worker\": [\"[::1]:2222\", \"[::1]:2223\", \"127.0.0.1:2224\"],"
     " \"ps\": [\"[fe80::1:2]:65535\"]}, \"task\": {\"type\": \"ps\", \"index\": 0}}",
     0,
     3,
     1,
     0,
     TFX_ROLE_PS,
     0,
     "chief",
     {{TFX_ROLE_WORKER, 0, "[::1]:2222"},
      {TFX_ROLE_WORKER, 2, "127.0.0.1:2224"},
      {TFX_ROLE_PS, 0, "[fe80::1:2]:65535"}}},
    {"task without index means index 0",
     "{\"cluster\": {\"worker\": [\"a:1\", \"b:1\"]}, \"task\": {\"type\": \"worker\"}}",
     0,
     2,
     0,
     0,
     TFX_ROLE_WORKER,
     0,
     "chief",
     {{TFX_ROLE_WORKER, 1, "b:1"}}},
    {"no task: a cluster spec only",
     "{\"cluster\": {\"ps\": [\"p:5\"], \"worker\": [\"w:6\"]}}",
     0,
     1,
     1,
     0,
     TFX_ROLE_NONE,
     0,
     "chief",
     {{TFX_ROLE_PS, 0, "p:5"}}},
    {"unknown top-level keys are ignored",
     "{\"cluster\": {\"worker\": [\"w:6\"]}, \"rpc_layer\": \"grpc\", \"environment\": \"google\","
     " \"extra\": {\"anything\": [1, 2]}, \"task\": {\"type\": \"worker\", \"index\": 0, \"trial\": \"7\"}}",
     0,
     1,
     0,
     0,
     TFX_ROLE_WORKER,
     0,
     "chief",
     {{TFX_ROLE_WORKER, 0, "w:6"}}},
    {"empty object", "{}", 0, 0, 0, 0, TFX_ROLE_NONE, 0, "chief", {{0}}},
};

Test(cluster, parses_every_valid_tf_config) {
  for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++) {
    const valid_case *v = &valid[i];
    tfx_cluster *c = NULL;
    tfx_err err = {0};
    int rc = tfx_cluster_parse(v->json, &c, &err);
    cr_assert_eq(rc, TFX_OK, "%s: %s", v->what, err.msg);
    cr_assert_not_null(c);
    cr_expect_eq(tfx_cluster_count(c, TFX_ROLE_MASTER), v->n_master, "%s", v->what);
    cr_expect_eq(tfx_cluster_count(c, TFX_ROLE_WORKER), v->n_worker, "%s", v->what);
    cr_expect_eq(tfx_cluster_count(c, TFX_ROLE_PS), v->n_ps, "%s", v->what);
    cr_expect_eq(tfx_cluster_count(c, TFX_ROLE_EVALUATOR), v->n_eval, "%s", v->what);
    cr_expect_eq(tfx_cluster_count(c, TFX_ROLE_NONE), 0, "%s", v->what);
    cr_expect_eq(tfx_cluster_task_role(c), v->role, "%s", v->what);
    cr_expect_eq(tfx_cluster_task_index(c), v->index, "%s", v->what);
    cr_expect_str_eq(tfx_cluster_master_job(c), v->master_job, "%s", v->what);
    for (int k = 0; k < 4 && v->addrs[k].address; k++) {
      const char *a = tfx_cluster_address(c, v->addrs[k].role, v->addrs[k].index);
      cr_assert_not_null(a, "%s: address %d", v->what, k);
      cr_expect_str_eq(a, v->addrs[k].address, "%s", v->what);
    }
    tfx_cluster_destroy(c);
  }
}

Test(cluster, address_out_of_range_is_null) {
  tfx_cluster *c = NULL;
  cr_assert_eq(tfx_cluster_parse(valid[0].json, &c, NULL), TFX_OK);
  cr_expect_null(tfx_cluster_address(c, TFX_ROLE_WORKER, 3));
  cr_expect_null(tfx_cluster_address(c, TFX_ROLE_WORKER, -1));
  cr_expect_null(tfx_cluster_address(c, TFX_ROLE_EVALUATOR, 0));
  cr_expect_null(tfx_cluster_address(c, TFX_ROLE_NONE, 0));
  tfx_cluster_destroy(c);
}

/* ---- invalid TF_CONFIGs ---- */

typedef struct invalid_case {
  const char *what;
  const char *json;
  const char *fragment;
} invalid_case;

static const invalid_case invalid[] = {
    {"truncated JSON", "{\"cluster\": {\"worker\": [\"a:1\"]", "offset"},
    {"missing colon", "{\"cluster\" {\"worker\": [\"a:1\"]}}", "offset"},
    {"empty text", "", "offset"},
    {"not an object", "[\"a:1\"]", "expected a JSON object"},
    {"cluster not an object", "{\"cluster\": [\"a:1\"]}", "expected an object of jobs"},
    {"job not a list", "{\"cluster\": {\"worker\": \"a:1\"}}", "expected a list"},
    {"address not a string", "{\"cluster\": {\"worker\": [2222]}}", "cluster.worker[0]"},
    {"task index out of range",
     "{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 1}}", "index"},
    {"negative task index", "{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"worker\", \"index\": -1}}",
     "index -1 out of range"},
    {"task index not an integer",
     "{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"worker\", \"index\": \"one\"}}",
     "task.index: expected an integer"},
    {"unknown job", "{\"cluster\": {\"workers\": [\"a:1\"]}}", "unknown job"},
    {"unknown task type", "{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"driver\", \"index\": 0}}",
     "unknown job"},
    {"task without type", "{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"index\": 0}}", "task.type"},
    {"task not an object", "{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": \"worker\"}", "task"},
    {"task type not in the cluster",
     "{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"ps\", \"index\": 0}}", "no such job"},
    {"non-numeric port", "{\"cluster\": {\"worker\": [\"a:http\"]}}", "port"},
    {"port zero", "{\"cluster\": {\"worker\": [\"a:0\"]}}", "port"},
    {"port above 65535", "{\"cluster\": {\"worker\": [\"a:65536\"]}}", "port"},
    {"missing port", "{\"cluster\": {\"worker\": [\"a:\"]}}", "port"},
    {"no colon", "{\"cluster\": {\"worker\": [\"hostonly\"]}}", "host:port"},
    {"empty host", "{\"cluster\": {\"worker\": [\":2222\"]}}", "host"},
    {"unbracketed IPv6", "{\"cluster\": {\"worker\": [\"::1:2222\"]}}", "bracketed"},
    {"bracketed IPv6 without port", "{\"cluster\": {\"worker\": [\"[::1]2222\"]}}", "]:port"},
    {"duplicate address in a job", "{\"cluster\": {\"worker\": [\"a:1\", \"a:1\"]}}", "duplicate"},
    {"duplicate address across jobs", "{\"cluster\": {\"worker\": [\"a:1\"], \"ps\": [\"a:1\"]}}", "duplicate"},
    {"chief and master both", "{\"cluster\": {\"chief\": [\"c:1\"], \"master\": [\"m:1\"]}}", "may not both"},
    {"master and chief both", "{\"cluster\": {\"master\": [\"m:1\"], \"chief\": [\"c:1\"]}}", "may not both"},
    {"two chiefs", "{\"cluster\": {\"chief\": [\"c:1\", \"c:2\"]}}", "at most one chief"},
    {"sparse key not an index", "{\"cluster\": {\"worker\": {\"one\": \"a:1\"}}}", "key 'one' is not a task index"},
    {"sparse value not a string", "{\"cluster\": {\"worker\": {\"1\": 2222}}}", "cluster.worker.1"},
    {"sparse task not listed",
     "{\"cluster\": {\"worker\": {\"1\": \"a:1\"}}, \"task\": {\"type\": \"worker\", \"index\": 0}}",
     "lists no address"},
};

Test(cluster, rejects_every_invalid_tf_config) {
  for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
    const invalid_case *v = &invalid[i];
    tfx_cluster *sentinel = (tfx_cluster *)&sentinel, *c = sentinel;
    tfx_err err = {0};
    int rc = tfx_cluster_parse(v->json, &c, &err);
    cr_expect_eq(rc, TFX_ECONFIG, "%s: rc %d (%s)", v->what, rc, err.msg);
    cr_expect_eq(err.code, TFX_ECONFIG, "%s", v->what);
    cr_expect(strstr(err.msg, v->fragment) != NULL, "%s: message '%s' lacks '%s'", v->what, err.msg, v->fragment);
    cr_expect_eq(c, sentinel, "%s: *out written on failure", v->what);
  }
}

Test(cluster, malformed_json_names_the_offset_of_the_error) {
  tfx_cluster *c = NULL;
  tfx_err err;
  int rc = tfx_cluster_parse("{\"cluster\": {\"worker\": [\"a:1\" \"b:2\"]}}", &c, &err);
  cr_assert_eq(rc, TFX_ECONFIG);
  cr_assert(strstr(err.msg, "offset 30") != NULL, "msg: %s", err.msg);
}

Test(cluster, invalid_with_null_err_still_fails_cleanly) {
  tfx_cluster *c = NULL;
  cr_assert_eq(tfx_cluster_parse("{\"cluster\": {\"worker\": [\"a:1\", \"a:1\"]}}", &c, NULL), TFX_ECONFIG);
  cr_assert_null(c);
}

Test(cluster, trailing_text_after_the_object_is_rejected) {
  tfx_cluster *c = NULL;
  tfx_err err = {0};
  int rc = tfx_cluster_parse("{\"cluster\": {\"worker\": [\"a:1\"]}} garbage", &c, &err);
  if (rc == TFX_OK) {
    /* Regression guard: json_tokener_parse_ex stops after the first complete value, and a TF_CONFIG with
     * trailing garbage was once accepted because the rest of the text was never looked at. */
    tfx_cluster_destroy(c);
    cr_assert_fail("tfx_cluster_parse accepted trailing text after the TF_CONFIG object");
  }
  cr_assert_eq(rc, TFX_ECONFIG);
  cr_assert(strstr(err.msg, "offset") != NULL, "msg: %s", err.msg);
}

Test(cluster, host_and_port_syntax_is_checked) {
  /* cluster.h: "Checks host:port (DNS name, IPv4 or [IPv6])". A space is valid in none of them, and strtol's
   * leading blanks or sign are not a port. */
  const char *bad[] = {"a b:2222", "host: 2222", "host:+2222", "host:2222 "};
  int accepted = 0;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char ep[300];
    tfx_err err = {0};
    int rc = tfx_address_endpoint(bad[i], 0, NULL, ep, sizeof ep, &err);
    if (rc == TFX_OK) {
      accepted++;
      continue;
    }
    cr_expect_eq(rc, TFX_ECONFIG, "%s", bad[i]);
    cr_expect(strstr(err.msg, bad[i]) != NULL, "msg '%s' must name the address", err.msg);
  }
  if (accepted) {
    /* Regression guard: the host part was once never checked and strtol accepted " 2222" and "+2222", so
     * "a b:2222" and "host: 2222" passed as addresses. */
    cr_assert_fail("%d of 4 malformed addresses accepted by tfx_address_endpoint", accepted);
  }
}

/* ---- tfx_cluster_create / add / set_task ---- */

Test(cluster, built_by_hand) {
  tfx_cluster *c = tfx_cluster_create();
  tfx_err err;
  cr_assert_not_null(c);
  cr_assert_eq(tfx_cluster_task_role(c), TFX_ROLE_NONE);
  cr_assert_eq(tfx_cluster_add(c, TFX_ROLE_PS, "127.0.0.1:7000", &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_cluster_add(c, TFX_ROLE_WORKER, "127.0.0.1:7001", &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_cluster_add(c, TFX_ROLE_WORKER, "127.0.0.1:7002", &err), TFX_OK, "%s", err.msg);

  cr_assert_eq(tfx_cluster_add(c, TFX_ROLE_WORKER, "127.0.0.1:7000", &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "duplicate address '127.0.0.1:7000'") != NULL, "msg: %s", err.msg);
  cr_assert_eq(tfx_cluster_add(c, TFX_ROLE_WORKER, "nope", &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "'nope'") != NULL, "msg: %s", err.msg);
  cr_assert_eq(tfx_cluster_count(c, TFX_ROLE_WORKER), 2, "failed adds must not change the cluster");

  cr_assert_eq(tfx_cluster_set_task(c, TFX_ROLE_WORKER, 1, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_cluster_task_role(c), TFX_ROLE_WORKER);
  cr_assert_eq(tfx_cluster_task_index(c), 1);

  cr_assert_eq(tfx_cluster_set_task(c, TFX_ROLE_WORKER, 2, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "index 2 out of range") != NULL, "msg: %s", err.msg);
  cr_assert_eq(tfx_cluster_set_task(c, TFX_ROLE_MASTER, 0, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "no such job") != NULL, "msg: %s", err.msg);
  cr_assert_eq(tfx_cluster_set_task(c, TFX_ROLE_NONE, 0, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "no role") != NULL, "msg: %s", err.msg);
  /* Failed overrides leave the task as it was. */
  cr_assert_eq(tfx_cluster_task_role(c), TFX_ROLE_WORKER);
  cr_assert_eq(tfx_cluster_task_index(c), 1);
  tfx_cluster_destroy(c);
  tfx_cluster_destroy(NULL);
}

Test(cluster, role_names_parse_and_print) {
  tfx_role r = TFX_ROLE_NONE;
  cr_assert_eq(tfx_role_parse("chief", &r), TFX_OK);
  cr_assert_eq(r, TFX_ROLE_MASTER);
  cr_assert_eq(tfx_role_parse("master", &r), TFX_OK);
  cr_assert_eq(r, TFX_ROLE_MASTER);
  cr_assert_eq(tfx_role_parse("worker", &r), TFX_OK);
  cr_assert_eq(r, TFX_ROLE_WORKER);
  cr_assert_eq(tfx_role_parse("ps", &r), TFX_OK);
  cr_assert_eq(r, TFX_ROLE_PS);
  cr_assert_eq(tfx_role_parse("evaluator", &r), TFX_OK);
  cr_assert_eq(r, TFX_ROLE_EVALUATOR);
  r = TFX_ROLE_PS;
  cr_assert_eq(tfx_role_parse("Worker", &r), TFX_EINVAL);
  cr_assert_eq(tfx_role_parse("", &r), TFX_EINVAL);
  cr_assert_eq(r, TFX_ROLE_PS, "out-parameter written on failure");
  cr_assert_str_eq(tfx_role_name(TFX_ROLE_MASTER), "master");
  cr_assert_str_eq(tfx_role_name(TFX_ROLE_WORKER), "worker");
  cr_assert_str_eq(tfx_role_name(TFX_ROLE_PS), "ps");
  cr_assert_str_eq(tfx_role_name(TFX_ROLE_EVALUATOR), "evaluator");
  cr_assert_str_eq(tfx_role_name(TFX_ROLE_COUNT), "none");
  cr_assert_str_eq(tfx_role_name((tfx_role)-1), "none");
}

/* ---- endpoints ---- */

Test(cluster, address_endpoint_for_connect_and_bind) {
  static const struct {
    const char *address;
    int bind;
    const char *bind_host, *want;
  } cases[] = {
      {"mnist-ps-0.kubeflow.svc:2222", 0, NULL, "tcp://mnist-ps-0.kubeflow.svc:2222"},
      {"mnist-ps-0.kubeflow.svc:2222", 1, NULL, "tcp://*:2222"},
      {"mnist-ps-0.kubeflow.svc:2222", 1, "", "tcp://*:2222"},
      {"mnist-ps-0.kubeflow.svc:2222", 1, "127.0.0.1", "tcp://127.0.0.1:2222"},
      {"10.0.0.7:1", 0, "ignored-for-connect", "tcp://10.0.0.7:1"},
      {"[::1]:2222", 0, NULL, "tcp://[::1]:2222"},
      {"[::1]:2222", 1, NULL, "tcp://*:2222"},
      {"[2001:db8::7]:65535", 0, NULL, "tcp://[2001:db8::7]:65535"},
      {"unix:/tmp/tfx-a1/ps-0", 0, NULL, "ipc:///tmp/tfx-a1/ps-0"},
      {"unix:/tmp/tfx-a1/ps-0", 1, "127.0.0.1", "ipc:///tmp/tfx-a1/ps-0"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char ep[300];
    tfx_err err = {0};
    int rc = tfx_address_endpoint(cases[i].address, cases[i].bind, cases[i].bind_host, ep, sizeof ep, &err);
    cr_assert_eq(rc, TFX_OK, "%s: %s", cases[i].address, err.msg);
    cr_expect_str_eq(ep, cases[i].want, "%s bind=%d", cases[i].address, cases[i].bind);
  }
}

Test(cluster, unix_addresses_are_absolute_short_and_recognized) {
  char ep[300], longpath[200];
  tfx_err err;
  cr_assert_eq(tfx_address_endpoint("unix:run/ps-0", 0, NULL, ep, sizeof ep, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "unix:run/ps-0") && strstr(err.msg, "absolute"), "msg: %s", err.msg);
  snprintf(longpath, sizeof longpath, "unix:/%0120d", 7);
  cr_assert_eq(tfx_address_endpoint(longpath, 1, NULL, ep, sizeof ep, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "at most 107 bytes"), "msg: %s", err.msg);
  tfx_cluster *c = tfx_cluster_create();
  cr_assert_eq(tfx_cluster_add(c, TFX_ROLE_MASTER, "unix:/tmp/d/master-0", &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_cluster_add(c, TFX_ROLE_PS, "unix:/tmp/d/ps-0", &err), TFX_OK, "%s", err.msg);
  cr_assert(tfx_cluster_all_unix(c));
  cr_assert_eq(tfx_cluster_add(c, TFX_ROLE_WORKER, "127.0.0.1:2222", &err), TFX_OK, "%s", err.msg);
  cr_assert(!tfx_cluster_all_unix(c), "a TCP peer makes the cluster not all-local");
  tfx_cluster_destroy(c);
}

Test(cluster, address_endpoint_errors_name_the_address) {
  char ep[300];
  tfx_err err;
  cr_assert_eq(tfx_address_endpoint("worker-0:99999", 0, NULL, ep, sizeof ep, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "worker-0:99999") != NULL, "msg: %s", err.msg);
  cr_assert(strstr(err.msg, "port") != NULL, "msg: %s", err.msg);

  char small[12];
  cr_assert_eq(tfx_address_endpoint("long-host-name:2222", 0, NULL, small, sizeof small, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "too long") != NULL, "msg: %s", err.msg);

  char host[400];
  memset(host, 'h', 300);
  strcpy(host + 300, ":80");
  cr_assert_eq(tfx_address_endpoint(host, 0, NULL, ep, sizeof ep, &err), TFX_ECONFIG);
  cr_assert(strncmp(err.msg, "address 'hhhhhhhh", 17) == 0, "msg: %s", err.msg);
  host[250] = '\0';
  strcat(host, ":80");
  cr_assert_eq(tfx_address_endpoint(host, 0, NULL, ep, sizeof ep, &err), TFX_OK, "a 250-character host fits: %s",
               err.msg);
}

/* ---- round trip ---- */

static void assert_same_cluster(const tfx_cluster *a, const tfx_cluster *b) {
  for (int r = TFX_ROLE_MASTER; r < TFX_ROLE_COUNT; r++) {
    cr_assert_eq(tfx_cluster_count(a, r), tfx_cluster_count(b, r), "role %d", r);
    for (int i = 0; i < tfx_cluster_count(a, r); i++) {
      cr_assert_str_eq(tfx_cluster_address(a, r, i), tfx_cluster_address(b, r, i));
    }
  }
  cr_assert_str_eq(tfx_cluster_master_job(a), tfx_cluster_master_job(b));
}

Test(cluster, to_json_round_trips_through_parse) {
  for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++) {
    tfx_cluster *a = NULL, *b = NULL;
    tfx_err err = {0};
    cr_assert_eq(tfx_cluster_parse(valid[i].json, &a, &err), TFX_OK, "%s", err.msg);
    /* Ask for every task the cluster has, in turn. */
    for (int r = TFX_ROLE_MASTER; r < TFX_ROLE_COUNT; r++) {
      for (int k = 0; k < tfx_cluster_count(a, r); k++) {
        char *json = tfx_cluster_to_json(a, r, k);
        cr_assert_not_null(json);
        cr_assert_eq(tfx_cluster_parse(json, &b, &err), TFX_OK, "%s: %s\n%s", valid[i].what, err.msg, json);
        assert_same_cluster(a, b);
        cr_assert_eq(tfx_cluster_task_role(b), r);
        cr_assert_eq(tfx_cluster_task_index(b), k);
        tfx_cluster_destroy(b);
        free(json);
      }
    }
    tfx_cluster_destroy(a);
  }
}

Test(cluster, to_json_keeps_the_legacy_master_name) {
  tfx_cluster *a = NULL;
  cr_assert_eq(tfx_cluster_parse(valid[2].json, &a, NULL), TFX_OK);
  char *json = tfx_cluster_to_json(a, TFX_ROLE_MASTER, 0);
  cr_assert(strstr(json, "\"master\":[\"m0:2222\"]") != NULL, "%s", json);
  cr_assert(strstr(json, "\"type\":\"master\"") != NULL, "%s", json);
  cr_assert(strstr(json, "chief") == NULL, "%s", json);
  free(json);
  tfx_cluster_destroy(a);
}

Test(cluster, a_trailing_comment_is_read_within_the_text) {
  /* Found by tests/fuzz/fuzz_cluster: after a trailing comment json-c's parse end counts the NUL, and the check
   * for trailing text read past the end of the buffer (heap, so ASan sees it). */
  char *json = strdup("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}//x");
  tfx_cluster *c = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_cluster_parse(json, &c, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_cluster_count(c, TFX_ROLE_WORKER), 1);
  tfx_cluster_destroy(c);
  free(json);
}

Test(cluster, tensorflow_task_conventions) {
  tfx_cluster *c = NULL;
  tfx_err err;
  /* "index": "1" is read as 1, as TensorFlow does. */
  cr_assert_eq(tfx_cluster_parse("{\"cluster\": {\"worker\": [\"a:1\", \"b:2\"]}, \"task\": {\"type\": \"worker\", "
                                 "\"index\": \"1\"}}",
                                 &c, &err),
               TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_cluster_task_index(c), 1);
  tfx_cluster_destroy(c);
  /* train_and_evaluate's layout: an evaluator task outside the cluster. */
  cr_assert_eq(tfx_cluster_parse("{\"cluster\": {\"chief\": [\"c:1\"], \"worker\": [\"a:1\"]}, \"task\": {\"type\": "
                                 "\"evaluator\", \"index\": 0}}",
                                 &c, &err),
               TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_cluster_task_role(c), TFX_ROLE_EVALUATOR);
  cr_assert_null(tfx_cluster_address(c, TFX_ROLE_EVALUATOR, 0));
  tfx_cluster_destroy(c);
  /* Other jobs must still be in the cluster, and an index must be a number. */
  cr_assert_eq(tfx_cluster_parse(
                   "{\"cluster\": {\"chief\": [\"c:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}", &c, &err),
               TFX_ECONFIG);
  cr_assert_eq(
      tfx_cluster_parse("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"worker\", \"index\": \"x1\"}}",
                        &c, &err),
      TFX_ECONFIG);
  cr_assert(strstr(err.msg, "task.index"), "%s", err.msg);
}

/* TensorFlow's sparse cluster spec ({"1": "host:port"}: only the tasks this process talks to), as its resolver
 * reads it: the tasks keep their indices, the gaps have no address, and a role that needs a gap is refused. */
Test(cluster, sparse_cluster_spec_as_tensorflow_reads_it) {
  const char *json = "{\"cluster\": {\"chief\": [\"c:1\"], \"ps\": [\"p:1\", \"p:2\"], "
                     "\"worker\": {\"1\": \"w1:2222\"}}, \"task\": {\"type\": \"worker\", \"index\": 1}}";
  tfx_cluster *c = NULL, *b = NULL;
  tfx_err err = {0};
  cr_assert_eq(tfx_cluster_parse(json, &c, &err), TFX_OK, "%s", err.msg);
  cr_expect_eq(tfx_cluster_count(c, TFX_ROLE_WORKER), 2);
  cr_expect_null(tfx_cluster_address(c, TFX_ROLE_WORKER, 0));
  cr_expect_str_eq(tfx_cluster_address(c, TFX_ROLE_WORKER, 1), "w1:2222");
  cr_expect_eq(tfx_cluster_task_index(c), 1);
  cr_expect_eq(tfx_cluster_check_peers(c, TFX_ROLE_WORKER, &err), TFX_OK, "%s", err.msg);
  cr_expect_eq(tfx_cluster_check_peers(c, TFX_ROLE_PS, &err), TFX_OK, "%s", err.msg);
  cr_expect_eq(tfx_cluster_check_peers(c, TFX_ROLE_MASTER, &err), TFX_ECONFIG);
  cr_expect(strstr(err.msg, "cluster.worker lists no task 0") != NULL, "%s", err.msg);
  char *again = tfx_cluster_to_json(c, TFX_ROLE_WORKER, 1);
  cr_assert_not_null(again);
  cr_expect(strstr(again, "\"worker\":{\"1\":\"w1:2222\"}") != NULL, "%s", again);
  cr_assert_eq(tfx_cluster_parse(again, &b, &err), TFX_OK, "%s", err.msg);
  cr_expect_null(tfx_cluster_address(b, TFX_ROLE_WORKER, 0));
  cr_expect_str_eq(tfx_cluster_address(b, TFX_ROLE_WORKER, 1), "w1:2222");
  free(again);
  tfx_cluster_destroy(b);
  tfx_cluster_destroy(c);
  /* A worker must see every ps: a sparse ps job with a gap is refused for it. */
  const char *gap = "{\"cluster\": {\"chief\": [\"c:1\"], \"ps\": {\"1\": \"p:2\"}, \"worker\": [\"w:1\"]}}";
  cr_assert_eq(tfx_cluster_parse(gap, &c, &err), TFX_OK, "%s", err.msg);
  cr_expect_eq(tfx_cluster_check_peers(c, TFX_ROLE_WORKER, &err), TFX_ECONFIG);
  cr_expect(strstr(err.msg, "cluster.ps lists no task 0") != NULL, "%s", err.msg);
  tfx_cluster_destroy(c);
}
