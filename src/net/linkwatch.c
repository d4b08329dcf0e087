/* A helper thread reads each watched socket's monitor: sizes new Unix-socket connections, counts disconnections. */
#include "net/linkwatch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include "common/clock.h"
#include "net/monitor.h"

#define MAX_WATCHED 64
#define EVENTS (ZMQ_EVENT_CONNECTED | ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_MONITOR_STOPPED)
/* How long stop waits for the watched sockets' last events: libzmq blocks a closing socket's reaper on its monitor
 * until the event is read, so a reader must outlive the socket it reads. */
#define DRAIN_MS 10000

/* One watched socket: the PAIR reading its monitor, the buffer size asked, the disconnections seen. */
typedef struct slot {
  void *reader, *watched;
  int bytes;
  unsigned disconnects;
} slot;

/* The helper of the current context. `lock` guards `slots`, `n` and `serial`: the caller's thread adds a slot,
 * the helper thread updates and removes them. */
static struct {
  pthread_mutex_t lock;
  pthread_t thread;
  int running;
  void *ctx;
  slot slots[MAX_WATCHED];
  int n;
  unsigned serial;
  atomic_int stop;
} helper = {.lock = PTHREAD_MUTEX_INITIALIZER};

static atomic_uint sized;

unsigned tfx_linkwatch_sized(void) {
  return atomic_load(&sized);
}

unsigned tfx_linkwatch_disconnects(void *sock) {
  unsigned n = 0;
  pthread_mutex_lock(&helper.lock);
  for (int i = 0; i < helper.n; i++) {
    if (helper.slots[i].watched == sock) {
      n = helper.slots[i].disconnects;
    }
  }
  pthread_mutex_unlock(&helper.lock);
  return n;
}

/* Sizes one connection's buffers; a descriptor that is not a Unix socket (TCP, or closed and reused) is left
 * alone. */
static void size_fd(int fd, int bytes) {
  struct sockaddr_storage sa;
  socklen_t len = sizeof sa;
  if (getsockname(fd, (struct sockaddr *)&sa, &len) || sa.ss_family != AF_UNIX) {
    return;
  }
  if (!setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes) &&
      !setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes)) {
    atomic_fetch_add(&sized, 1);
  }
}

static void count_disconnect(void *reader) {
  pthread_mutex_lock(&helper.lock);
  for (int i = 0; i < helper.n; i++) {
    if (helper.slots[i].reader == reader) {
      helper.slots[i].disconnects++;
    }
  }
  pthread_mutex_unlock(&helper.lock);
}

/* Reads one monitor event and acts on it; returns 1 when the watched socket is gone (its monitor stopped). */
static int read_event(void *reader, int bytes) {
  uint16_t event;
  uint32_t value;
  int got = tfx_monitor_next(reader, &event, &value, NULL, 0);
  if (got == 1 && (event == ZMQ_EVENT_CONNECTED || event == ZMQ_EVENT_ACCEPTED)) {
    size_fd((int)value, bytes);
  } else if (got == 1 && event == ZMQ_EVENT_DISCONNECTED) {
    count_disconnect(reader);
  }
  return got < 0 || (got == 1 && event == ZMQ_EVENT_MONITOR_STOPPED);
}

/* Drops the slot of a socket that is gone (helper thread). */
static void remove_reader(void *reader) {
  pthread_mutex_lock(&helper.lock);
  for (int i = 0; i < helper.n; i++) {
    if (helper.slots[i].reader == reader) {
      helper.slots[i] = helper.slots[--helper.n];
      break;
    }
  }
  pthread_mutex_unlock(&helper.lock);
  tfx_monitor_close(reader);
}

/* One poll over the current readers; returns how many there were. */
static int poll_once(long timeout_ms) {
  zmq_pollitem_t items[MAX_WATCHED];
  int bytes[MAX_WATCHED];
  pthread_mutex_lock(&helper.lock);
  int n = helper.n;
  for (int i = 0; i < n; i++) {
    items[i] = (zmq_pollitem_t){helper.slots[i].reader, 0, ZMQ_POLLIN, 0};
    bytes[i] = helper.slots[i].bytes;
  }
  pthread_mutex_unlock(&helper.lock);
  if (zmq_poll(items, n, timeout_ms) > 0) {
    for (int i = 0; i < n; i++) {
      if ((items[i].revents & ZMQ_POLLIN) && read_event(items[i].socket, bytes[i])) {
        remove_reader(items[i].socket);
      }
    }
  }
  return n;
}

/* The helper thread: polls the readers until told to stop, then drains the last events before closing them. */
static void *helper_main(void *arg) {
  (void)arg;
  while (!atomic_load(&helper.stop)) {
    poll_once(50);
  }
  for (int64_t end = tfx_now_ms() + DRAIN_MS; tfx_now_ms() < end && poll_once(20) > 0;) {
  }
  pthread_mutex_lock(&helper.lock);
  for (int i = 0; i < helper.n; i++) {
    tfx_monitor_close(helper.slots[i].reader);
  }
  helper.n = 0;
  pthread_mutex_unlock(&helper.lock);
  return NULL;
}

static int helper_start(void *ctx) {
  if (helper.running && helper.ctx == ctx) {
    return 0;
  }
  tfx_linkwatch_stop();
  atomic_store(&helper.stop, 0);
  helper.ctx = ctx;
  if (pthread_create(&helper.thread, NULL, helper_main, NULL)) {
    helper.ctx = NULL;
    return -1;
  }
  helper.running = 1;
  return 0;
}

/* Connects a reader to a new monitor endpoint of `sock` and hands it to the helper thread. */
static int add_reader(void *ctx, void *sock, int bytes) {
  char ep[64];
  pthread_mutex_lock(&helper.lock);
  int full = helper.n == MAX_WATCHED;
  snprintf(ep, sizeof ep, "inproc://tfx-linkwatch-%u", helper.serial++);
  pthread_mutex_unlock(&helper.lock);
  if (full || zmq_socket_monitor(sock, ep, EVENTS)) {
    return -1;
  }
  void *reader = zmq_socket(ctx, ZMQ_PAIR);
  if (!reader || zmq_connect(reader, ep)) {
    if (reader) {
      tfx_monitor_close(reader);
    }
    zmq_socket_monitor(sock, NULL, 0);
    return -1;
  }
  pthread_mutex_lock(&helper.lock);
  for (int i = 0; i < helper.n; i++) {
    if (helper.slots[i].watched == sock) {
      helper.slots[i].watched = NULL; /* a closed socket whose address the new one reuses, its last events due */
    }
  }
  full = helper.n == MAX_WATCHED;
  if (!full) {
    helper.slots[helper.n++] = (slot){reader, sock, bytes, 0};
  }
  pthread_mutex_unlock(&helper.lock);
  if (full) {
    zmq_socket_monitor(sock, NULL, 0);
    tfx_monitor_close(reader);
    return -1;
  }
  return 0;
}

int tfx_linkwatch_add(void *ctx, void *sock, const char *endpoint, int bytes) {
  if (strncmp(endpoint, "ipc://", 6) != 0 && strncmp(endpoint, "tcp://", 6) != 0) {
    return 0;
  }
  if (helper_start(ctx)) {
    return -1;
  }
  return add_reader(ctx, sock, bytes);
}

void tfx_linkwatch_stop(void) {
  if (helper.running) {
    atomic_store(&helper.stop, 1);
    pthread_join(helper.thread, NULL);
  }
  helper.running = 0;
  helper.ctx = NULL;
}

void tfx_linkwatch_forget(void) {
  pthread_mutex_init(&helper.lock, NULL);
  helper.running = 0;
  helper.ctx = NULL;
  helper.n = 0;
}
