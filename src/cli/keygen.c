/* The keygen command: a CURVE key pair written to --out DIR (secret key mode 0600). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "net/keys.h"

int tfx_keygen_run(const tfx_cli_opts *o, tfx_err *err) {
  if (!o->out_dir[0]) {
    return tfx_err_set(err, TFX_EINVAL, "keygen needs --out DIR");
  }
  const char *name = o->key_name[0] ? o->key_name : "cluster";
  tfx_keypair k;
  int rc = tfx_keys_generate(o->out_dir, name, &k, err);
  if (rc) {
    return rc;
  }
  printf("secret key: %s/%s.key (mode 0600: give it only to the nodes that use it)\n", o->out_dir, name);
  printf("public key: %s/%s.pub %s\n", o->out_dir, name, k.public_key);
  memset(&k, 0, sizeof k);
  return TFX_OK;
}
