/* tfx-node local's CPU placement. On a machine with fewer CPUs than the cluster's processes the scheduler moves
 * them between CPUs as they wake (a worker waits on a reply ~75% of a sparse step), and every move costs a cold
 * cache and a cross-CPU wake-up. Pinned, each CPU keeps the same ps and worker: on the 2-CPU machine the sparse LR
 * trained 1.04-1.17x and the MLP 1.12-1.19x the examples/s (bench/sparse_cluster --vary pin; bench/README.md, "CPU
 * placement"). Pinned only where local knows the layout
 * is its own: the processes it spawns, on the CPUs it was given (its affinity: a container's cpuset, taskset). */
#include "cli/pin.h"

int tfx_local_pins(const tfx_config *cfg, int n_ps, int n_workers, int n_cpus) {
  if (cfg->local_pin_cpus >= 0) {
    return cfg->local_pin_cpus;
  }
  return n_ps + n_workers > n_cpus && cfg->threads == 1 && cfg->ps_apply_threads == 1;
}

/* The index of the k-th CPU set in allowed, or -1. */
static int nth_cpu(const cpu_set_t *allowed, int k) {
  for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
    if (CPU_ISSET(cpu, allowed) && k-- == 0) {
      return cpu;
    }
  }
  return -1;
}

int tfx_local_cpu_of(const cpu_set_t *allowed, int n_ps, tfx_role role, int index) {
  int n = CPU_COUNT(allowed);
  if (n <= 0 || (role != TFX_ROLE_PS && role != TFX_ROLE_WORKER) || index < 0) {
    return -1;
  }
  int slot = role == TFX_ROLE_PS ? index : n_ps + index;
  return nth_cpu(allowed, slot % n);
}

int tfx_local_pin_self(int cpu) {
  if (cpu < 0) {
    return 0;
  }
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return sched_setaffinity(0, sizeof one, &one);
}

int tfx_local_placement(const tfx_config *cfg, int n_ps, int n_workers, tfx_role role, int index) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) || !tfx_local_pins(cfg, n_ps, n_workers, CPU_COUNT(&allowed))) {
    return -1;
  }
  return tfx_local_cpu_of(&allowed, n_ps, role, index);
}
