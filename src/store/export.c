/* Export directories (safetensors + experiment + metadata), by `tfx-node export` and as training goes. */
#include "store/export.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "common/fs.h"
#include "common/version.h"
#include "store/ckpt.h"
#include "store/safetensors.h"

/* The last eval line of a run's metrics.jsonl at `step` (without its newline) into out, or "null". */
static void last_eval(const char *run_dir, int64_t step, char *out, size_t n) {
  char want[48];
  snprintf(want, sizeof want, "\"step\": %lld,", (long long)step);
  char path[1100], line[1024];
  snprintf(path, sizeof path, "%s/metrics.jsonl", run_dir);
  snprintf(out, n, "null");
  FILE *f = fopen(path, "r");
  while (f && fgets(line, sizeof line, f)) {
    if (strstr(line, "\"kind\": \"eval\"") && strstr(line, want)) {
      line[strcspn(line, "\n")] = '\0';
      snprintf(out, n, "%s", line);
    }
  }
  if (f) {
    fclose(f);
  }
}

int tfx_export_write(const tfx_weights *ws, const char *config, const char *dir, const char *run_dir, tfx_err *err) {
  const char **names = calloc((size_t)ws->n + 1, sizeof *names);
  int *ranks = calloc((size_t)ws->n + 1, sizeof *ranks);
  const int64_t **shapes = calloc((size_t)ws->n + 1, sizeof *shapes);
  const float **data = calloc((size_t)ws->n + 1, sizeof *data);
  int rc = names && ranks && shapes && data ? TFX_OK : tfx_err_set(err, TFX_ENOMEM, "out of memory");
  for (int i = 0; !rc && i < ws->n; i++) {
    names[i] = ws->w[i].name;
    ranks[i] = ws->w[i].rank;
    shapes[i] = ws->w[i].shape;
    data[i] = ws->w[i].data;
  }
  char step[32], hash[16], path[1200], meta[3072], metrics[1024];
  last_eval(run_dir, ws->step, metrics, sizeof metrics);
  snprintf(step, sizeof step, "%lld", (long long)ws->step);
  snprintf(hash, sizeof hash, "%08lx", crc32(0, (const Bytef *)config, (uInt)strlen(config)));
  const char *kv[] = {"format", "pt", "tfx_step", step, "tfx_config_crc32", hash, "tfx_commit", tfx_version_commit()};
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  if (!rc) {
    rc = tfx_st_write(path, names, ranks, shapes, data, ws->n, kv, 4, err);
  }
  snprintf(path, sizeof path, "%s/model.json", dir);
  if (!rc) {
    rc = tfx_write_file(path, config, err);
  }
  snprintf(meta, sizeof meta,
           "{\"step\": %lld, \"variables\": %d, \"config_crc32\": \"%s\", \"exported_at\": %lld, \"source\": \"%s\", "
           "\"last_eval\": %s, \"tfx\": {\"version\": \"%s\", \"commit\": \"%s\", \"build\": \"%s\"}}\n",
           (long long)ws->step, ws->n, hash, (long long)time(NULL), ws->source, metrics, tfx_version(),
           tfx_version_commit(), tfx_version_build());
  snprintf(path, sizeof path, "%s/metadata.json", dir);
  if (!rc) {
    rc = tfx_write_file(path, meta, err);
  }
  free(names);
  free(ranks);
  free(shapes);
  free(data);
  return rc;
}

void tfx_export_root(const tfx_config *cfg, const char *run_dir, char *out, size_t n) {
  if (cfg->export_dir[0]) {
    snprintf(out, n, "%s", cfg->export_dir);
  } else {
    snprintf(out, n, "%s/export", run_dir);
  }
}

/* Removes an export directory (its files, then itself); an export holds no subdirectories. */
static void remove_export(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    char path[1400];
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      unlink(path);
    }
  }
  if (d) {
    closedir(d);
  }
  rmdir(dir);
}

/* Moves the finished export tmp to dir: the old one (if any) aside first, then removed. */
static int swap_in(const char *tmp, const char *dir, tfx_err *err) {
  char old[1300];
  snprintf(old, sizeof old, "%s.old", dir);
  remove_export(old);
  if (rename(dir, old) != 0 && errno != ENOENT) {
    return tfx_err_sys(err, TFX_ESYS, "moving the previous export %s aside", dir);
  }
  if (rename(tmp, dir) != 0) {
    return tfx_err_sys(err, TFX_ESYS, "renaming %s to %s", tmp, dir);
  }
  remove_export(old);
  return TFX_OK;
}

int tfx_export_checkpoint(const tfx_config *cfg, const char *run_dir, int64_t step, const char *name, tfx_err *err) {
  char root[TFX_PATH_MAX], dir[1200], tmp[1300], ckpt[1100], path[1100];
  tfx_export_root(cfg, run_dir, root, sizeof root);
  if (name) {
    snprintf(dir, sizeof dir, "%s/%s", root, name);
  } else {
    snprintf(dir, sizeof dir, "%s/%lld", root, (long long)step);
  }
  snprintf(tmp, sizeof tmp, "%s.tmp", dir);
  snprintf(path, sizeof path, "%s/config.json", run_dir);
  tfx_ckpt_dir(run_dir, step, ckpt, sizeof ckpt);
  char *config = tfx_read_text(path, SIZE_MAX / 4, TFX_ENOTFOUND, NULL);
  if (!config) {
    return tfx_err_sys(err, TFX_ENOTFOUND, "exporting step %lld: %s", (long long)step, path);
  }
  tfx_weights ws;
  remove_export(tmp);
  int rc = tfx_weights_from_checkpoint(ckpt, &ws, err);
  if (!rc && !(rc = tfx_mkdirs(tmp, err)) && !(rc = tfx_export_write(&ws, config, tmp, run_dir, err))) {
    rc = swap_in(tmp, dir, err);
  }
  if (rc) {
    remove_export(tmp);
  }
  tfx_weights_fini(&ws);
  free(config);
  return rc;
}
