/* Fuzzes chains of row files (checkpoint.incremental): the input is up to 4 row files one after the other (each
 * begins with the magic "TFXROWS1", where the input is split), written as ps-0.rows of checkpoints ckpt-1,
 * ckpt-2, ... in a directory of their own; the newest is read through its chain (parent links: the header's parent
 * step names the sibling directory) by both readers: the ps's restore (tfx_rowfile_read_chain, store/ckptchain.c)
 * and serve's index of mapped files (tfx_rowindex_open, store/rowindex.c). A failure must carry a message; when
 * both succeed they must hold the same rows: each id the restore last saw with values is indexed with the same
 * floats, each id it last saw deleted is not. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/rowfile.h"
#include "store/rowindex.h"

#define MAX_FILES 4
#define MAX_SEEN 4096
#define MAX_WIDTH 64

typedef struct seen_row {
  char var[160];
  int64_t id;
  int width; /* 0: deleted */
  float v[MAX_WIDTH];
} seen_row;

typedef struct seen {
  seen_row rows[MAX_SEEN];
  int n, unchecked; /* unchecked: more rows or wider rows than kept here, or a table of two widths */
  char width_of[8][160];
  int widths[8], n_tables;
} seen;

static void var_of(const char *table, char *out, size_t n) {
  snprintf(out, n, "%s", table);
  char *cut = strstr(out, "/mod_") ? strstr(out, "/mod_") : strstr(out, "/range_");
  if (cut) {
    *cut = '\0';
  }
}

static int row(const char *table, int64_t ids, int row_floats, int64_t id, const float *values, void *ctx) {
  seen *s = ctx;
  char var[160];
  (void)ids;
  var_of(table, var, sizeof var);
  int t = 0;
  while (t < s->n_tables && strcmp(s->width_of[t], var)) {
    t++;
  }
  if (t == s->n_tables && t < 8) {
    snprintf(s->width_of[t], sizeof s->width_of[t], "%s", var);
    s->widths[t] = row_floats;
    s->n_tables++;
  }
  s->unchecked |= t == 8 || s->widths[t] != row_floats || row_floats > MAX_WIDTH;
  int i = 0;
  while (i < s->n && (s->rows[i].id != id || strcmp(s->rows[i].var, var))) {
    i++;
  }
  if (i == s->n) {
    if (s->n == MAX_SEEN) {
      s->unchecked = 1;
      return 0;
    }
    snprintf(s->rows[s->n++].var, sizeof s->rows[i].var, "%s", var);
    s->rows[i].id = id;
  }
  s->rows[i].width = values ? row_floats : 0;
  if (values && row_floats <= MAX_WIDTH) {
    memcpy(s->rows[i].v, values, sizeof(float) * (size_t)row_floats);
  }
  return 0;
}

/* Writes the input's files (split before each magic after the first byte) into dir/ckpt-K/ps-0.rows; the count. */
static int write_files(const char *dir, const uint8_t *data, size_t size) {
  size_t start = 0;
  int n = 0;
  for (size_t i = 1; n < MAX_FILES && i <= size; i++) {
    int last = n == MAX_FILES - 1; /* the last file takes the rest */
    int cut = i == size || (!last && i + 8 <= size && !memcmp(data + i, "TFXROWS1", 8));
    if (cut) {
      char path[PATH_MAX];
      snprintf(path, sizeof path, "%s/ckpt-%012d", dir, n + 1);
      mkdir(path, 0700);
      snprintf(path, sizeof path, "%s/ckpt-%012d/ps-0.rows", dir, n + 1);
      FILE *f = fopen(path, "wb");
      if (!f) {
        abort();
      }
      fwrite(data + start, 1, i - start, f);
      fclose(f);
      start = i;
      n++;
    }
  }
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char dir[PATH_MAX];
  static seen s;
  if (!dir[0]) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/fuzz-rowchain-%d", tmp ? tmp : "/tmp", (int)getpid());
    mkdir(dir, 0700);
  }
  for (int k = 1; k <= MAX_FILES; k++) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/ckpt-%012d/ps-0.rows", dir, k);
    unlink(path);
  }
  if (!size) {
    return 0;
  }
  int n = write_files(dir, data, size);
  char newest[PATH_MAX];
  snprintf(newest, sizeof newest, "%s/ckpt-%012d", dir, n);
  memset(&s, 0, sizeof s);
  tfx_err e1 = {0}, e2 = {0};
  int rc1 = tfx_rowfile_read_chain(newest, 0, row, &s, &e1);
  if (rc1 && !e1.msg[0]) {
    abort();
  }
  tfx_rowindex *x = NULL;
  int rc2 = tfx_rowindex_open(newest, 1, &x, &e2);
  if (rc2 && !e2.msg[0]) {
    abort();
  }
  for (int i = 0; !rc1 && !rc2 && !s.unchecked && i < s.n; i++) {
    const seen_row *r = &s.rows[i];
    float got[MAX_WIDTH];
    int width = 1;
    for (int t = 0; t < s.n_tables; t++) {
      width = strcmp(s.width_of[t], r->var) ? width : s.widths[t];
    }
    int has = tfx_rowindex_get(x, r->var, r->id, width, got);
    if (has != (r->width > 0) || (has && memcmp(got, r->v, sizeof(float) * (size_t)width))) {
      fprintf(stderr, "row %s:%lld: the index %s it, the restore %s\n", r->var, (long long)r->id,
              has ? "holds" : "lacks", r->width ? "holds" : "deleted");
      abort();
    }
  }
  tfx_rowindex_close(x);
  return 0;
}
