/* tfx-node local's CPU placement (src/cli/pin.c): which processes are pinned, and to which CPU. */
#include <criterion/criterion.h>
#include <sched.h>

#include "cli/pin.h"

static cpu_set_t cpus(int first, int n) {
  cpu_set_t s;
  CPU_ZERO(&s);
  for (int i = 0; i < n; i++) {
    CPU_SET(first + i, &s);
  }
  return s;
}

Test(local_pin, two_cpus_put_ps_i_and_worker_i_together) {
  cpu_set_t s = cpus(0, 2);
  cr_assert_eq(tfx_local_cpu_of(&s, 2, TFX_ROLE_PS, 0), 0);
  cr_assert_eq(tfx_local_cpu_of(&s, 2, TFX_ROLE_PS, 1), 1);
  cr_assert_eq(tfx_local_cpu_of(&s, 2, TFX_ROLE_WORKER, 0), 0);
  cr_assert_eq(tfx_local_cpu_of(&s, 2, TFX_ROLE_WORKER, 1), 1);
  cr_assert_eq(tfx_local_cpu_of(&s, 2, TFX_ROLE_WORKER, 2), 0);
  cr_assert_eq(tfx_local_cpu_of(&s, 2, TFX_ROLE_MASTER, 0), -1, "the master is never pinned");
}

Test(local_pin, only_the_allowed_cpus_are_used) {
  cpu_set_t s = cpus(2, 2); /* taskset -c 2,3 or a container's cpuset */
  cr_assert_eq(tfx_local_cpu_of(&s, 1, TFX_ROLE_PS, 0), 2);
  cr_assert_eq(tfx_local_cpu_of(&s, 1, TFX_ROLE_WORKER, 0), 3);
  cr_assert_eq(tfx_local_cpu_of(&s, 1, TFX_ROLE_WORKER, 1), 2);
  cpu_set_t none = cpus(0, 0);
  cr_assert_eq(tfx_local_cpu_of(&none, 1, TFX_ROLE_PS, 0), -1);
}

Test(local_pin, enough_cpus_give_each_its_own) {
  cpu_set_t s = cpus(0, 8);
  cr_assert_eq(tfx_local_cpu_of(&s, 2, TFX_ROLE_PS, 1), 1);
  cr_assert_eq(tfx_local_cpu_of(&s, 2, TFX_ROLE_WORKER, 0), 2);
  cr_assert_eq(tfx_local_cpu_of(&s, 2, TFX_ROLE_WORKER, 1), 3);
}

Test(local_pin, auto_pins_only_an_oversubscribed_single_threaded_cluster) {
  tfx_config c;
  tfx_config_init(&c);
  cr_assert_eq(c.local_pin_cpus, -1, "auto by default");
  cr_assert(tfx_local_pins(&c, 2, 2, 2), "4 processes on 2 CPUs");
  cr_assert_not(tfx_local_pins(&c, 2, 2, 4), "one CPU each already");
  c.threads = 2;
  cr_assert_not(tfx_local_pins(&c, 2, 2, 2), "a process with several threads is left to the scheduler");
  c.threads = 1;
  c.ps_apply_threads = 2;
  cr_assert_not(tfx_local_pins(&c, 2, 2, 2));
  c.local_pin_cpus = 1;
  cr_assert(tfx_local_pins(&c, 1, 1, 8), "1 always pins");
  c.local_pin_cpus = 0;
  cr_assert_not(tfx_local_pins(&c, 4, 4, 2), "0 never pins");
}
