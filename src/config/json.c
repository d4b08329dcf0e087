/* The strict JSON reader of the experiment, --set values and TF_CONFIG: exactly one value, nothing after it. */
#include <json-c/json.h>
#include <string.h>

#include "config/config_impl.h"

json_object *config__json_parse(const char *json, const char *origin, tfx_err *err) {
  json_tokener *tok = json_tokener_new();
  if (!tok) {
    tfx_err_set(err, TFX_ENOMEM, "out of memory");
    return NULL;
  }
  /* -1: json-c reads up to and including the NUL, which completes a bare number or literal ("32", "true"). */
  json_object *root = json_tokener_parse_ex(tok, json, -1);
  enum json_tokener_error jerr = json_tokener_get_error(tok);
  size_t end = json_tokener_get_parse_end(tok);
  size_t len = strlen(json);
  /* After a trailing comment the parse end counts the NUL too: past the text, where strspn must not look. */
  end = end < len ? end : len;
  if (root && jerr == json_tokener_success) {
    end += strspn(json + end, " \t\r\n");
  }
  if (!root || jerr != json_tokener_success || json[end]) {
    tfx_err_set(err, TFX_ECONFIG, "%s: malformed JSON at offset %zu: %s", origin, end,
                jerr == json_tokener_success ? "unexpected text after the value" : json_tokener_error_desc(jerr));
    json_object_put(root);
    root = NULL;
  }
  json_tokener_free(tok);
  return root;
}
