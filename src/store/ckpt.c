/* Checkpoint shards (binary, checksummed) and manifests (JSON), written atomically. */
#include "store/ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/fs.h"
#include "common/log.h"
#include "nn/optim.h"
#include "store/provenance.h"
#include "store/best.h"
#include "store/store_impl.h"

/* Shards are written as the host holds them in memory, and the format is little-endian. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint shards are little-endian and written from memory: tfx builds on little-endian hosts only"
#endif

static const char shard_magic[8] = {'T', 'F', 'X', 'S', 'H', 'R', 'D', '1'};
static const char end_magic[8] = {'T', 'F', 'X', 'E', 'N', 'D', 0, 0};

typedef struct writer {
  FILE *f;
  uLong crc;
  int failed;
} writer;

static void put(writer *w, const void *p, size_t n) {
  /* n == 0: nothing to write, and crc32(crc, NULL, 0) would return 0, not crc. */
  if (w->failed || n == 0) {
    return;
  }
  if (fwrite(p, 1, n, w->f) != n) {
    w->failed = 1;
  }
  w->crc = crc32_z(w->crc, p, n);
}

static void put_entry(writer *w, const tfx_ckpt_entry *e) {
  uint16_t nl = (uint16_t)strlen(e->name);
  uint32_t rank = (uint32_t)e->rank;
  uint64_t nbytes = e->count * sizeof(float);
  uint32_t dcrc = (uint32_t)crc32_z(0, (const Bytef *)e->data, (z_size_t)nbytes);
  put(w, &nl, 2);
  put(w, e->name, nl);
  put(w, &rank, 4);
  put(w, e->dims, 8 * rank);
  put(w, &e->row_begin, 8);
  put(w, &e->row_end, 8);
  put(w, &e->version, 8);
  put(w, &nbytes, 8);
  put(w, &dcrc, 4);
  put(w, e->data, nbytes);
}

static int sync_dir(const char *path) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash) {
    *slash = '\0';
  } else {
    snprintf(dir, sizeof dir, ".");
  }
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  if (fd < 0) {
    return -1;
  }
  fsync(fd);
  close(fd);
  return 0;
}

/* Flushes, fsyncs and renames tmp over path. */
static int commit_file(FILE *f, const char *tmp, const char *path, tfx_err *err) {
  if (fflush(f) || fsync(fileno(f))) {
    int rc = tfx_err_sys(err, TFX_ESYS, "write %s", tmp);
    fclose(f);
    unlink(tmp);
    return rc;
  }
  fclose(f);
  if (rename(tmp, path)) {
    int rc = tfx_err_sys(err, TFX_ESYS, "rename %s", tmp);
    unlink(tmp);
    return rc;
  }
  sync_dir(path);
  return TFX_OK;
}

int tfx_ckpt_write(const char *path, int64_t step, const tfx_ckpt_entry *entries, int n, uint32_t *crc, uint64_t *bytes,
                   tfx_err *err) {
  char tmp[1100];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  writer w = {tfx_fopen_write(tmp, "wb"), crc32(0, NULL, 0), 0};
  if (!w.f) {
    return tfx_err_sys(err, TFX_ESYS, "open %s", tmp);
  }
  uint32_t version = 1, count = (uint32_t)n;
  put(&w, shard_magic, 8);
  put(&w, &version, 4);
  put(&w, &count, 4);
  put(&w, &step, 8);
  for (int i = 0; i < n; i++) {
    put_entry(&w, &entries[i]);
  }
  uint32_t total = (uint32_t)w.crc;
  put(&w, end_magic, 8);
  put(&w, &total, 4);
  if (w.failed) {
    int rc = tfx_err_sys(err, TFX_ESYS, "write %s", tmp);
    fclose(w.f);
    unlink(tmp);
    return rc;
  }
  long size = ftell(w.f);
  int rc = commit_file(w.f, tmp, path, err);
  if (rc) {
    return rc;
  }
  if (crc) {
    *crc = (uint32_t)w.crc;
  }
  if (bytes) {
    *bytes = (uint64_t)size;
  }
  return TFX_OK;
}

/* name length, rank, row_begin, row_end, version, nbytes, crc: the fixed part of an entry. */
#define ENTRY_MIN_BYTES (2 + 4 + 8 + 8 + 8 + 8 + 4)

typedef struct reader {
  const uint8_t *p;
  size_t len, off;
  const char *path;
} reader;

static int take(reader *r, void *out, size_t n, const char *what, tfx_err *err) {
  if (n > r->len - r->off) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: truncated at offset %zu reading %s", r->path, r->off, what);
  }
  memcpy(out, r->p + r->off, n);
  r->off += n;
  return TFX_OK;
}

static int read_entry(reader *r, tfx_ckpt_entry *e, tfx_err *err) {
  uint16_t nl = 0;
  uint32_t rank = 0, dcrc = 0;
  uint64_t nbytes = 0;
  int rc;
  if ((rc = take(r, &nl, 2, "name length", err))) {
    return rc;
  }
  if (nl >= sizeof e->name) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: name length %u at offset %zu", r->path, nl, r->off);
  }
  if ((rc = take(r, e->name, nl, "name", err))) {
    return rc;
  }
  e->name[nl] = '\0';
  if ((rc = take(r, &rank, 4, "rank", err))) {
    return rc;
  }
  if (rank > 8) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: '%s' rank %u at offset %zu", r->path, e->name, rank, r->off);
  }
  e->rank = (int)rank;
  if ((rc = take(r, e->dims, 8 * rank, "dims", err)) || (rc = take(r, &e->row_begin, 8, "rows", err)) ||
      (rc = take(r, &e->row_end, 8, "rows", err)) || (rc = take(r, &e->version, 8, "version", err)) ||
      (rc = take(r, &nbytes, 8, "nbytes", err)) || (rc = take(r, &dcrc, 4, "crc", err))) {
    return rc;
  }
  if (nbytes % 4 || nbytes > r->len - r->off) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: '%s' claims %llu bytes at offset %zu, file has %zu left", r->path,
                       e->name, (unsigned long long)nbytes, r->off, r->len - r->off);
  }
  if ((uint32_t)crc32_z(0, r->p + r->off, (z_size_t)nbytes) != dcrc) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: '%s' checksum mismatch at offset %zu", r->path, e->name, r->off);
  }
  e->count = nbytes / 4;
  e->data = malloc(nbytes ? nbytes : 4);
  if (!e->data) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  return take(r, e->data, nbytes, "data", err);
}

static int read_body(reader *r, tfx_ckpt *c, tfx_err *err) {
  char magic[8];
  uint32_t version = 0, count = 0;
  int rc;
  if ((rc = take(r, magic, 8, "magic", err))) {
    return rc;
  }
  if (memcmp(magic, shard_magic, 8)) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: not a tfx shard (bad magic)", r->path);
  }
  if ((rc = take(r, &version, 4, "version", err)) || (rc = take(r, &count, 4, "count", err)) ||
      (rc = take(r, &c->step, 8, "step", err))) {
    return rc;
  }
  if (version != 1) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: format version %u, want 1", r->path, version);
  }
  /* Each entry takes at least ENTRY_MIN_BYTES: a count the file cannot hold is refused before it sizes a calloc. */
  if (count > 1000000 || count > (r->len - r->off) / ENTRY_MIN_BYTES) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: %u entries at offset %zu, file has %zu bytes left", r->path, count,
                       r->off, r->len - r->off);
  }
  c->entries = calloc(count ? count : 1, sizeof *c->entries);
  if (!c->entries) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  for (uint32_t i = 0; i < count; i++) {
    c->n = (int)i + 1;
    if ((rc = read_entry(r, &c->entries[i], err))) {
      return rc;
    }
  }
  uint32_t want = (uint32_t)crc32_z(0, r->p, r->off), total = 0;
  if ((rc = take(r, magic, 8, "trailer", err)) || (rc = take(r, &total, 4, "trailer", err))) {
    return rc;
  }
  if (memcmp(magic, end_magic, 8) || total != want || r->off != r->len) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: bad trailer at offset %zu", r->path, r->off - 12);
  }
  return TFX_OK;
}

/* Opens path for reading into *f, refusing anything but a regular file: a directory or a pipe has no size to
 * read up to (fuzz_ckpt: a manifest naming "" gave the directory). *size gets its size. */
static int open_regular(const char *path, FILE **f, size_t *size, tfx_err *err) {
  if (!(*f = fopen(path, "rb"))) {
    return tfx_err_sys(err, errno == ENOENT ? TFX_ENOTFOUND : TFX_ESYS, "open %s", path);
  }
  struct stat st;
  if (fstat(fileno(*f), &st) || !S_ISREG(st.st_mode)) {
    fclose(*f);
    return tfx_err_set(err, TFX_ECORRUPT, "%s: not a regular file", path);
  }
  *size = (size_t)st.st_size;
  return TFX_OK;
}

static int slurp(const char *path, uint8_t **buf, size_t *len, tfx_err *err) {
  FILE *f;
  size_t size;
  int rc = open_regular(path, &f, &size, err);
  if (rc) {
    return rc;
  }
  *buf = malloc(size ? size : 1);
  if (!*buf || fread(*buf, 1, size, f) != size) {
    fclose(f);
    free(*buf);
    *buf = NULL;
    return tfx_err_sys(err, TFX_ESYS, "read %s", path);
  }
  fclose(f);
  *len = (size_t)size;
  return TFX_OK;
}

int tfx_ckpt_read(const char *path, tfx_ckpt **out, tfx_err *err) {
  uint8_t *buf = NULL;
  size_t len = 0;
  int rc = slurp(path, &buf, &len, err);
  if (rc) {
    return rc;
  }
  tfx_ckpt *c = calloc(1, sizeof *c);
  reader r = {buf, len, 0, path};
  rc = c ? read_body(&r, c, err) : tfx_err_set(err, TFX_ENOMEM, "out of memory");
  free(buf);
  if (rc) {
    tfx_ckpt_destroy(c);
    return rc;
  }
  *out = c;
  return TFX_OK;
}

void tfx_ckpt_destroy(tfx_ckpt *c) {
  if (!c) {
    return;
  }
  for (int i = 0; i < c->n; i++) {
    free(c->entries[i].data);
  }
  free(c->entries);
  free(c);
}

const tfx_ckpt_entry *tfx_ckpt_find(const tfx_ckpt *c, const char *name) {
  for (int i = 0; i < c->n; i++) {
    if (strcmp(c->entries[i].name, name) == 0) {
      return &c->entries[i];
    }
  }
  return NULL;
}

int tfx_file_crc32(const char *path, uint32_t *crc, uint64_t *bytes, tfx_err *err) {
  FILE *f;
  size_t size;
  int rc = open_regular(path, &f, &size, err);
  if (rc) {
    return rc;
  }
  /* Streamed a block at a time: checking a shard never holds a second copy of the model in memory. */
  static _Thread_local uint8_t block[1 << 16];
  uLong c = crc32(0, NULL, 0);
  uint64_t total = 0;
  size_t n;
  while ((n = fread(block, 1, sizeof block, f)) > 0) {
    c = crc32_z(c, block, n);
    total += n;
  }
  int failed = ferror(f);
  fclose(f);
  if (failed) {
    return tfx_err_sys(err, TFX_ESYS, "read %s", path);
  }
  *crc = (uint32_t)c;
  *bytes = total;
  return TFX_OK;
}

void tfx_ckpt_dir(const char *run_dir, int64_t step, char *out, size_t n) {
  snprintf(out, n, "%s/checkpoints/ckpt-%012lld", run_dir, (long long)step);
}

/* A manifest's file entry: {"file", "crc32", "bytes"}. */
static json_object *file_entry(const char *file, uint32_t crc, uint64_t bytes) {
  json_object *s = json_object_new_object();
  json_object_object_add(s, "file", json_object_new_string(file));
  json_object_object_add(s, "crc32", json_object_new_int64(crc));
  json_object_object_add(s, "bytes", json_object_new_int64((int64_t)bytes));
  return s;
}

int tfx_ckpt_write_manifest(const char *dir, int64_t step, int n_ps, const uint32_t *crc, const uint64_t *bytes,
                            tfx_err *err) {
  return tfx_ckpt_write_manifest_rows(dir, step, n_ps, crc, bytes, NULL, NULL, err);
}

int tfx_ckpt_slice_entries(tfx_ckpt_entry *e, const tfx_ckpt_slice *s) {
  for (int k = -1; k < s->n_slots; k++) {
    tfx_ckpt_entry *x = &e[k + 1];
    if (k < 0) {
      snprintf(x->name, sizeof x->name, "%s", s->key);
    } else {
      snprintf(x->name, sizeof x->name, "%s@%s", s->key, tfx_optim_slot_name(k));
    }
    x->rank = s->rank;
    memcpy(x->dims, s->dims, (size_t)s->rank * sizeof s->dims[0]);
    x->row_begin = s->row_begin;
    x->row_end = s->row_end;
    x->version = s->version;
    x->count = s->count;
    x->data = k < 0 ? s->value : s->slots[k];
  }
  return 1 + s->n_slots;
}


int tfx_ckpt_write_manifest_rows(const char *dir, int64_t step, int n_ps, const uint32_t *crc, const uint64_t *bytes,
                                 const uint32_t *rows_crc, const uint64_t *rows_bytes, tfx_err *err) {
  json_object *root = json_object_new_object(), *shards = json_object_new_array(), *rows = json_object_new_array();
  json_object_object_add(root, "step", json_object_new_int64(step));
  json_object_object_add(root, "tfx", tfx_run_provenance());
  for (int i = 0; i < n_ps; i++) {
    char file[32];
    tfx_ckpt_part_path(file, sizeof file, NULL, i, TFX_CKPT_SHARD);
    json_object_array_add(shards, file_entry(file, crc[i], bytes[i]));
    if (rows_bytes && rows_bytes[i]) {
      tfx_ckpt_part_path(file, sizeof file, NULL, i, TFX_CKPT_ROWS);
      json_object_array_add(rows, file_entry(file, rows_crc[i], rows_bytes[i]));
    }
  }
  json_object_object_add(root, "shards", shards);
  if (json_object_array_length(rows)) {
    json_object_object_add(root, "rows", rows);
  } else {
    json_object_put(rows);
  }
  char path[1100], tmp[1200];
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = tfx_fopen_write(tmp, "w");
  int rc = f ? TFX_OK : tfx_err_sys(err, TFX_ESYS, "open %s", tmp);
  if (f) {
    fputs(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY), f);
    rc = commit_file(f, tmp, path, err);
  }
  json_object_put(root);
  return rc;
}

/* One file entry of a manifest: its size and (full) its checksum. */
static int verify_shard(const char *dir, json_object *s, int full, tfx_err *err) {
  json_object *file, *crc, *bytes;
  if (!json_object_object_get_ex(s, "file", &file) || !json_object_object_get_ex(s, "crc32", &crc) ||
      !json_object_object_get_ex(s, "bytes", &bytes)) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s/manifest.json: shard entry lacks file/crc32/bytes", dir);
  }
  const char *name = json_object_get_string(file);
  if (!name[0] || strchr(name, '/')) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s/manifest.json: shard file '%.64s' is not a name in the directory", dir,
                       name);
  }
  char path[1100];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  uint32_t c = (uint32_t)json_object_get_int64(crc);
  uint64_t b;
  struct stat st;
  int rc = full ? tfx_file_crc32(path, &c, &b, err) : stat(path, &st) ? tfx_err_sys(err, TFX_ECORRUPT, "%s", path) : 0;
  b = full ? b : (uint64_t)st.st_size;
  if (rc) {
    return rc;
  }
  if (b != (uint64_t)json_object_get_int64(bytes) || c != (uint32_t)json_object_get_int64(crc)) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s: size or checksum differs from the manifest", path);
  }
  return TFX_OK;
}

/* The step a checkpoint directory's name gives (ckpt-000000006000: 6000), or -1 for another name. */
static int64_t dir_step(const char *name) {
  long long step = -1;
  int end = 0;
  if (sscanf(name, "ckpt-%lld%n", &step, &end) != 1 || name[end] || step < 0) {
    return -1;
  }
  return step;
}

/* A checkpoint directory (named ckpt-STEP) whose manifest claims another step is corrupt: a resume "at" that step
 * would start from the wrong place. Other directories (an export, a copied checkpoint) are not checked. */
static int check_dir_step(const char *dir, int64_t step, tfx_err *err) {
  const char *slash = strrchr(dir, '/');
  int64_t named = dir_step(slash ? slash + 1 : dir);
  if (named >= 0 && named != step) {
    return tfx_err_set(err, TFX_ECORRUPT, "%s/manifest.json: step %lld, but the directory is step %lld", dir,
                       (long long)step, (long long)named);
  }
  return TFX_OK;
}

int tfx_ckpt_verify(const char *dir, int64_t *step, int *n_ps, tfx_err *err) {
  return tfx_ckpt_check(dir, 1, step, n_ps, err);
}

static int check_files(const char *dir, int full, int64_t *step, int *n_ps, tfx_err *err);

/* A link of a chain of deltas: its own files checked as the checkpoint that needs it is (ctx: full or not). */
static int check_link(const char *dir, void *ctx, tfx_err *err) {
  int64_t step;
  int n_ps;
  return check_files(dir, *(const int *)ctx, &step, &n_ps, err);
}

int tfx_ckpt_check(const char *dir, int full, int64_t *step, int *n_ps, tfx_err *err) {
  int64_t s;
  int nps, rc = check_files(dir, full, &s, &nps, err);
  if (!rc) { /* checkpoint.incremental: every link it is a delta of */
    rc = store__ckpt_check_chain(dir, s, nps, check_link, &full, err);
  }
  if (!rc) {
    *step = s;
    *n_ps = nps;
  }
  return rc;
}

/* tfx_ckpt_check of dir's own files only (its manifest and the files it lists), not the links it is a delta of. */
static int check_files(const char *dir, int full, int64_t *step, int *n_ps, tfx_err *err) {
  char path[1100];
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  json_object *root = json_object_from_file(path), *st, *shards;
  int rc = TFX_OK;
  if (!root || !json_object_object_get_ex(root, "step", &st) || !json_object_object_get_ex(root, "shards", &shards) ||
      !json_object_is_type(shards, json_type_array)) {
    rc = tfx_err_set(err, root ? TFX_ECORRUPT : TFX_ENOTFOUND, "%s: missing or malformed manifest", path);
    json_object_put(root);
    return rc;
  }
  size_t n = json_object_array_length(shards);
  for (size_t i = 0; i < n && !rc; i++) {
    rc = verify_shard(dir, json_object_array_get_idx(shards, i), full, err);
  }
  json_object *rows; /* the row files of lazy tables (rowfile.h), when the run has any */
  if (!rc && json_object_object_get_ex(root, "rows", &rows) && json_object_is_type(rows, json_type_array)) {
    for (size_t i = 0; i < json_object_array_length(rows) && !rc; i++) {
      rc = verify_shard(dir, json_object_array_get_idx(rows, i), full, err);
    }
  }
  if (!rc) {
    rc = check_dir_step(dir, json_object_get_int64(st), err);
  }
  if (!rc) {
    *step = json_object_get_int64(st);
    *n_ps = (int)n;
  }
  json_object_put(root);
  return rc;
}

int store__ckpt_steps(const char *run_dir, int64_t **steps) {
  char path[1100];
  snprintf(path, sizeof path, "%s/checkpoints", run_dir);
  DIR *d = opendir(path);
  if (!d) {
    return 0;
  }
  int n = 0, cap = 0;
  *steps = NULL;
  struct dirent *de;
  while ((de = readdir(d))) {
    int64_t s = dir_step(de->d_name); /* exactly ckpt-STEP: a directory set aside (ckpt-STEP.unusable) is not one */
    if (s < 0) {
      continue;
    }
    if (n == cap) {
      *steps = realloc(*steps, sizeof **steps * (size_t)(cap = cap * 2 + 8));
    }
    (*steps)[n++] = s;
  }
  closedir(d);
  for (int i = 1; i < n; i++) {
    for (int j = i; j > 0 && (*steps)[j] > (*steps)[j - 1]; j--) {
      int64_t t = (*steps)[j];
      (*steps)[j] = (*steps)[j - 1];
      (*steps)[j - 1] = t;
    }
  }
  return n;
}

int tfx_ckpt_latest(const char *run_dir, int64_t *step, char *dir, size_t n, tfx_err *err) {
  int64_t *steps = NULL;
  int count = store__ckpt_steps(run_dir, &steps);
  for (int i = 0; i < count; i++) {
    char d[1100];
    int64_t s;
    int nps;
    tfx_ckpt_dir(run_dir, steps[i], d, sizeof d);
    if (tfx_ckpt_verify(d, &s, &nps, NULL) == TFX_OK) {
      *step = s;
      snprintf(dir, n, "%s", d);
      free(steps);
      return TFX_OK;
    }
  }
  free(steps);
  return tfx_err_set(err, TFX_ENOTFOUND, "%s: no complete checkpoint", run_dir);
}

/* Whether a checkpoint was completed once (has a manifest): a failed check then is corruption, not a cut write. */
int tfx_ckpt_has_manifest(const char *dir) {
  char path[1200];
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  return access(path, F_OK) == 0;
}

/* Renames an unusable checkpoint directory to DIR.unusable (or .unusable-N, the first free), so that no new
 * checkpoint is ever written into it and a user can still recover its files by hand. */
static void set_aside(const char *dir, const char *why) {
  char to[1200];
  snprintf(to, sizeof to, "%s.unusable", dir);
  for (int k = 2; access(to, F_OK) == 0 && k < 1000; k++) {
    snprintf(to, sizeof to, "%s.unusable-%d", dir, k);
  }
  if (rename(dir, to) != 0) {
    tfx_log(TFX_LOG_WARN, "CKPT-SKIP", "%s is not usable, skipped; setting it aside as %s failed (%s): %s", dir, to,
            strerror(errno), why);
    return;
  }
  tfx_log(TFX_LOG_WARN, "CKPT-SKIP", "%s is not usable, skipped and kept on disk as %s: %s", dir, to, why);
}

/* The checkpoint directories of steps[0..count) that have a manifest, newest first, up to the first usable one:
 * its step and dir on success; *bad (caller frees) lists the unusable ones before it, with their reasons. */
typedef struct bad_ckpt {
  char dir[1100];
  char why[256];
} bad_ckpt;

static int first_usable(const char *run_dir, const int64_t *steps, int count, int64_t *step, char *dir, size_t n,
                        bad_ckpt *bad, int *n_bad) {
  int rc = TFX_ENOTFOUND;
  *n_bad = 0;
  for (int i = 0; i < count && rc; i++) {
    char d[1100];
    int nps;
    tfx_err why;
    tfx_ckpt_dir(run_dir, steps[i], d, sizeof d);
    if (!tfx_ckpt_has_manifest(d)) {
      continue; /* a checkpoint whose write never finished: not one */
    }
    if (tfx_ckpt_verify(d, step, &nps, &why) == TFX_OK) {
      snprintf(dir, n, "%s", d);
      rc = TFX_OK;
    } else {
      snprintf(bad[*n_bad].dir, sizeof bad[*n_bad].dir, "%s", d);
      snprintf(bad[(*n_bad)++].why, sizeof bad->why, "%s", why.msg);
    }
  }
  return rc;
}

/* The newest usable checkpoint as first_usable finds it, the unusable ones before it in *bad (caller frees) and
 * the error a resume gives when there is none: TFX_ENOTFOUND (no checkpoint) or TFX_ECORRUPT (none usable). */
static int scan(const char *run_dir, int64_t *step, char *dir, size_t n, bad_ckpt **bad, int *n_bad, tfx_err *err) {
  int64_t *steps = NULL;
  int count = store__ckpt_steps(run_dir, &steps);
  *n_bad = 0;
  if (!(*bad = calloc((size_t)count + 1, sizeof **bad))) {
    free(steps);
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  int rc = first_usable(run_dir, steps, count, step, dir, n, *bad, n_bad);
  free(steps);
  if (rc && *n_bad) {
    return tfx_err_set(err, TFX_ECORRUPT,
                       "%s: %d checkpoint(s), none usable (newest: %s); not starting over on top of them: repair or "
                       "move them, or start a new run with --fresh",
                       run_dir, *n_bad, (*bad)[0].why);
  }
  return rc ? tfx_err_set(err, TFX_ENOTFOUND, "%s: no checkpoint", run_dir) : TFX_OK;
}

int tfx_ckpt_usable(const char *run_dir, int64_t *step, char *dir, size_t n, tfx_err *err) {
  bad_ckpt *bad = NULL;
  int n_bad, rc = scan(run_dir, step, dir, n, &bad, &n_bad, err);
  free(bad);
  return rc;
}

/* Names each unusable checkpoint in a CKPT-SKIP warning; with move (a resume going on past them) sets it aside. */
static void skip_bad(const bad_ckpt *bad, int n_bad, int move) {
  for (int i = 0; i < n_bad; i++) {
    if (move) {
      set_aside(bad[i].dir, bad[i].why);
    } else {
      tfx_log(TFX_LOG_WARN, "CKPT-SKIP", "%s is not usable (kept on disk): %s", bad[i].dir, bad[i].why);
    }
  }
}

int tfx_ckpt_resume_point(const char *run_dir, int64_t *step, char *dir, size_t n, tfx_err *err) {
  bad_ckpt *bad = NULL;
  int n_bad, rc = scan(run_dir, step, dir, n, &bad, &n_bad, err);
  skip_bad(bad, n_bad, rc == TFX_OK); /* resuming: the newer, unusable ones move aside; refusing: nothing changes */
  free(bad);
  return rc;
}

int tfx_ckpt_read_point(const char *run_dir, int64_t *step, char *dir, size_t n, tfx_err *err) {
  bad_ckpt *bad = NULL;
  int n_bad, rc = scan(run_dir, step, dir, n, &bad, &n_bad, err);
  skip_bad(bad, n_bad, 0);
  free(bad);
  return rc;
}
