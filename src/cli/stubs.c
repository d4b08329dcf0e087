#include "cli.h"
int tfx_export_run(const tfx_node *n, const tfx_cli_opts *o, tfx_err *err) { (void)n; (void)o; return tfx_err_set(err, TFX_ESTATE, "todo"); }
int tfx_inspect_run(const tfx_cli_opts *o, tfx_err *err) { (void)o; return tfx_err_set(err, TFX_ESTATE, "todo"); }
int tfx_predict_run(const tfx_node *n, const tfx_cli_opts *o, tfx_err *err) { (void)n; (void)o; return tfx_err_set(err, TFX_ESTATE, "todo"); }
