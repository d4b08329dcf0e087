/* LibSVM reading: tokens of each line into a sparse (index, value) list, densified once the width is known. */
#include "data/libsvm.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/labelset.h"
#include "common/log.h"
#include "data/data_impl.h"

/* Indices above this are rejected: LibSVM itself stores them as int. */
#define MAX_INDEX 2147483647UL
/* The bytes of a bad token a message shows. */
#define BAD_TOKEN_SHOWN 24

typedef struct svm {
  const char *path;
  FILE *f;
  char *line; /* getline buffer, reused */
  size_t line_cap, lineno;
  size_t dim, max_idx;
  int64_t *ids; /* every row's 0-based indices and values, in order (handed to a sparse dataset as they are) */
  float *vals;
  size_t ne, ids_cap, vals_cap;
  size_t *start; /* start[i]: first entry of row i */
  size_t start_cap;
  int32_t *y;
  size_t n, cap;
} svm;

/* Grows *p (of *cap elements of `size` bytes) to hold at least `need`. */
static int reserve(void **p, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) {
    return 0;
  }
  size_t c = *cap ? *cap : 64;
  while (c < need) {
    c *= 2;
  }
  if (c > SIZE_MAX / size) {
    return -1;
  }
  void *q = realloc(*p, c * size);
  if (!q) {
    return -1;
  }
  *p = q;
  *cap = c;
  return 0;
}

/* A bad token is named by a short escaped prefix: the data may be anyone's (a followed directory's), and the
 * message goes to logs others read. */
static int bad(const svm *s, const char *tok, const char *what, tfx_err *err) {
  char shown[4 * BAD_TOKEN_SHOWN + 1];
  size_t len = strcspn(tok, " \t\r\n");
  tfx_log_escape(tok, len < BAD_TOKEN_SHOWN ? len : BAD_TOKEN_SHOWN, shown, sizeof shown);
  return tfx_err_set(err, TFX_ECORRUPT, "%s: line %zu, column %zu: '%s%s': %s", s->path, s->lineno,
                     (size_t)(tok - s->line) + 1, shown, len > BAD_TOKEN_SHOWN ? "..." : "", what);
}

static int parse_label(svm *s, const char *tok, tfx_err *err) {
  char *end;
  double v = strtod(tok, &end);
  if (end == tok || *end || !isfinite(v) || v != floor(v) || v < INT32_MIN || v > INT32_MAX) {
    return tfx_label_set_parse(tok, ',', &s->y[s->n]) ? bad(s, tok, "the label is not an int32 or a set (1,4)", err)
                                                      : TFX_OK;
  }
  if (v < 0) { /* every negative int32 is a label set (labelset.h): -1 would be all 31 classes on */
    return bad(s, tok, "a negative label: classes are 0 and up (map LibSVM's -1/+1 to 0/1)", err);
  }
  s->y[s->n] = (int32_t)v;
  return TFX_OK;
}

/* The value of a pair: a plain integer of up to 7 digits read directly (exact in a float: the "1" of hashed
 * features, a count), anything else by strtof; *end after it as strtof sets it. */
static float pair_value(char *val, char **end) {
  char *q = val;
  int32_t m = 0;
  while (*q >= '0' && *q <= '9' && q - val < 7) {
    m = m * 10 + (*q++ - '0');
  }
  if (q > val && *q == '\0') {
    *end = q;
    return (float)m;
  }
  return strtof(val, end);
}

/* The decimal index at the start of tok (growing no further once past MAX_INDEX, so "too large" is told apart);
 * *end after its digits (tok when it has none). */
static unsigned long long pair_index(char *tok, char **end) {
  unsigned long long idx = 0;
  char *q = tok;
  for (; *q >= '0' && *q <= '9'; q++) {
    idx = idx > MAX_INDEX ? idx : idx * 10 + (unsigned)(*q - '0');
  }
  *end = q;
  return idx;
}

/* Parses "idx:val" (prev: the previous index of the line, 0 at first) and appends the entry. */
static int parse_pair(svm *s, char *tok, size_t *prev, tfx_err *err) {
  if (strncmp(tok, "qid:", 4) == 0) {
    return TFX_OK;
  }
  char *end;
  unsigned long long idx = pair_index(tok, &end);
  if (idx == 0 || *end != ':') {
    return bad(s, tok, "want index:value with a 1-based index", err);
  }
  if (idx > MAX_INDEX) {
    return bad(s, tok, "index too large", err);
  }
  if (idx <= *prev) {
    return bad(s, tok, "indices must ascend within a line", err);
  }
  if (s->dim && idx > s->dim) {
    return tfx_err_set(err, TFX_ESHAPE, "%s: line %zu, column %zu: index %llu exceeds dim %zu", s->path, s->lineno,
                       (size_t)(tok - s->line) + 1, idx, s->dim);
  }
  char *val = end + 1;
  float v = pair_value(val, &end);
  if (end == val || *end || !isfinite(v)) {
    return bad(s, tok, "the value is not a finite number", err);
  }
  if (reserve((void **)&s->ids, &s->ids_cap, s->ne + 1, sizeof *s->ids) ||
      reserve((void **)&s->vals, &s->vals_cap, s->ne + 1, sizeof *s->vals)) {
    return tfx_err_set(err, TFX_ENOMEM, "%s: line %zu: out of memory", s->path, s->lineno);
  }
  s->ids[s->ne] = (int64_t)idx - 1;
  s->vals[s->ne++] = v;
  *prev = idx;
  if (idx > s->max_idx) {
    s->max_idx = idx;
  }
  return TFX_OK;
}

/* Cuts the next blank-separated token out of *p in place; NULL when none is left. */
static char *token(char **p) {
  char *t = *p + strspn(*p, " \t");
  if (!*t) {
    return NULL;
  }
  char *end = t + strcspn(t, " \t");
  *p = *end ? end + 1 : end;
  *end = '\0';
  return t;
}

/* The label token of a line (cut in place, *p left after it), with a comment and the line end cut off; NULL for a
 * line that holds no row (blank or only a comment). */
static char *row_label(char *line, char **p) {
  line[strcspn(line, "#\r\n")] = '\0';
  *p = line;
  return token(p);
}

/* Parses the current line (a label and pairs) into the next row; blank lines add nothing, nor does a bad line
 * (its error names it; the reader asked again goes on at the next line). */
static int add_line(svm *s, tfx_err *err) {
  char *p;
  char *tok = row_label(s->line, &p);
  if (!tok) {
    return TFX_OK;
  }
  if (reserve((void **)&s->y, &s->cap, s->n + 1, sizeof *s->y) ||
      reserve((void **)&s->start, &s->start_cap, s->n + 1, sizeof *s->start)) {
    return tfx_err_set(err, TFX_ENOMEM, "%s: line %zu: out of memory", s->path, s->lineno);
  }
  s->start[s->n] = s->ne;
  int rc = parse_label(s, tok, err);
  size_t prev = 0;
  while (!rc && (tok = token(&p))) {
    rc = parse_pair(s, tok, &prev, err);
  }
  if (!rc) {
    s->n++;
  } else {
    s->ne = s->start[s->n]; /* the bad row's pairs go: a reader asked again goes on at the next line */
  }
  return rc;
}

/* The next line into s->line (NUL-terminated, its newline kept) and its length into *len; a line longer than
 * TFX_LIBSVM_MAX_LINE is read to its end but not kept (*len is then past the bound). *eof at the end of the file. */
static int read_line(svm *s, size_t *len, int *eof, tfx_err *err) {
  size_t n = 0;
  int c = 0;
  while ((c = getc_unlocked(s->f)) != EOF) {
    if (n < TFX_LIBSVM_MAX_LINE && reserve((void **)&s->line, &s->line_cap, n + 2, 1)) {
      return tfx_err_set(err, TFX_ENOMEM, "%s: line %zu: out of memory", s->path, s->lineno + 1);
    }
    if (n < TFX_LIBSVM_MAX_LINE) {
      s->line[n] = (char)c;
    }
    n++;
    if (c == '\n') {
      break;
    }
  }
  if (ferror(s->f)) {
    return tfx_err_sys(err, TFX_ESYS, "%s: read error after line %zu", s->path, s->lineno);
  }
  *eof = n == 0;
  if (n && n <= TFX_LIBSVM_MAX_LINE) {
    s->line[n] = '\0';
  }
  *len = n;
  return TFX_OK;
}

/* Reads lines until `max` rows are held or the file ends (*eof). */
static int read_rows(svm *s, size_t max, int *eof, tfx_err *err) {
  while (s->n < max) {
    size_t len = 0;
    int rc = read_line(s, &len, eof, err);
    if (rc || *eof) {
      return rc;
    }
    s->lineno++;
    if (len > TFX_LIBSVM_MAX_LINE) { /* a line with no bound held a whole file in memory */
      return tfx_err_set(err, TFX_ECORRUPT, "%s: line %zu: longer than %d bytes", s->path, s->lineno,
                         TFX_LIBSVM_MAX_LINE);
    }
    const char *nul = memchr(s->line, '\0', len); /* the text after it would be dropped unread */
    if (nul) {
      return tfx_err_set(err, TFX_ECORRUPT, "%s: line %zu, column %zu: a NUL byte", s->path, s->lineno,
                         (size_t)(nul - s->line) + 1);
    }
    if ((rc = add_line(s, err))) {
      return rc;
    }
  }
  return TFX_OK;
}

/* Builds the dense dataset from the sparse rows. */
static int densify(svm *s, tfx_dataset **out, tfx_err *err) {
  if (s->n == 0) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: no examples", s->path);
  }
  size_t dim = s->dim ? s->dim : s->max_idx;
  if (dim == 0) {
    return tfx_err_set(err, TFX_ECONFIG, "%s: no feature index in any line and no dim given", s->path);
  }
  if (s->n > SIZE_MAX / sizeof(float) / dim) {
    return tfx_err_set(err, TFX_ENOMEM, "%s: %zu x %zu is too large", s->path, s->n, dim);
  }
  tfx_dataset *d = calloc(1, sizeof *d);
  float *x = calloc(s->n * dim, sizeof *x);
  if (!d || !x) {
    free(d);
    free(x);
    return tfx_err_set(err, TFX_ENOMEM, "%s: out of memory for %zu x %zu floats", s->path, s->n, dim);
  }
  for (size_t i = 0; i < s->n; i++) {
    size_t end = i + 1 < s->n ? s->start[i + 1] : s->ne;
    for (size_t k = s->start[i]; k < end; k++) {
      x[i * dim + (size_t)s->ids[k]] = s->vals[k];
    }
  }
  d->n = s->n;
  d->dim = dim;
  d->x = x;
  d->y = s->y;
  s->y = NULL;
  *out = d;
  return TFX_OK;
}

/* Builds a sparse dataset (CSR) from the rows: memory grows with the nonzeros, never with dim. */
static int to_csr(svm *s, tfx_dataset **out, tfx_err *err) {
  size_t dim = s->dim ? s->dim : s->max_idx;
  if (s->n == 0 || dim == 0) {
    return tfx_err_set(err, s->n ? TFX_ECONFIG : TFX_ECORRUPT, "%s: %s", s->path,
                       s->n ? "no feature index in any line and no dim given" : "no examples");
  }
  tfx_dataset *d = calloc(1, sizeof *d);
  int64_t *off = malloc(sizeof(int64_t) * (s->n + 1));
  if (!d || !off ||
      (!s->ne && (reserve((void **)&s->ids, &s->ids_cap, 1, sizeof *s->ids) ||
                  reserve((void **)&s->vals, &s->vals_cap, 1, sizeof *s->vals)))) {
    free(d);
    free(off);
    return tfx_err_set(err, TFX_ENOMEM, "%s: out of memory for %zu nonzeros", s->path, s->ne);
  }
  for (size_t i = 0; i < s->n; i++) {
    off[i] = (int64_t)s->start[i];
  }
  off[s->n] = (int64_t)s->ne;
  /* The parse buffers become the dataset's, trimmed to the nonzeros: no second copy of the set is made. */
  int64_t *ids = s->ne ? realloc(s->ids, sizeof(int64_t) * s->ne) : s->ids;
  float *vals = s->ne ? realloc(s->vals, sizeof(float) * s->ne) : s->vals;
  d->n = s->n;
  d->dim = dim;
  d->y = s->y;
  d->n_fields = 1;
  d->fields[0] = (tfx_field){off, ids ? ids : s->ids, vals ? vals : s->vals};
  s->y = NULL;
  s->ids = NULL;
  s->vals = NULL;
  s->ids_cap = s->vals_cap = 0;
  *out = d;
  return TFX_OK;
}

struct tfx_libsvm_reader {
  svm s;
  int eof;
};

int tfx_libsvm_open(const char *path, size_t dim, tfx_libsvm_reader **out, tfx_err *err) {
  if (!path || !out) {
    return tfx_err_set(err, TFX_EINVAL, "libsvm open: NULL path or out");
  }
  if (dim > MAX_INDEX) {
    return tfx_err_set(err, TFX_EINVAL, "%s: dim %zu is too large", path, dim);
  }
  FILE *f = NULL;
  int rc = data__file_open(path, &f, err);
  return rc ? rc : data__libsvm_open_file(f, path, dim, out, err);
}

int data__libsvm_open_file(FILE *f, const char *path, size_t dim, tfx_libsvm_reader **out, tfx_err *err) {
  if (dim > MAX_INDEX) {
    fclose(f);
    return tfx_err_set(err, TFX_EINVAL, "%s: dim %zu is too large", path, dim);
  }
  tfx_libsvm_reader *r = calloc(1, sizeof *r);
  char *name = strdup(path);
  if (!r || !name) {
    fclose(f);
    free(r);
    free(name);
    return tfx_err_set(err, TFX_ENOMEM, "%s: out of memory", path);
  }
  r->s.path = name;
  r->s.dim = dim;
  r->s.f = f;
  *out = r;
  return TFX_OK;
}

/* Reads up to max more rows and hands them to a new dataset made by build (densify or to_csr). */
static int read_chunk(tfx_libsvm_reader *r, size_t max, int (*build)(svm *, tfx_dataset **, tfx_err *),
                      tfx_dataset **out, tfx_err *err) {
  svm *s = &r->s;
  *out = NULL;
  int rc = r->eof ? TFX_OK : read_rows(s, max, &r->eof, err);
  if (rc || s->n == 0) {
    return rc;
  }
  rc = build(s, out, err);
  s->n = s->ne = 0; /* the next chunk starts empty; the row buffers are reused, y was handed over */
  s->cap = 0;
  return rc;
}

int tfx_libsvm_read(tfx_libsvm_reader *r, size_t max, tfx_dataset **out, tfx_err *err) {
  return read_chunk(r, max, densify, out, err);
}

void tfx_libsvm_close(tfx_libsvm_reader *r) {
  if (!r) {
    return;
  }
  if (r->s.f) {
    fclose(r->s.f);
  }
  free((char *)r->s.path);
  free(r->s.line);
  free(r->s.ids);
  free(r->s.vals);
  free(r->s.start);
  free(r->s.y);
  free(r);
}

/* Reads the lines of path until the example `stop` (0-based; SIZE_MAX - 1: all): the examples seen into *rows and the
 * 1-based number of the last line read into *lineno. */
static int scan_rows(const char *path, size_t stop, size_t *rows, size_t *lineno, tfx_err *err) {
  FILE *f = fopen(path, "r");
  if (!f) {
    return tfx_err_sys(err, errno == ENOENT ? TFX_ENOTFOUND : TFX_ESYS, "open %s", path);
  }
  char *line = NULL;
  size_t cap = 0, at = 0, n = 0;
  while (n <= stop && getline(&line, &cap, f) >= 0) {
    char *p;
    n += row_label(line, &p) != NULL;
    at++;
  }
  int rc = ferror(f) ? tfx_err_sys(err, TFX_ESYS, "%s: read error after line %zu", path, at) : TFX_OK;
  free(line);
  fclose(f);
  if (!rc) {
    *rows = n;
    *lineno = at;
  }
  return rc;
}

int tfx_libsvm_count(const char *path, int64_t *n, tfx_err *err) {
  size_t rows = 0, lineno = 0;
  int rc = scan_rows(path, SIZE_MAX - 1, &rows, &lineno, err);
  if (!rc) {
    *n = (int64_t)rows;
  }
  return rc;
}

int tfx_libsvm_line_of(const char *path, size_t index, size_t *line, tfx_err *err) {
  size_t rows = 0, lineno = 0;
  int rc = scan_rows(path, index, &rows, &lineno, err);
  if (!rc && rows <= index) {
    rc = tfx_err_set(err, TFX_ENOTFOUND, "%s: no example %zu", path, index);
  }
  if (!rc) {
    *line = lineno;
  }
  return rc;
}

int tfx_libsvm_load(const char *path, size_t dim, tfx_dataset **out, tfx_err *err) {
  tfx_libsvm_reader *r = NULL;
  int rc = tfx_libsvm_open(path, dim, &r, err);
  if (!rc && !(rc = tfx_libsvm_read(r, SIZE_MAX, out, err)) && !*out) {
    rc = tfx_err_set(err, TFX_ECORRUPT, "%s: no examples", path);
  }
  tfx_libsvm_close(r);
  return rc;
}

int tfx_libsvm_read_sparse(tfx_libsvm_reader *r, size_t max, tfx_dataset **out, tfx_err *err) {
  return read_chunk(r, max, to_csr, out, err);
}

int tfx_libsvm_load_sparse(const char *path, size_t dim, tfx_dataset **out, tfx_err *err) {
  tfx_libsvm_reader *r = NULL;
  int rc = tfx_libsvm_open(path, dim, &r, err);
  if (!rc && !(rc = read_rows(&r->s, SIZE_MAX, &r->eof, err))) {
    rc = to_csr(&r->s, out, err);
  }
  tfx_libsvm_close(r);
  return rc;
}
