/* The process id, asked of the kernel once per process instead of at every ZeroMQ mailbox operation.
 *
 * libzmq notices a fork by comparing getpid() with the pid it started with, at every wait and read of a socket's
 * mailbox; glibc has not cached the pid since 2.25, so each is a system call: about 37 a worker step of the sparse
 * cluster, 30% of all its system calls (strace -c). This definition in the executable takes the place of libc's for
 * libzmq and every other caller; the cache is dropped in the child of every fork() (pthread_atfork), so a forked
 * process reads its own pid. */
#include "net/pid.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

static pid_t cached_pid;

/* In the child of a fork: the pid is asked again. */
static void forget_pid(void) {
  __atomic_store_n(&cached_pid, 0, __ATOMIC_RELAXED);
}

/* This process's id: the kernel's answer, asked once and then kept. */
pid_t getpid(void) {
  pid_t pid = __atomic_load_n(&cached_pid, __ATOMIC_RELAXED);
  if (pid == 0) {
    pid = (pid_t)syscall(SYS_getpid);
    __atomic_store_n(&cached_pid, pid, __ATOMIC_RELAXED);
  }
  return pid;
}

/* Registered before main, so a fork at any point leaves its child no stale pid. */
__attribute__((constructor)) static void register_forget(void) {
  pthread_atfork(NULL, NULL, forget_pid);
}

int tfx_pid_cached(void) {
  return __atomic_load_n(&cached_pid, __ATOMIC_RELAXED) != 0;
}
