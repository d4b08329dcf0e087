/* The process id cached for libzmq's fork checks (src/net/pid.c defines getpid()). */
#ifndef TFX_NET_PID_H
#define TFX_NET_PID_H

/* Whether getpid() has cached this process's pid yet (1 after the first call); links pid.c into the binary. */
int tfx_pid_cached(void);

#endif
