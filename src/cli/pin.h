/* tfx-node local's CPU placement (cluster.local_pin_cpus): each ps and worker on one CPU of those local may use. */
#ifndef TFX_CLI_PIN_H
#define TFX_CLI_PIN_H

#include <sched.h>

#include "config/cluster.h"
#include "config/config.h"

/* Whether local pins its ps and workers: cluster.local_pin_cpus 1, or -1 (auto) when they outnumber the n_cpus it
 * may use and each runs one thread (training.threads and training.ps_apply_threads 1); 0 never. */
int tfx_local_pins(const tfx_config *cfg, int n_ps, int n_workers, int n_cpus);
/* The CPU (an index into the system's CPUs, one of `allowed`) that the given process is pinned to, or -1 (the
 * master, or no CPU allowed): ps i on the i-th allowed CPU, worker j on the (n_ps + j)-th, each modulo the count, so
 * ps i and worker i share a CPU when there are as many ps as CPUs. */
int tfx_local_cpu_of(const cpu_set_t *allowed, int n_ps, tfx_role role, int index);
/* The CPU local pins its ps or worker `index` to (tfx_local_pins, tfx_local_cpu_of on local's own affinity), or -1. */
int tfx_local_placement(const tfx_config *cfg, int n_ps, int n_workers, tfx_role role, int index);
/* Pins the calling process (its threads to come inherit it) to CPU cpu; -1 leaves it alone. 0, or -1 on failure. */
int tfx_local_pin_self(int cpu);

#endif
