#include "master.h"
int tfx_master_run(tfx_node *n, tfx_err *err) { (void)n; return tfx_err_set(err, TFX_ESTATE, "todo"); }
int tfx_master_print_plan(const tfx_config *cfg, int n_ps, FILE *f, tfx_err *err) { (void)cfg; (void)n_ps; (void)f; return tfx_err_set(err, TFX_ESTATE, "todo"); }
