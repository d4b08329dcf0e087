/* The saved experiment of a run (runconfig.h). */
#include "store/runconfig.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/log.h"
#include "common/version.h"
#include "config/config.h"
#include "nn/optim.h"
#include "store/ckpt.h"
#include "store/provenance.h"

/* Lists into out the keys of model sections a and b whose values differ ("model.layers, model.loss"). */
static void differing_keys(json_object *a, json_object *b, char *out, size_t n) {
  size_t at = 0;
  out[0] = '\0';
  for (int pass = 0; pass < 2; pass++) {
    json_object_object_foreach(pass ? b : a, key, val) {
      json_object *other = NULL;
      int in_other = json_object_object_get_ex(pass ? a : b, key, &other);
      if ((pass && in_other) || (in_other && json_object_equal(val, other))) {
        continue; /* on b's side, only keys that a lacks are added */
      }
      if (at < n) {
        at += (size_t)snprintf(out + at, n - at, "%smodel.%s", at ? ", " : "", key);
      }
    }
  }
}

/* The experiment without what changes every run by itself (the HTTP port `local` picks). */
static json_object *comparable(json_object *root) {
  json_object *observe = NULL;
  if (json_object_object_get_ex(root, "observe", &observe)) {
    json_object_object_del(observe, "http_port");
  }
  json_object_object_del(root, "provenance");
  return root;
}

/* Renames run_dir/name (name.json) to its first free revision name.rev-N.json and logs it. */
static int keep_revision(const char *run_dir, const char *name, tfx_err *err) {
  char from[1200], to[1300], stem[256];
  snprintf(from, sizeof from, "%s/%s", run_dir, name);
  snprintf(stem, sizeof stem, "%.*s", (int)strcspn(name, "."), name);
  for (int k = 1; k < 100000; k++) {
    snprintf(to, sizeof to, "%s/%s.rev-%d.json", run_dir, stem, k);
    if (access(to, F_OK) == 0) {
      continue;
    }
    if (rename(from, to)) {
      return tfx_err_sys(err, TFX_ESYS, "keeping %s as %s", from, to);
    }
    tfx_log(TFX_LOG_INFO, "RUN-CONFIG-REVISION", "the resumed run changes %s (not its model): the earlier one is %s",
            name, to);
    return TFX_OK;
  }
  return tfx_err_set(err, TFX_ESYS, "%s: no free revision name", from);
}

/* The saved experiment as this version writes it (keys added since it was written get their defaults, which
 * keep the old meaning), or the file as it is when it does not parse. Caller owns the result. */
static json_object *saved_experiment(const char *path) {
  tfx_config c;
  tfx_config_init(&c);
  if (tfx_config_load_saved(&c, path, NULL)) {
    return json_object_from_file(path);
  }
  char *text = tfx_config_to_json(&c);
  json_object *o = text ? json_tokener_parse(text) : NULL;
  free(text);
  return o;
}

/* A resume under another optimizer that keeps slots would train on the old one's: the checkpoints hold slots by
 * position (KEY@m, KEY@v), and Adam's m read as Adagrad's accumulator gave NaN on the first step. Refused, naming
 * both; a change to plain SGD (no slots) is allowed. */
static int check_optimizer(const char *path, json_object *old, const char *json, tfx_err *err) {
  json_object *o = NULL, *name = NULL;
  tfx_config now;
  tfx_config_init(&now);
  if (!json_object_object_get_ex(old, "optimizer", &o) || !json_object_object_get_ex(o, "name", &name) ||
      tfx_config_parse(&now, json, path, NULL)) {
    return TFX_OK;
  }
  const char *was = json_object_get_string(name), *is = tfx_config_choice_name("optimizer.name", now.optimizer);
  tfx_optim opt;
  tfx_optim_init(&opt, &now);
  if (!strcmp(was, is) || tfx_optim_slots(&opt) == 0) {
    return TFX_OK;
  }
  return tfx_err_set(err, TFX_ECONFIG,
                     "resume: optimizer.name %s, but the run's checkpoints hold %s's slots (%s); %s would train on "
                     "them: resume with optimizer.name %s, or start over with --fresh (warm_start.from the run keeps "
                     "its weights without the slots)",
                     is, was, path, is, was);
}

/* Checks a resume's new experiment against the saved one: model equal (else TFX_ECONFIG), and whether the rest
 * changed (*changed). */
static int check_resume(const char *path, const char *json, int *changed, tfx_err *err) {
  json_object *old = saved_experiment(path), *now = json_tokener_parse(json), *om = NULL, *nm = NULL;
  int rc = TFX_OK;
  *changed = 0;
  if (old && now) {
    json_object_object_get_ex(old, "model", &om);
    json_object_object_get_ex(now, "model", &nm);
    if (om && nm && !json_object_equal(om, nm)) {
      char keys[512];
      differing_keys(om, nm, keys, sizeof keys);
      rc = tfx_err_set(err, TFX_ECONFIG,
                       "resume: the model differs from the one the run's checkpoints hold (%s: %s); resume with the "
                       "same model, or start over with --fresh (the earlier run is kept in previous-N/)",
                       path, keys);
    }
    rc = rc ? rc : check_optimizer(path, old, json, err);
    *changed = !rc && !json_object_equal(comparable(old), comparable(now));
  }
  json_object_put(old);
  json_object_put(now);
  return rc;
}

/* Logs, once per resume, that the run was last written by another binary (tfutils checks the commit before it
 * trains): a changed commit is allowed, but the user should know which code made which checkpoints. */
static void note_binary(const char *path) {
  json_object *old = json_object_from_file(path), *p = NULL, *commit = NULL;
  if (old && json_object_object_get_ex(old, "provenance", &p) && json_object_object_get_ex(p, "commit", &commit) &&
      strcmp(json_object_get_string(commit), tfx_version_commit())) {
    tfx_log(TFX_LOG_INFO, "RESUME-BINARY", "%s was written by tfx-node commit %s; resuming with commit %s", path,
            json_object_get_string(commit), tfx_version_commit());
  }
  json_object_put(old);
}

/* json with the binary's provenance added as "provenance" (pretty printed), or a copy of json when it does not
 * parse; caller owns (free). */
static char *with_provenance(const char *json) {
  json_object *root = json_tokener_parse(json);
  if (!root || !json_object_is_type(root, json_type_object)) {
    json_object_put(root);
    return strdup(json);
  }
  json_object_object_add(root, "provenance", tfx_run_provenance());
  char *s = strdup(json_object_to_json_string_ext(
      root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE));
  json_object_put(root);
  return s;
}

int tfx_run_save_config(const char *run_dir, const char *name, const char *json, int resume, tfx_err *err) {
  char path[1200], ckdir[1100];
  int64_t step;
  snprintf(path, sizeof path, "%s/%s", run_dir, name);
  int rc = TFX_OK, changed = 0;
  if (resume && access(path, F_OK) == 0) {
    /* Checkpoints that exist but none usable refuse the start before anything here is written. */
    rc = tfx_ckpt_usable(run_dir, &step, ckdir, sizeof ckdir, err);
    rc = rc == TFX_ENOTFOUND ? TFX_OK : rc ? rc : check_resume(path, json, &changed, err);
  }
  if (!rc && resume && access(path, F_OK) == 0) {
    note_binary(path);
  }
  if (!rc && changed) {
    rc = keep_revision(run_dir, name, err);
  }
  char *text = rc ? NULL : with_provenance(json);
  if (!rc) {
    rc = text ? tfx_write_file(path, text, err) : tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  free(text);
  return rc;
}
