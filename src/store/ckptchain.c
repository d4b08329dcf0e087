/* The names of a checkpoint's parts (one home: ps-K.shard, ps-K.rows, a sibling checkpoint's directory), and chains
 * of incremental checkpoints (checkpoint.incremental): a row file that is a delta names the step of the checkpoint
 * it applies to; reading one reads its chain base first, and pruning keeps every link a kept one needs. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "store/ckpt.h"
#include "store/rowfile.h"
#include "store/store_impl.h"

static const char *const part_ext[] = {"shard", "rows"};

int tfx_ckpt_part_path(char *out, size_t n, const char *dir, int ps, tfx_ckpt_part part) {
  return dir ? snprintf(out, n, "%s/ps-%d.%s", dir, ps, part_ext[part])
             : snprintf(out, n, "ps-%d.%s", ps, part_ext[part]);
}

int tfx_ckpt_part_owner(const char *path, tfx_ckpt_part part) {
  const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
  int ps = -1, end = 0;
  char want[16];
  snprintf(want, sizeof want, "ps-%%d.%s%%n", part_ext[part]);
  if (sscanf(name, want, &ps, &end) != 1 || name[end] || ps < 0) {
    return -1;
  }
  return ps;
}

void tfx_ckpt_sibling(const char *dir, int64_t step, char *out, size_t n) {
  const char *slash = strrchr(dir, '/');
  int len = slash ? (int)(slash - dir) : 1;
  snprintf(out, n, "%.*s/ckpt-%012lld", len, slash ? dir : ".", (long long)step);
}

/* Reads ps's row file of checkpoint dir after the files of the checkpoints it is a delta of, depth links deep; a
 * link (depth > 0) must be the file of the step its child named (expect): each link's step is then below its
 * child's, so a chain ends (a file naming a parent whose file claims a later step made a cycle, and a stack
 * overflow). */
static int read_link(const char *dir, int ps, tfx_rowfile_fn fn, void *ctx, int depth, int64_t expect, tfx_err *err) {
  char path[1200], parent_dir[1200];
  int64_t step = 0, parent = -1;
  tfx_ckpt_part_path(path, sizeof path, dir, ps, TFX_CKPT_ROWS);
  int rc = tfx_rowfile_parent(path, &step, &parent, err);
  if (!rc && depth && step != expect) {
    rc = tfx_err_set(err, TFX_ECORRUPT, "%s: a link of a chain of deltas at step %lld, where its child names step %lld",
                     path, (long long)step, (long long)expect);
  }
  if (!rc && parent >= 0) {
    if (depth > 100000) {
      return tfx_err_set(err, TFX_ECORRUPT, "%s: a chain of deltas without a full checkpoint", path);
    }
    tfx_ckpt_sibling(dir, parent, parent_dir, sizeof parent_dir);
    rc = read_link(parent_dir, ps, fn, ctx, depth + 1, parent, err);
    if (rc == TFX_ENOTFOUND) {
      rc = tfx_err_set(err, TFX_ECORRUPT, "%s is a delta of step %lld, whose checkpoint is gone: %s", path,
                       (long long)parent, err ? err->msg : "");
    }
  }
  return rc ? rc : tfx_rowfile_read(path, fn, ctx, &step, err);
}

/* The links already checked by one store__ckpt_check_chain: every ps's chain goes through the same checkpoints,
 * which are read once. Past its capacity a link is checked again, which costs time, not correctness. */
typedef struct checked_links {
  int64_t step[64];
  int n;
} checked_links;

static int link_checked(checked_links *c, int64_t step) {
  for (int i = 0; i < c->n; i++) {
    if (c->step[i] == step) {
      return 1;
    }
  }
  if (c->n < (int)(sizeof c->step / sizeof c->step[0])) {
    c->step[c->n++] = step;
  }
  return 0;
}

/* Checks the links of ps's chain below checkpoint dir (at step): each parent step, older than its child, must be
 * a checkpoint whose own files check. */
static int check_ps_chain(const char *dir, int64_t step, int ps, store__ckpt_files_fn files, void *ctx,
                          checked_links *seen, tfx_err *err) {
  char link[1200], rows[1300], next[1200];
  snprintf(link, sizeof link, "%s", dir);
  for (int64_t at = step;;) {
    int64_t file_step = 0, parent = -1;
    tfx_ckpt_part_path(rows, sizeof rows, link, ps, TFX_CKPT_ROWS);
    tfx_err why;
    int rc = tfx_rowfile_parent(rows, &file_step, &parent, &why);
    if (rc) {
      return tfx_err_set(err, TFX_ECORRUPT, "%s: a link of a chain of deltas is not readable: %s", link, why.msg);
    }
    if (parent < 0) {
      return TFX_OK;
    }
    if (parent >= at) {
      return tfx_err_set(err, TFX_ECORRUPT, "%s: a delta of step %lld, not older than its own step %lld", rows,
                         (long long)parent, (long long)at);
    }
    tfx_ckpt_sibling(link, parent, next, sizeof next);
    if (!link_checked(seen, parent) && (rc = files(next, ctx, &why))) {
      return tfx_err_set(err, TFX_ECORRUPT, "%s is a delta of step %lld, whose checkpoint is not usable: %s", rows,
                         (long long)parent, why.msg);
    }
    snprintf(link, sizeof link, "%s", next);
    at = parent;
  }
}

int store__ckpt_check_chain(const char *dir, int64_t step, int n_ps, store__ckpt_files_fn files, void *ctx,
                            tfx_err *err) {
  checked_links seen = {.n = 0};
  char path[1200];
  int rc = TFX_OK;
  for (int ps = 0; ps < n_ps && !rc; ps++) {
    tfx_ckpt_part_path(path, sizeof path, dir, ps, TFX_CKPT_ROWS);
    if (access(path, F_OK) == 0) { /* a ps without lazy tables writes no row file */
      rc = check_ps_chain(dir, step, ps, files, ctx, &seen, err);
    }
  }
  return rc;
}

int tfx_rowfile_read_chain(const char *dir, int ps, tfx_rowfile_fn fn, void *ctx, tfx_err *err) {
  return read_link(dir, ps, fn, ctx, 0, -1, err);
}

int64_t tfx_rowfile_base(const char *dir) {
  int64_t base = -1;
  char path[1200];
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    int ps = tfx_ckpt_part_owner(e->d_name, TFX_CKPT_ROWS);
    int64_t step = 0, parent = -1;
    tfx_ckpt_part_path(path, sizeof path, dir, ps, TFX_CKPT_ROWS);
    if (ps >= 0 && tfx_rowfile_parent(path, &step, &parent, NULL) == TFX_OK && parent >= 0 &&
        (base < 0 || parent < base)) {
      base = parent;
    }
  }
  if (d) {
    closedir(d);
  }
  return base;
}

int64_t tfx_ckpt_chain_floor(const char *dir, int64_t floor) {
  char link[1200];
  snprintf(link, sizeof link, "%s", dir);
  for (int64_t base = tfx_rowfile_base(link), depth = 0; base >= 0 && depth < 100000; depth++) {
    floor = base < floor ? base : floor;
    char next[1200];
    tfx_ckpt_sibling(link, base, next, sizeof next);
    snprintf(link, sizeof link, "%s", next);
    base = tfx_rowfile_base(link);
  }
  return floor;
}
