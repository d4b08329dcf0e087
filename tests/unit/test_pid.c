/* src/net/pid.c: getpid() answers from a cache that is the kernel's pid, in the parent and in a forked child. */
#include <criterion/criterion.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net/pid.h"

Test(pid, cache_holds_the_kernels_pid) {
  pid_t kernel = (pid_t)syscall(SYS_getpid);
  cr_assert_eq(getpid(), kernel);
  cr_assert(tfx_pid_cached(), "the first call fills the cache");
  cr_assert_eq(getpid(), kernel);
}

Test(pid, forked_child_reads_its_own_pid) {
  pid_t parent = getpid(); /* cached in the parent before the fork */
  int fds[2];
  cr_assert_eq(pipe(fds), 0);
  pid_t child = fork();
  cr_assert_geq(child, 0);
  if (child == 0) {
    pid_t seen[2] = {getpid(), (pid_t)syscall(SYS_getpid)};
    _exit(write(fds[1], seen, sizeof seen) == sizeof seen ? 0 : 1);
  }
  pid_t seen[2] = {0, 0};
  cr_assert_eq(read(fds[0], seen, sizeof seen), (ssize_t)sizeof seen);
  int status = 0;
  cr_assert_eq(waitpid(child, &status, 0), child);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  cr_assert_eq(seen[0], seen[1], "the child's getpid() %d is the kernel's %d", (int)seen[0], (int)seen[1]);
  cr_assert_eq(seen[0], child);
  cr_assert_neq(seen[0], parent);
  cr_assert_eq(getpid(), parent, "the parent's cache is unchanged");
  close(fds[0]);
  close(fds[1]);
}
