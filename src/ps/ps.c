#include "ps.h"
int tfx_ps_run(tfx_node *n, tfx_err *err) { (void)n; return tfx_err_set(err, TFX_ESTATE, "todo"); }
