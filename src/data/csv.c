/* CSV reading: line by line with getline, cells split in place, numbers parsed with strtof. */
#include "data/csv.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/labelset.h"
#include "data/data_impl.h"

typedef struct csv {
  const char *path;
  FILE *f;
  char *line; /* getline buffer, reused */
  size_t line_cap;
  size_t lineno;   /* 1-based number of the (first) line of the row in `line` */
  size_t physical; /* lines read so far (a row with a quoted newline spans several) */
  char *more;      /* getline buffer for a row's further lines, reused */
  size_t more_cap;
  char **cells; /* pointers into `line` after split */
  size_t ncells, cells_cap;
  char *header; /* the header line, split; names point into it */
  char **names;
  size_t ncols, label, dim;
  float *x;
  int32_t *y;
  size_t n, cap;
} csv;

static int is_blank(char c) {
  return c == ' ' || c == '\t';
}

/* Whether a line ends inside a quoted cell, by split's rules (a cell whose first non-blank is '"' is quoted up to
 * a '"' that is not doubled): the row then goes on at the next line (RFC 4180 allows newlines in quotes). */
static int open_quote(const char *s) {
  int in = 0, start = 1;
  for (; *s; s++) {
    if (in && *s == '"' && s[1] == '"') {
      s++; /* a doubled quote: one inside the cell */
    } else if (in) {
      in = *s != '"';
    } else if (*s == '"' && start) {
      in = 1;
    } else {
      start = *s == ',' || (start && (*s == ' ' || *s == '\t'));
    }
  }
  return in;
}

/* One more line into `buf` without its line end; its length, or -1 at the end of the file. */
static ssize_t read_line(csv *c, char **buf, size_t *cap) {
  ssize_t len = getline(buf, cap, c->f);
  if (len >= 0) {
    c->physical++;
    while (len > 0 && ((*buf)[len - 1] == '\n' || (*buf)[len - 1] == '\r')) {
      (*buf)[--len] = '\0';
    }
  }
  return len;
}

/* Appends the row's further lines (joined by '\n') while it ends inside quotes; an unterminated quote at the end
 * of the file is left for split to name. */
static int join_quoted(csv *c, size_t len, tfx_err *err) {
  while (open_quote(c->line)) {
    ssize_t more = read_line(c, &c->more, &c->more_cap);
    if (more < 0) {
      return TFX_OK;
    }
    if (len + (size_t)more + 2 > c->line_cap) {
      char *grown = realloc(c->line, len + (size_t)more + 2);
      if (!grown) {
        return tfx_err_set(err, TFX_ENOMEM, "%s: line %zu: out of memory", c->path, c->lineno);
      }
      c->line = grown;
      c->line_cap = len + (size_t)more + 2;
    }
    c->line[len] = '\n';
    memcpy(c->line + len + 1, c->more, (size_t)more + 1);
    len += (size_t)more + 1;
  }
  return TFX_OK;
}

/* Reads the next row that is not blank into c->line without its line end; *eof at the end of the file. */
static int next_line(csv *c, int *eof, tfx_err *err) {
  for (;;) {
    ssize_t len = read_line(c, &c->line, &c->line_cap);
    if (len < 0) {
      if (ferror(c->f)) {
        return tfx_err_sys(err, TFX_ESYS, "%s: read error after line %zu", c->path, c->physical);
      }
      *eof = 1;
      return TFX_OK;
    }
    c->lineno = c->physical;
    if (c->lineno == 1 && strncmp(c->line, "\xEF\xBB\xBF", 3) == 0) {
      memmove(c->line, c->line + 3, (size_t)len - 2);
      len -= 3;
    }
    if (c->line[strspn(c->line, " \t")] != '\0') {
      *eof = 0;
      return join_quoted(c, (size_t)len, err);
    }
  }
}

static int push_cell(csv *c, char *cell, tfx_err *err) {
  if (c->ncells == c->cells_cap) {
    size_t cap = c->cells_cap ? 2 * c->cells_cap : 16;
    char **cells = realloc(c->cells, cap * sizeof *cells);
    if (!cells) {
      return tfx_err_set(err, TFX_ENOMEM, "%s: line %zu: out of memory", c->path, c->lineno);
    }
    c->cells = cells;
    c->cells_cap = cap;
  }
  c->cells[c->ncells++] = cell;
  return TFX_OK;
}

/* Copies a quoted cell's text from *r (just after the opening quote) to *w, unescaping "". */
static int unquote(csv *c, char **r, char **w, tfx_err *err) {
  for (;;) {
    if (**r == '\0') {
      return tfx_err_set(err, TFX_ECORRUPT, "%s: line %zu, column %zu: unterminated quote", c->path, c->lineno,
                         c->ncells);
    }
    if (**r == '"' && (*r)[1] != '"') {
      break;
    }
    if (**r == '"') {
      (*r)++;
    }
    *(*w)++ = *(*r)++;
  }
  (*r)++;
  while (is_blank(**r)) {
    (*r)++;
  }
  if (**r != ',' && **r != '\0') {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: line %zu, column %zu: text after a closing quote", c->path, c->lineno,
                       c->ncells);
  }
  return TFX_OK;
}

/* Splits c->line (or the header) in place into c->cells at commas. */
static int split(csv *c, char *line, tfx_err *err) {
  char *r = line, *w = line;
  int rc;
  c->ncells = 0;
  for (;;) {
    if ((rc = push_cell(c, w, err))) {
      return rc;
    }
    char *q = r + strspn(r, " \t");
    if (*q == '"') {
      r = q + 1;
      if ((rc = unquote(c, &r, &w, err))) {
        return rc;
      }
    } else {
      while (*r && *r != ',') {
        *w++ = *r++;
      }
    }
    int end = *r == '\0';
    *w++ = '\0';
    if (end) {
      return TFX_OK;
    }
    r++;
  }
}

/* The cell's column for messages: "column 3 ('width')" with a header, "column 3" without. */
static const char *column_name(const csv *c, size_t col, char *buf, size_t n) {
  if (c->names) {
    snprintf(buf, n, "column %zu ('%s')", col + 1, c->names[col]);
  } else {
    snprintf(buf, n, "column %zu", col + 1);
  }
  return buf;
}

/* Strips blanks around a header name in place. */
static char *trim(char *s) {
  s += strspn(s, " \t");
  size_t len = strlen(s);
  while (len > 0 && is_blank(s[len - 1])) {
    s[--len] = '\0';
  }
  return s;
}

/* Orders pointers into a names array by name, then by column. */
static int cmp_name(const void *a, const void *b) {
  char *const *x = *(char *const *const *)a, *const *y = *(char *const *const *)b;
  int c = strcmp(*x, *y);
  return c ? c : (x > y) - (x < y);
}

/* TFX_ECORRUPT naming the first column (in file order) whose header name an earlier one has, and that one (a label
 * or feature named by it would be the first, silently). Sorted pointers: a header of many columns costs n log n. */
static int unique_names(const csv *c, tfx_err *err) {
  char ***by = malloc((c->ncells + 1) * sizeof *by);
  if (!by) {
    return tfx_err_set(err, TFX_ENOMEM, "%s: out of memory", c->path);
  }
  for (size_t i = 0; i < c->ncells; i++) {
    by[i] = &c->names[i];
  }
  qsort(by, c->ncells, sizeof *by, cmp_name);
  size_t first = 0, again = SIZE_MAX;
  for (size_t i = 1; i < c->ncells; i++) { /* the second of each run of one name; the earliest of them */
    int second = !strcmp(*by[i - 1], *by[i]) && (i < 2 || strcmp(*by[i - 2], *by[i - 1]));
    if (second && (size_t)(by[i] - c->names) < again) {
      again = (size_t)(by[i] - c->names);
      first = (size_t)(by[i - 1] - c->names);
    }
  }
  free(by);
  return again == SIZE_MAX
             ? TFX_OK
             : tfx_err_set(err, TFX_ECORRUPT, "%s: line %zu: column %zu ('%s') has the name of column %zu", c->path,
                           c->lineno, again + 1, c->names[again], first + 1);
}

/* Keeps the header's cells as column names, which must differ. */
static int take_header(csv *c, tfx_err *err) {
  if (!(c->header = strdup(c->line))) {
    return tfx_err_set(err, TFX_ENOMEM, "%s: out of memory", c->path);
  }
  int rc = split(c, c->header, err);
  if (rc) {
    return rc;
  }
  if (!(c->names = malloc(c->ncells * sizeof *c->names))) {
    return tfx_err_set(err, TFX_ENOMEM, "%s: out of memory", c->path);
  }
  for (size_t i = 0; i < c->ncells; i++) {
    c->names[i] = trim(c->cells[i]);
  }
  return unique_names(c, err);
}

/* Resolves the label column by header name, else by (possibly negative) index. */
static int resolve_label(csv *c, const char *label, tfx_err *err) {
  for (size_t i = 0; c->names && i < c->ncols; i++) {
    if (strcmp(c->names[i], label) == 0) {
      c->label = i;
      return TFX_OK;
    }
  }
  char *end;
  errno = 0;
  long v = strtol(label, &end, 10);
  if (end == label || *end || errno) {
    return tfx_err_set(err, TFX_ECONFIG, "%s: label column '%s': %s", c->path, label,
                       c->names ? "no such name in the header" : "not an index, and the file has no header");
  }
  long idx = v < 0 ? (long)c->ncols + v : v;
  if (idx < 0 || idx >= (long)c->ncols) {
    return tfx_err_set(err, TFX_ECONFIG, "%s: label column %ld is out of range: line %zu has %zu columns", c->path, v,
                       c->lineno, c->ncols);
  }
  c->label = (size_t)idx;
  return TFX_OK;
}

/* Makes room for one more example. */
static int grow(csv *c, tfx_err *err) {
  if (c->n < c->cap) {
    return TFX_OK;
  }
  size_t cap = c->cap ? 2 * c->cap : 64;
  if (cap > SIZE_MAX / sizeof(float) / c->dim) {
    return tfx_err_set(err, TFX_ENOMEM, "%s: dataset too large", c->path);
  }
  float *x = realloc(c->x, sizeof(float) * cap * c->dim);
  if (x) {
    c->x = x;
  }
  int32_t *y = x ? realloc(c->y, sizeof(int32_t) * cap) : NULL;
  if (!y) {
    return tfx_err_set(err, TFX_ENOMEM, "%s: out of memory at line %zu", c->path, c->lineno);
  }
  c->y = y;
  c->cap = cap;
  return TFX_OK;
}

/* Parses one cell as a finite float (want_int: an integral value within int32). */
static int parse_cell(const char *cell, int want_int, double *out) {
  char *end;
  double v = want_int ? strtod(cell, &end) : strtof(cell, &end);
  if (end == cell) {
    return -1;
  }
  end += strspn(end, " \t");
  if (*end || !isfinite(v)) {
    return -1;
  }
  if (want_int && (v != floor(v) || v < INT32_MIN || v > INT32_MAX)) {
    return -1;
  }
  *out = v;
  return 0;
}

/* Parses the cells of the current line, already split, into the next example. */
static int add_cells(csv *c, tfx_err *err) {
  if (c->ncells != c->ncols) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: line %zu: %zu columns, expected %zu", c->path, c->lineno, c->ncells,
                       c->ncols);
  }
  int rc = grow(c, err);
  if (rc) {
    return rc;
  }
  float *x = c->x + c->n * c->dim;
  for (size_t col = 0; col < c->ncols; col++) {
    double v;
    int is_label = col == c->label;
    if (is_label && parse_cell(c->cells[col], 1, &v) && !tfx_label_set_parse(c->cells[col], '|', &c->y[c->n])) {
      continue; /* a multi-label example's set of classes, "1|4" */
    }
    if (parse_cell(c->cells[col], is_label, &v)) {
      char name[128];
      return tfx_err_set(err, TFX_ECORRUPT, "%s: line %zu, %s: '%s' is not %s", c->path, c->lineno,
                         column_name(c, col, name, sizeof name), c->cells[col],
                         is_label ? "an int32 label or a set of classes (1|4)" : "a finite number");
    }
    if (is_label) {
      c->y[c->n] = (int32_t)v;
    } else {
      *x++ = (float)v;
    }
  }
  c->n++;
  return TFX_OK;
}

/* Splits and parses the current line into the next example. */
static int add_row(csv *c, tfx_err *err) {
  int rc = split(c, c->line, err);
  return rc ? rc : add_cells(c, err);
}

/* Reads the first line: the header, or the width of the rows; then finds the label column. */
static int start(csv *c, const char *label, int has_header, tfx_err *err) {
  int eof = 0;
  int rc = next_line(c, &eof, err);
  if (!rc && eof) {
    rc = tfx_err_set(err, TFX_ECORRUPT, "%s: empty file", c->path);
  }
  if (!rc && has_header) {
    rc = take_header(c, err);
  }
  if (!rc && !has_header) {
    rc = split(c, c->line, err);
  }
  if (rc) {
    return rc;
  }
  c->ncols = c->ncells;
  if (c->ncols < 2) {
    return tfx_err_set(err, TFX_ECONFIG, "%s: line %zu has %zu column; want a label and at least one feature", c->path,
                       c->lineno, c->ncols);
  }
  c->dim = c->ncols - 1;
  if ((rc = resolve_label(c, label, err))) {
    return rc;
  }
  return has_header ? TFX_OK : add_cells(c, err);
}

static void release(csv *c) {
  if (c->f) {
    fclose(c->f);
  }
  free(c->line);
  free(c->more);
  free(c->cells);
  free(c->header);
  free(c->names);
  free(c->x);
  free(c->y);
}

/* Hands the rows read so far to a new dataset and starts the next chunk empty; *out NULL when none. */
static int take_rows(csv *c, tfx_dataset **out, tfx_err *err) {
  *out = NULL;
  if (c->n == 0) {
    return TFX_OK;
  }
  int rc = data__dataset_take(c->n, c->dim, &c->x, &c->y, c->path, out, err);
  if (!rc) {
    c->n = c->cap = 0;
  }
  return rc;
}

struct tfx_csv_reader {
  csv c;
  int eof;
};

int tfx_csv_open(const char *path, const char *label_column, int has_header, tfx_csv_reader **out, tfx_err *err) {
  if (!path || !label_column || !out) {
    return tfx_err_set(err, TFX_EINVAL, "csv open: NULL path, label column or out");
  }
  FILE *f = NULL;
  int rc = data__file_open(path, &f, err);
  return rc ? rc : data__csv_open_file(f, path, label_column, has_header, out, err);
}

int data__csv_open_file(FILE *f, const char *path, const char *label_column, int has_header, tfx_csv_reader **out,
                        tfx_err *err) {
  tfx_csv_reader *r = calloc(1, sizeof *r);
  char *name = strdup(path);
  if (!r || !name) {
    fclose(f);
    free(r);
    free(name);
    return tfx_err_set(err, TFX_ENOMEM, "%s: out of memory", path);
  }
  r->c.path = name;
  r->c.f = f;
  int rc = start(&r->c, label_column, has_header, err);
  if (rc) {
    tfx_csv_close(r);
    return rc;
  }
  *out = r;
  return TFX_OK;
}

int tfx_csv_read(tfx_csv_reader *r, size_t max, tfx_dataset **out, tfx_err *err) {
  int rc = TFX_OK;
  while (!rc && !r->eof && r->c.n < max && !(rc = next_line(&r->c, &r->eof, err)) && !r->eof) {
    rc = add_row(&r->c, err);
  }
  return rc ? rc : take_rows(&r->c, out, err);
}

void tfx_csv_close(tfx_csv_reader *r) {
  if (r) {
    free((char *)r->c.path);
    release(&r->c);
    free(r);
  }
}

/* Reads the non-blank lines of path up to the line `stop` (0-based among them; SIZE_MAX: all): their number into
 * *lines and the 1-based number of the last one read into *lineno. */
static int scan_lines(const char *path, size_t stop, size_t *lines, size_t *lineno, tfx_err *err) {
  csv c = {.path = path};
  if (!(c.f = fopen(path, "r"))) {
    return tfx_err_sys(err, errno == ENOENT ? TFX_ENOTFOUND : TFX_ESYS, "open %s", path);
  }
  size_t n = 0;
  int eof = 0, rc;
  while (!(rc = next_line(&c, &eof, err)) && !eof && n++ < stop) {
  }
  fclose(c.f);
  free(c.line);
  free(c.more);
  if (!rc) {
    *lines = n;
    *lineno = c.lineno;
  }
  return rc;
}

int tfx_csv_count(const char *path, int has_header, int64_t *n, tfx_err *err) {
  size_t lines = 0, lineno = 0;
  int rc = scan_lines(path, SIZE_MAX, &lines, &lineno, err);
  if (!rc && lines == 0) {
    rc = tfx_err_set(err, TFX_ECORRUPT, "%s: empty file", path);
  }
  if (!rc) {
    *n = (int64_t)(has_header ? lines - 1 : lines);
  }
  return rc;
}

int tfx_csv_line_of(const char *path, int has_header, size_t index, size_t *line, tfx_err *err) {
  size_t lines = 0, lineno = 0, want = index + (has_header ? 1 : 0);
  int rc = scan_lines(path, want, &lines, &lineno, err);
  if (!rc && lines <= want) {
    rc = tfx_err_set(err, TFX_ENOTFOUND, "%s: no row %zu", path, index);
  }
  if (!rc) {
    *line = lineno;
  }
  return rc;
}

int tfx_csv_load(const char *path, const char *label_column, int has_header, tfx_dataset **out, tfx_err *err) {
  tfx_csv_reader *r = NULL;
  int rc = tfx_csv_open(path, label_column, has_header, &r, err);
  if (!rc && !(rc = tfx_csv_read(r, SIZE_MAX, out, err)) && !*out) {
    rc = tfx_err_set(err, TFX_ECORRUPT, "%s: no data rows", path);
  }
  tfx_csv_close(r);
  return rc;
}

struct tfx_csv_rows {
  csv c;
};

int tfx_csv_rows_open(const char *path, tfx_csv_rows **out, tfx_err *err) {
  FILE *f = NULL;
  int rc = data__file_open(path, &f, err);
  return rc ? rc : data__csv_rows_open_file(f, path, out, err);
}

int data__csv_rows_open_file(FILE *f, const char *path, tfx_csv_rows **out, tfx_err *err) {
  tfx_csv_rows *r = calloc(1, sizeof *r);
  char *name = strdup(path);
  if (!r || !name) {
    fclose(f);
    free(r);
    free(name);
    return tfx_err_set(err, TFX_ENOMEM, "%s: out of memory", path);
  }
  r->c.path = name;
  r->c.f = f;
  int eof = 0, rc = next_line(&r->c, &eof, err);
  if (!rc && eof) {
    rc = tfx_err_set(err, TFX_ECORRUPT, "%s: empty file (a header of column names is needed)", path);
  }
  if (!rc && !(rc = take_header(&r->c, err))) {
    r->c.ncols = r->c.ncells;
  }
  if (rc) {
    tfx_csv_rows_close(r);
    return rc;
  }
  *out = r;
  return TFX_OK;
}

const char *const *tfx_csv_rows_header(const tfx_csv_rows *r, size_t *ncols) {
  *ncols = r->c.ncols;
  return (const char *const *)r->c.names;
}

int tfx_csv_rows_next(tfx_csv_rows *r, char ***cells, size_t *lineno, tfx_err *err) {
  csv *c = &r->c;
  int eof = 0, rc = next_line(c, &eof, err);
  *cells = NULL;
  if (rc || eof) {
    return rc;
  }
  if ((rc = split(c, c->line, err))) {
    return rc;
  }
  if (c->ncells != c->ncols) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: line %zu: %zu cells, the header has %zu", c->path, c->lineno, c->ncells,
                       c->ncols);
  }
  for (size_t i = 0; i < c->ncells; i++) {
    c->cells[i] = trim(c->cells[i]);
  }
  *cells = c->cells;
  *lineno = c->lineno;
  return TFX_OK;
}

void tfx_csv_rows_close(tfx_csv_rows *r) {
  if (r) {
    free((char *)r->c.path);
    release(&r->c);
    free(r);
  }
}
