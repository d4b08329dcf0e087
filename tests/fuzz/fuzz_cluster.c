/* Fuzzes TF_CONFIG parsing (tfx_cluster_parse) and, for a parsed cluster, every address to endpoint conversion
 * and the JSON written back for each task (which must parse again). */
#include <stdint.h>
#include <stdlib.h>

#include "config/cluster.h"
#include "fuzz.h"

static void exercise(const tfx_cluster *c) {
  for (int r = TFX_ROLE_MASTER; r < TFX_ROLE_COUNT; r++) {
    for (int i = 0; i < tfx_cluster_count(c, (tfx_role)r) && i < 8; i++) {
      char ep[512];
      if (!tfx_cluster_address(c, (tfx_role)r, i)) { /* a task a sparse spec leaves out: no TF_CONFIG of its own */
        tfx_err e = {0};
        if (tfx_address_endpoint(NULL, 0, NULL, ep, sizeof ep, &e) == TFX_OK) {
          abort(); /* no address must be an error, not an endpoint */
        }
        continue;
      }
      tfx_address_endpoint(tfx_cluster_address(c, (tfx_role)r, i), 1, "0.0.0.0", ep, sizeof ep, NULL);
      tfx_address_endpoint(tfx_cluster_address(c, (tfx_role)r, i), 0, NULL, ep, sizeof ep, NULL);
      char *json = tfx_cluster_to_json(c, (tfx_role)r, i);
      tfx_cluster *again = NULL;
      if (json && tfx_cluster_parse(json, &again, NULL) != TFX_OK) {
        abort(); /* our own TF_CONFIG must parse */
      }
      tfx_cluster_destroy(again);
      free(json);
    }
  }
  (void)tfx_cluster_master_job(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_cstr(data, size);
  if (!text) {
    return 0;
  }
  tfx_cluster *c = NULL;
  tfx_err err = {0};
  if (tfx_cluster_parse(text, &c, &err) == TFX_OK) {
    exercise(c);
    tfx_cluster_promote_worker0(c);
    tfx_cluster_destroy(c);
  } else if (!err.msg[0]) {
    abort(); /* a rejection names what is wrong */
  }
  free(text);
  return 0;
}
