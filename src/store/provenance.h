/* The binary's provenance as the run's files record it: config.json ("provenance"), each checkpoint manifest
 * ("tfx") and exports. Thread-safe; json-c objects returned are the caller's. */
#ifndef TFX_STORE_PROVENANCE_H
#define TFX_STORE_PROVENANCE_H

struct json_object;

/* The binary's provenance as a JSON object {"version", "commit", "build"}; caller owns (json_object_put). */
struct json_object *tfx_run_provenance(void);

#endif
