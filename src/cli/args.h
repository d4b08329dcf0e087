/* The command line of tfx-node: command, flags, --set overrides, TF_CONFIG (env or --tf-config FILE).
 * Later sources override earlier ones: defaults, the experiment file, TF_CONFIG, flags. */
#ifndef TFX_ARGS_H
#define TFX_ARGS_H

#include "cli/cli.h"
#include "config/node.h"

typedef struct tfx_args {
  const char *command; /* NULL: run the role of TF_CONFIG / --role */
  tfx_node node;
  tfx_cli_opts cli;
  char self_exe[1024];
  int done; /* --help or --version was answered */
} tfx_args;

/* Parses argv into a (which owns node.cluster; release with tfx_args_fini). Errors exit 2 by convention. */
int tfx_args_parse(tfx_args *a, int argc, char **argv, tfx_err *err);
/* Releases what tfx_args_parse allocated. */
void tfx_args_fini(tfx_args *a);

#endif
