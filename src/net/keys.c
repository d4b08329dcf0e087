/* CURVE key files (libzmq's zmq_curve_keypair, zmq_curve_public and Z85 codec). */
#include "net/keys.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "common/fs.h"

#define MAX_KEY_FILE (1 << 20)

/* The parsed content of one key file: its public keys (in order) and its secret key, if any. */
typedef struct parsed {
  tfx_keylist pubs;
  char first_public[TFX_KEY_Z85_LEN + 1];
  char secret[TFX_KEY_Z85_LEN + 1];
} parsed;

/* The whole file and its mode (from the open descriptor, so the checked file is the read one). */
static char *read_key_file(const char *path, mode_t *mode, tfx_err *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0) {
    tfx_err_sys(err, TFX_ECONFIG, "key file %s", path);
    return NULL;
  }
  if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > MAX_KEY_FILE) {
    close(fd);
    tfx_err_set(err, TFX_ECONFIG, "key file %s: not a regular file of at most 1 MiB", path);
    return NULL;
  }
  char *text = malloc((size_t)st.st_size + 1);
  ssize_t got = text ? read(fd, text, (size_t)st.st_size) : -1;
  close(fd);
  if (got != st.st_size) {
    free(text);
    tfx_err_sys(err, TFX_ECONFIG, "read key file %s", path);
    return NULL;
  }
  text[got] = '\0';
  *mode = st.st_mode & 07777;
  return text;
}

static int add_key(tfx_keylist *l, const unsigned char key[32]) {
  if ((l->n & (l->n - 1)) == 0) { /* grow at 0, 1, 2, 4, 8, ... */
    void *grown = realloc(l->keys, (size_t)(l->n ? 2 * l->n : 1) * sizeof *l->keys);
    if (!grown) {
      return TFX_ENOMEM;
    }
    l->keys = grown;
  }
  memcpy(l->keys[l->n++], key, 32);
  return TFX_OK;
}

/* Splits 'name = "value"' (quotes optional) or a bare value; name is "" for a bare line. */
static void split_line(char *line, const char **name, char **value) {
  char *eq = strchr(line, '=');
  *name = "";
  *value = line;
  if (eq) {
    char *end = eq;
    while (end > line && (end[-1] == ' ' || end[-1] == '\t')) {
      end--;
    }
    *end = '\0';
    *name = line;
    *value = eq + 1 + strspn(eq + 1, " \t");
  }
  size_t n = strlen(*value);
  while (n && strchr(" \t\r", (*value)[n - 1])) {
    (*value)[--n] = '\0';
  }
  if (n >= 2 && (*value)[0] == '"' && (*value)[n - 1] == '"') {
    (*value)[n - 1] = '\0';
    (*value)++;
  }
}

/* A bare line that is exactly one Z85 key (Z85 has '=' and '#' in its alphabet, so this is checked first). */
static int bare_key(const char *line, unsigned char raw[32]) {
  size_t n = strlen(line);
  while (n && strchr(" \t\r", line[n - 1])) {
    n--;
  }
  char key[TFX_KEY_Z85_LEN + 1];
  if (n != TFX_KEY_Z85_LEN) {
    return 0;
  }
  memcpy(key, line, n);
  key[n] = '\0';
  return zmq_z85_decode(raw, key) != NULL;
}

static int add_public(parsed *p, const char *z85, const unsigned char raw[32], tfx_err *err) {
  if (!p->pubs.n) {
    memcpy(p->first_public, z85, TFX_KEY_Z85_LEN);
    p->first_public[TFX_KEY_Z85_LEN] = '\0';
  }
  return add_key(&p->pubs, raw) ? tfx_err_set(err, TFX_ENOMEM, "out of memory") : TFX_OK;
}

/* One line of a key file; lines that name no key (zcert metadata, section names, comments) are skipped. */
static int parse_line(char *line, int lineno, const char *path, parsed *p, tfx_err *err) {
  unsigned char raw[32];
  line += strspn(line, " \t");
  if (bare_key(line, raw)) {
    return add_public(p, line, raw, err);
  }
  if (!*line || *line == '#' || *line == '\r') {
    return TFX_OK;
  }
  const char *name;
  char *value;
  split_line(line, &name, &value);
  int is_secret = !strcmp(name, "secret-key"), is_public = !strcmp(name, "public-key");
  if (!is_secret && !is_public) {
    return TFX_OK;
  }
  if (strlen(value) != TFX_KEY_Z85_LEN || !zmq_z85_decode(raw, value)) {
    return tfx_err_set(err, TFX_ECONFIG, "key file %s line %d: not a %d-character Z85 key", path, lineno,
                       TFX_KEY_Z85_LEN);
  }
  if (is_secret) {
    strcpy(p->secret, value);
    return TFX_OK;
  }
  return add_public(p, value, raw, err);
}

/* Parses a key file; refuses a secret key that group or others may access. Caller frees p->pubs. */
static int parse_file(const char *path, parsed *p, tfx_err *err) {
  memset(p, 0, sizeof *p);
  mode_t mode = 0;
  char *text = read_key_file(path, &mode, err);
  if (!text) {
    return TFX_ECONFIG;
  }
  int rc = TFX_OK, lineno = 1;
  for (char *line = text; line && !rc; lineno++) {
    char *nl = strchr(line, '\n');
    if (nl) {
      *nl = '\0';
    }
    rc = parse_line(line, lineno, path, p, err);
    line = nl ? nl + 1 : NULL;
  }
  free(text);
  if (!rc && p->secret[0] && (mode & 077)) {
    rc = tfx_err_set(err, TFX_ECONFIG,
                     "key file %s holds a secret key but has mode %04o (group or others may access it); "
                     "refusing it: chmod 600 %s",
                     path, (unsigned)mode, path);
  }
  if (rc) {
    tfx_keylist_fini(&p->pubs);
  }
  return rc;
}

int tfx_keys_read(const char *path, tfx_keypair *out, tfx_err *err) {
  parsed p;
  int rc = parse_file(path, &p, err);
  if (rc) {
    return rc;
  }
  tfx_keypair k;
  memset(&k, 0, sizeof k);
  strcpy(k.secret_key, p.secret);
  strcpy(k.public_key, p.first_public);
  if (p.secret[0] && zmq_curve_public(k.public_key, p.secret)) {
    rc = tfx_err_set(err, TFX_ECONFIG, "key file %s: cannot derive the public key", path);
  } else if (p.secret[0] && p.pubs.n && strcmp(k.public_key, p.first_public)) {
    rc = tfx_err_set(err, TFX_ECONFIG, "key file %s: its public key does not belong to its secret key", path);
  } else if (!k.public_key[0]) {
    rc = tfx_err_set(err, TFX_ECONFIG, "key file %s: no key in it (want a line public-key = \"...\")", path);
  }
  tfx_keylist_fini(&p.pubs);
  if (!rc) {
    *out = k;
  }
  return rc;
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n > m && !strcmp(s + n - m, suffix);
}

/* Appends every public key of one file to all. */
static int merge_file(const char *path, tfx_keylist *all, tfx_err *err) {
  parsed p;
  int rc = parse_file(path, &p, err);
  for (int i = 0; !rc && i < p.pubs.n; i++) {
    if (add_key(all, p.pubs.keys[i])) {
      rc = tfx_err_set(err, TFX_ENOMEM, "out of memory");
    }
  }
  tfx_keylist_fini(&p.pubs);
  return rc;
}

static int merge_dir(const char *path, DIR *d, tfx_keylist *all, tfx_err *err) {
  struct dirent *e;
  int rc = TFX_OK;
  while (!rc && (e = readdir(d))) {
    char file[1024];
    if (e->d_name[0] == '.' || !ends_with(e->d_name, ".pub")) {
      continue;
    }
    snprintf(file, sizeof file, "%s/%s", path, e->d_name);
    rc = merge_file(file, all, err);
  }
  return rc;
}

int tfx_keys_read_authorized(const char *path, tfx_keylist *out, tfx_err *err) {
  tfx_keylist all = {NULL, 0};
  DIR *d = opendir(path);
  int rc = d ? merge_dir(path, d, &all, err) : errno == ENOTDIR ? merge_file(path, &all, err) : TFX_ESYS;
  if (d) {
    closedir(d);
  }
  if (rc == TFX_ESYS) {
    rc = tfx_err_sys(err, TFX_ECONFIG, "authorized keys %s", path);
  } else if (!rc && !all.n) {
    rc = tfx_err_set(err, TFX_ECONFIG, "authorized keys %s: no public key found (a directory is read for *.pub files)",
                     path);
  }
  if (rc) {
    tfx_keylist_fini(&all);
    return rc;
  }
  *out = all;
  return TFX_OK;
}

int tfx_keylist_has(const tfx_keylist *l, const unsigned char key[32]) {
  for (int i = 0; i < l->n; i++) {
    if (!memcmp(l->keys[i], key, 32)) {
      return 1;
    }
  }
  return 0;
}

void tfx_keylist_fini(tfx_keylist *l) {
  free(l->keys);
  l->keys = NULL;
  l->n = 0;
}

static int valid_name(const char *name) {
  if (!*name || strlen(name) > 64 || name[0] == '.') {
    return 0;
  }
  return strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == strlen(name);
}

/* Creates path with the given mode (never over an existing file) and writes text. */
static int write_new(const char *path, const char *text, mode_t mode, tfx_err *err) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0 && errno == EEXIST) {
    return tfx_err_set(err, TFX_EINVAL, "%s exists: keygen never overwrites a key (remove it or choose another --name)",
                       path);
  }
  if (fd < 0) {
    return tfx_err_sys(err, TFX_ESYS, "create %s", path);
  }
  size_t n = strlen(text);
  int ok = fchmod(fd, mode) == 0 && write(fd, text, n) == (ssize_t)n && fsync(fd) == 0;
  int rc = ok ? TFX_OK : tfx_err_sys(err, TFX_ESYS, "write %s", path);
  close(fd);
  return rc;
}

static void format_file(char *buf, size_t n, const char *name, const tfx_keypair *k, int with_secret) {
  snprintf(buf, n,
           "#   tfx CURVE %s key '%s' (czmq zcert layout)\n"
           "#   %s\n"
           "metadata\n"
           "    name = \"%s\"\n"
           "curve\n"
           "    public-key = \"%s\"\n"
           "%s%s%s",
           with_secret ? "secret" : "public", name,
           with_secret ? "DO NOT SHARE this file; keep it at mode 0600" : "share this file with the cluster", name,
           k->public_key, with_secret ? "    secret-key = \"" : "", with_secret ? k->secret_key : "",
           with_secret ? "\"\n" : "");
}

int tfx_keys_generate(const char *dir, const char *name, tfx_keypair *out, tfx_err *err) {
  if (!valid_name(name)) {
    return tfx_err_set(err, TFX_EINVAL, "key name '%s': want 1-64 of A-Z a-z 0-9 _ . - (not starting with '.')", name);
  }
  tfx_keypair k;
  if (zmq_curve_keypair(k.public_key, k.secret_key)) {
    return tfx_err_sys(err, TFX_ESYS, "zmq_curve_keypair (is libzmq built with CURVE?)");
  }
  char key_path[1200], pub_path[1200], text[512];
  snprintf(key_path, sizeof key_path, "%s/%s.key", dir, name);
  snprintf(pub_path, sizeof pub_path, "%s/%s.pub", dir, name);
  int rc = tfx_mkdirs(dir, err);
  if (!rc && access(pub_path, F_OK) == 0) {
    rc = tfx_err_set(err, TFX_EINVAL, "%s exists: keygen never overwrites a key (remove it or choose another --name)",
                     pub_path);
  }
  format_file(text, sizeof text, name, &k, 1);
  if (!rc && !(rc = write_new(key_path, text, 0600, err))) {
    format_file(text, sizeof text, name, &k, 0);
    rc = write_new(pub_path, text, 0644, err);
  }
  memset(text, 0, sizeof text);
  if (!rc && out) {
    *out = k;
  }
  memset(k.secret_key, 0, sizeof k.secret_key);
  return rc;
}
