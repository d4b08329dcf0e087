/* Unit tests of src/net/keys.c: CURVE key files written and read back in real temporary files, modes, the
 * refusal of loose secret keys, malformed files, czmq's zcert layout, and authorized-key files and folders. */
#include <string.h>
#include <sys/stat.h>
#include <zmq.h>

#include "net/keys.h"
#include "tmpdir.h"

static void setup(void) {
  tmpdir_create("keys");
}

TestSuite(keys, .init = setup, .fini = tmpdir_remove, .timeout = 30);

static void path_of(char *buf, size_t n, const char *name) {
  snprintf(buf, n, "%s/%s", tmp, name);
}

static void write_mode(const char *name, const char *text, mode_t mode) {
  char p[256];
  path_of(p, sizeof p, name);
  spit(p, text, strlen(text));
  cr_assert_eq(chmod(p, mode), 0);
}

static mode_t mode_of(const char *name) {
  char p[256];
  struct stat st;
  path_of(p, sizeof p, name);
  cr_assert_eq(stat(p, &st), 0, "%s", p);
  return st.st_mode & 07777;
}

Test(keys, generate_writes_a_private_key_file_and_a_public_one_that_read_back) {
  tfx_keypair made, key, pub;
  tfx_err err = {0};
  char p[256];
  cr_assert_eq(tfx_keys_generate(tmp, "node-1", &made, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(mode_of("node-1.key"), 0600);
  cr_assert_eq(mode_of("node-1.pub"), 0644);
  cr_assert_eq(strlen(made.public_key), 40);
  cr_assert_eq(strlen(made.secret_key), 40);
  path_of(p, sizeof p, "node-1.key");
  cr_assert_eq(tfx_keys_read(p, &key, &err), TFX_OK, "%s", err.msg);
  cr_assert_str_eq(key.public_key, made.public_key);
  cr_assert_str_eq(key.secret_key, made.secret_key);
  path_of(p, sizeof p, "node-1.pub");
  cr_assert_eq(tfx_keys_read(p, &pub, &err), TFX_OK, "%s", err.msg);
  cr_assert_str_eq(pub.public_key, made.public_key);
  cr_assert_str_eq(pub.secret_key, "", "a .pub file must not carry the secret key");
  size_t len;
  char *text = (char *)slurp(p, &len);
  text[len] = '\0';
  cr_assert_null(strstr(text, made.secret_key));
  free(text);
}

Test(keys, two_generated_pairs_differ) {
  tfx_keypair a, b;
  tfx_err err = {0};
  cr_assert_eq(tfx_keys_generate(tmp, "a", &a, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_keys_generate(tmp, "b", &b, &err), TFX_OK, "%s", err.msg);
  cr_assert_str_neq(a.public_key, b.public_key);
  cr_assert_str_neq(a.secret_key, b.secret_key);
}

Test(keys, generate_never_overwrites_and_checks_the_name) {
  tfx_keypair first, again;
  tfx_err err = {0};
  cr_assert_eq(tfx_keys_generate(tmp, "k", &first, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_keys_generate(tmp, "k", &again, &err), TFX_EINVAL);
  cr_assert(strstr(err.msg, "k.pub exists"), "%s", err.msg);
  char p[256];
  path_of(p, sizeof p, "k.key");
  cr_assert_eq(tfx_keys_read(p, &again, &err), TFX_OK, "%s", err.msg);
  cr_assert_str_eq(again.secret_key, first.secret_key, "the first key was replaced");
  cr_assert_eq(tfx_keys_generate(tmp, "../escape", &again, &err), TFX_EINVAL);
  cr_assert(strstr(err.msg, "key name '../escape'"), "%s", err.msg);
  cr_assert_eq(tfx_keys_generate(tmp, "", &again, &err), TFX_EINVAL);
}

Test(keys, a_secret_key_that_group_or_others_may_read_is_refused_naming_file_and_mode) {
  tfx_keypair k;
  tfx_err err = {0};
  char p[256];
  cr_assert_eq(tfx_keys_generate(tmp, "loose", NULL, &err), TFX_OK, "%s", err.msg);
  path_of(p, sizeof p, "loose.key");
  const mode_t bad[] = {0640, 0604, 0644, 0660, 0700 | 0020};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cr_assert_eq(chmod(p, bad[i]), 0);
    cr_assert_eq(tfx_keys_read(p, &k, &err), TFX_ECONFIG, "mode %o accepted", (unsigned)bad[i]);
    char want[16];
    snprintf(want, sizeof want, "mode %04o", (unsigned)bad[i]);
    cr_assert(strstr(err.msg, p) && strstr(err.msg, want) && strstr(err.msg, "chmod 600"), "%s", err.msg);
  }
  cr_assert_eq(chmod(p, 0400), 0);
  cr_assert_eq(tfx_keys_read(p, &k, &err), TFX_OK, "0400 is stricter than 0600: %s", err.msg);
  /* A public key may be world-readable. */
  path_of(p, sizeof p, "loose.pub");
  cr_assert_eq(chmod(p, 0666), 0);
  cr_assert_eq(tfx_keys_read(p, &k, &err), TFX_OK, "%s", err.msg);
}

Test(keys, a_czmq_zcert_secret_certificate_is_read) {
  char pub[41], sec[41], text[512], p[256];
  cr_assert_eq(zmq_curve_keypair(pub, sec), 0);
  snprintf(text, sizeof text,
           "#   ****  Generated on 2026-01-01 by CZMQ  ****\n"
           "#   ZeroMQ CURVE **Secret** Certificate\n\n"
           "metadata\n    name = \"czmq\"\ncurve\n    public-key = \"%s\"\n    secret-key = \"%s\"\n",
           pub, sec);
  write_mode("czmq_secret", text, 0600);
  path_of(p, sizeof p, "czmq_secret");
  tfx_keypair k;
  tfx_err err = {0};
  cr_assert_eq(tfx_keys_read(p, &k, &err), TFX_OK, "%s", err.msg);
  cr_assert_str_eq(k.public_key, pub);
  cr_assert_str_eq(k.secret_key, sec);
}

Test(keys, a_secret_alone_yields_its_public_key_and_a_mismatched_pair_is_refused) {
  char pub[41], sec[41], pub2[41], sec2[41], text[256], p[256];
  cr_assert_eq(zmq_curve_keypair(pub, sec), 0);
  cr_assert_eq(zmq_curve_keypair(pub2, sec2), 0);
  snprintf(text, sizeof text, "secret-key = \"%s\"\n", sec);
  write_mode("secret_only", text, 0600);
  path_of(p, sizeof p, "secret_only");
  tfx_keypair k;
  tfx_err err = {0};
  cr_assert_eq(tfx_keys_read(p, &k, &err), TFX_OK, "%s", err.msg);
  cr_assert_str_eq(k.public_key, pub);
  snprintf(text, sizeof text, "public-key = \"%s\"\nsecret-key = \"%s\"\n", pub2, sec);
  write_mode("mismatch", text, 0600);
  path_of(p, sizeof p, "mismatch");
  cr_assert_eq(tfx_keys_read(p, &k, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "does not belong"), "%s", err.msg);
}

Test(keys, malformed_and_missing_files_are_errors_naming_the_file) {
  tfx_keypair k;
  tfx_err err = {0};
  char p[256];
  write_mode("short", "# comment\n\npublic-key = \"tooshort\"\n", 0644);
  path_of(p, sizeof p, "short");
  cr_assert_eq(tfx_keys_read(p, &k, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, p) && strstr(err.msg, "line 3"), "%s", err.msg);
  /* 40 characters, but '~' is not in the Z85 alphabet. */
  write_mode("badz85", "public-key = ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~\n", 0644);
  path_of(p, sizeof p, "badz85");
  cr_assert_eq(tfx_keys_read(p, &k, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "Z85"), "%s", err.msg);
  write_mode("empty", "# nothing here\n", 0644);
  path_of(p, sizeof p, "empty");
  cr_assert_eq(tfx_keys_read(p, &k, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "no key"), "%s", err.msg);
  path_of(p, sizeof p, "absent.key");
  cr_assert_eq(tfx_keys_read(p, &k, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "absent.key"), "%s", err.msg);
  cr_assert_eq(tfx_keys_read(tmp, &k, &err), TFX_ECONFIG, "a directory is not a key file");
}

Test(keys, authorized_keys_from_a_directory_of_pub_files) {
  tfx_keypair a, b, other;
  tfx_err err = {0};
  char dir[256];
  path_of(dir, sizeof dir, "authorized");
  cr_assert_eq(tfx_keys_generate(dir, "a", &a, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_keys_generate(dir, "b", &b, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(tfx_keys_generate(tmp, "other", &other, &err), TFX_OK, "%s", err.msg);
  tfx_keylist l = {NULL, 0};
  cr_assert_eq(tfx_keys_read_authorized(dir, &l, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(l.n, 2, "only the *.pub files count, not the .key files: %d", l.n);
  unsigned char raw[32];
  zmq_z85_decode(raw, a.public_key);
  cr_assert(tfx_keylist_has(&l, raw));
  zmq_z85_decode(raw, b.public_key);
  cr_assert(tfx_keylist_has(&l, raw));
  zmq_z85_decode(raw, other.public_key);
  cr_assert_not(tfx_keylist_has(&l, raw));
  tfx_keylist_fini(&l);
  cr_assert_null(l.keys);
}

Test(keys, authorized_keys_from_one_file_of_bare_keys) {
  char k1[41], s1[41], k2[41], s2[41], text[256], p[256];
  cr_assert_eq(zmq_curve_keypair(k1, s1), 0);
  cr_assert_eq(zmq_curve_keypair(k2, s2), 0);
  snprintf(text, sizeof text, "# the cluster's nodes\n%s\npublic-key = \"%s\"\n", k1, k2);
  write_mode("authorized.txt", text, 0644);
  path_of(p, sizeof p, "authorized.txt");
  tfx_keylist l = {NULL, 0};
  tfx_err err = {0};
  cr_assert_eq(tfx_keys_read_authorized(p, &l, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(l.n, 2);
  tfx_keylist_fini(&l);
}

Test(keys, authorized_keys_must_name_at_least_one_key) {
  char dir[256];
  tfx_keylist l = {NULL, 0};
  tfx_err err = {0};
  path_of(dir, sizeof dir, "none");
  cr_assert_eq(mkdir(dir, 0755), 0);
  cr_assert_eq(tfx_keys_read_authorized(dir, &l, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "no public key found") && strstr(err.msg, dir), "%s", err.msg);
  path_of(dir, sizeof dir, "missing");
  cr_assert_eq(tfx_keys_read_authorized(dir, &l, &err), TFX_ECONFIG);
  cr_assert(strstr(err.msg, "missing"), "%s", err.msg);
  cr_assert_null(l.keys);
}
