/* The binary's provenance as the run's files record it (provenance.h). */
#include "store/provenance.h"

#include <json-c/json.h>

#include "common/version.h"

json_object *tfx_run_provenance(void) {
  json_object *p = json_object_new_object();
  json_object_object_add(p, "version", json_object_new_string(tfx_version()));
  json_object_object_add(p, "commit", json_object_new_string(tfx_version_commit()));
  json_object_object_add(p, "build", json_object_new_string(tfx_version_build()));
  return p;
}
