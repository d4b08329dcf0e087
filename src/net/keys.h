/* CURVE key files: generate, read and check them. A key is 32 bytes, written as 40 Z85 characters. A file is
 * text in czmq's zcert layout (lines 'public-key = "..."' and 'secret-key = "..."', '#' comments), so
 * certificates made by czmq's zmakecert work as well; a bare 40-character line is a public key. NAME.key holds
 * both keys and has mode 0600; NAME.pub holds the public key only.
 * A file holding a secret key that group or others may access is refused (TFX_ECONFIG, naming the file and its
 * mode), as ssh refuses a loose private key. Errors: TFX_ECONFIG (missing, malformed or loose file), TFX_EINVAL
 * (bad name, a key file that exists), TFX_ESYS. No global state; thread-safe. */
#ifndef TFX_KEYS_H
#define TFX_KEYS_H

#include "common/err.h"

#define TFX_KEY_Z85_LEN 40

typedef struct tfx_keypair {
  char public_key[TFX_KEY_Z85_LEN + 1];
  char secret_key[TFX_KEY_Z85_LEN + 1]; /* "" when the file held only the public key */
} tfx_keypair;

/* A list of public keys (decoded, 32 bytes each); caller owns keys; free with tfx_keylist_fini. */
typedef struct tfx_keylist {
  unsigned char (*keys)[32];
  int n;
} tfx_keylist;

/* Writes DIR/NAME.key (mode 0600) and DIR/NAME.pub (0644) with a fresh key pair (DIR is created); never
 * overwrites an existing file. Fills *out when not NULL. */
int tfx_keys_generate(const char *dir, const char *name, tfx_keypair *out, tfx_err *err);
/* Reads one key file into *out; checks the mode when it holds a secret key, and that the two keys match. */
int tfx_keys_read(const char *path, tfx_keypair *out, tfx_err *err);
/* Reads the public keys of a file (one or more keys) or of a directory (every *.pub file in it) into *out;
 * at least one key is required. Caller owns *out; free with tfx_keylist_fini. */
int tfx_keys_read_authorized(const char *path, tfx_keylist *out, tfx_err *err);
/* Nonzero if the 32-byte key is in the list. */
int tfx_keylist_has(const tfx_keylist *l, const unsigned char key[32]);
/* Frees the keys of l and empties it. */
void tfx_keylist_fini(tfx_keylist *l);

#endif
