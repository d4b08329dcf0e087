/* Unit tests of src/psclient: which ps links send their push-pulls in parts (tfx_psclient_use_parts) for a
 * real placement plan and model: from four parts' worth of dense values up, never for a link holding a
 * row-sparse table, never with a part size of 0. The client's DEALER sockets connect lazily, so no ps runs. */
#include <criterion/criterion.h>
#include <stdio.h>

#include "config/cluster.h"
#include "config/config.h"
#include "master/plan.h"
#include "net/net.h"
#include "nn/model.h"
#include "psclient/psclient.h"

typedef struct fixture {
  tfx_config cfg;
  tfx_model *model;
  tfx_plan plan;
  tfx_cluster *cluster;
  tfx_psclient *client;
} fixture;

/* A client for the model of `json` placed on one ps (an address nobody listens on). */
static void open_client(fixture *f, const char *json) {
  tfx_err err = {0};
  tfx_config_init(&f->cfg);
  cr_assert_eq(tfx_config_parse(&f->cfg, json, "test", &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_model_create(&f->cfg, 1, &f->model, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_plan_build(&f->cfg, f->model, 1, &f->plan, &err), TFX_OK, "%s", err.msg);
  f->cluster = tfx_cluster_create();
  cr_assert_not_null(f->cluster);
  cr_assert_eq(tfx_cluster_add(f->cluster, TFX_ROLE_PS, "127.0.0.1:9", &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_psclient_create(f->cluster, f->plan.ptrs, (size_t)f->plan.n, f->model, 1000, &f->client, &err),
               TFX_OK, "%s", err.msg);
}

static void close_client(fixture *f) {
  tfx_psclient_destroy(f->client);
  tfx_cluster_destroy(f->cluster);
  tfx_plan_fini(&f->plan);
  tfx_model_destroy(f->model);
  tfx_net_shutdown();
}

/* One dense layer of one unit over `inputs` values: a kernel of inputs floats and a bias of one. */
static void open_dense(fixture *f, int inputs) {
  char json[256];
  snprintf(json, sizeof json,
           "{\"model\": {\"input_shape\": [%d], \"layers\": [{\"type\": \"dense\", \"units\": 1}]},"
           " \"training\": {\"mode\": \"async\"}}",
           inputs);
  open_client(f, json);
}

Test(psclient, parts_from_four_parts_worth) {
  fixture f;
  tfx_err err = {0};
  open_dense(&f, 262144); /* 1 MiB + 4 bytes */
  cr_assert_eq(tfx_psclient_parts(f.client, 0), 0, "no parts before use_parts");
  cr_assert_eq(tfx_psclient_use_parts(f.client, 256 << 10, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_psclient_parts(f.client, 0), 4, "1 MiB in parts of 256 KiB: %d parts, want 4 equal ones",
               tfx_psclient_parts(f.client, 0));
  cr_assert_eq(tfx_psclient_use_parts(f.client, 64 << 10, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_psclient_parts(f.client, 0), 4, "a second call replanned a planned link");
  close_client(&f);
}

Test(psclient, whole_below_four_parts_worth) {
  fixture f;
  tfx_err err = {0};
  open_dense(&f, 262144);
  cr_assert_eq(tfx_psclient_use_parts(f.client, 512 << 10, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_psclient_parts(f.client, 0), 0, "1 MiB is 2 parts of 512 KiB: it must stay one message");
  close_client(&f);
}

Test(psclient, off_with_zero_part_size) {
  fixture f;
  tfx_err err = {0};
  open_dense(&f, 1 << 22);
  cr_assert_eq(tfx_psclient_use_parts(f.client, 0, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_psclient_parts(f.client, 0), 0);
  cr_assert_eq(tfx_psclient_parts(f.client, 5), 0, "an out-of-range ps has no parts");
  close_client(&f);
}

Test(psclient, row_sparse_link_stays_whole) {
  fixture f;
  tfx_err err = {0};
  open_client(&f,
              "{\"model\": {\"input_shape\": [4], \"layers\": [{\"type\": \"embedding\", \"input_dim\": 100000, "
              "\"units\": 16}, {\"type\": \"dense\", \"units\": 2}]},"
              " \"training\": {\"mode\": \"async\"}}");
  cr_assert_eq(tfx_psclient_use_parts(f.client, 64 << 10, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_psclient_parts(f.client, 0), 0, "a link with a row-sparse table went in parts");
  close_client(&f);
}
