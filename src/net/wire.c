/* Envelope + tensor frames over ZeroMQ, with validation after every unpack. */
#include "net/wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int sender_role = TFX__ROLE__ROLE_NONE;
static int sender_index = 0;
static size_t max_frame = TFX_WIRE_DEFAULT_MAX_FRAME;

void tfx_wire_set_max_frame(size_t bytes) {
  max_frame = bytes && bytes < TFX_MAX_FRAME ? bytes : bytes ? TFX_MAX_FRAME : TFX_WIRE_DEFAULT_MAX_FRAME;
}

size_t tfx_wire_max_frame(void) {
  return max_frame;
}

void tfx_wire_set_sender(int role, int index) {
  sender_role = role;
  sender_index = index;
}

void tfx_wire_request(tfx_envelope *env, Tfx__MsgType type) {
  tfx__envelope__init(env);
  env->version = TFX_PROTOCOL_VERSION;
  env->type = type;
  env->sender_role = (Tfx__Role)sender_role;
  env->sender_index = sender_index;
}

size_t tfx_wire_dtype_size(int dtype) {
  switch (dtype) {
    case TFX__DTYPE__DTYPE_FLOAT32:
      return 4;
    case TFX__DTYPE__DTYPE_INT64:
      return 8;
    default:
      return 0;
  }
}

uint8_t *tfx_wire_pack(const tfx_envelope *env, size_t *len) {
  size_t n = tfx__envelope__get_packed_size(env);
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf) {
    return NULL;
  }
  *len = tfx__envelope__pack(env, buf);
  return buf;
}

static int send_part(void *sock, zmq_msg_t *msg, int more, tfx_err *err) {
  if (zmq_msg_send(msg, sock, more ? ZMQ_SNDMORE : 0) < 0) {
    int e = errno;
    zmq_msg_close(msg);
    errno = e;
    return tfx_err_sys(err, TFX_EPEER, "send");
  }
  return TFX_OK;
}

static int send_payload(void *sock, const tfx_payload *p, int more, tfx_err *err) {
  zmq_msg_t msg;
  if (p->copy) {
    if (zmq_msg_init_size(&msg, p->size)) {
      return tfx_err_sys(err, TFX_ENOMEM, "payload of %zu bytes", p->size);
    }
    memcpy(zmq_msg_data(&msg), p->data, p->size);
  } else if (zmq_msg_init_data(&msg, (void *)p->data, p->size, p->release, p->hint)) {
    return tfx_err_sys(err, TFX_ENOMEM, "payload of %zu bytes", p->size);
  }
  return send_part(sock, &msg, more, err);
}

/* Releases the zero-copy payloads among n, as ZeroMQ would have once it sent them. */
static void release_from(const tfx_payload *payloads, int n) {
  for (int i = 0; i < n; i++) {
    if (!payloads[i].copy && payloads[i].release) {
      payloads[i].release((void *)payloads[i].data, payloads[i].hint);
    }
  }
}

/* Refuses, before any frame goes out, a message with a frame over the bound its receiver applies (it would drop
 * the connection without a word); the zero-copy payloads are released as ZeroMQ would have. */
static int check_sizes(size_t envelope, const tfx_payload *payloads, int n, tfx_err *err) {
  size_t big = envelope;
  for (int i = 0; i < n; i++) {
    big = payloads[i].size > big ? payloads[i].size : big;
  }
  if (big <= max_frame) {
    return TFX_OK;
  }
  release_from(payloads, n);
  return tfx_err_set(err, TFX_ECONFIG,
                     "a frame of %zu bytes is over the %zu bytes a message may hold (cluster.max_message_bytes)", big,
                     max_frame);
}

int tfx_wire_send(void *sock, const zmq_msg_t *identity, const tfx_envelope *env, const tfx_payload *payloads,
                  int n_payloads, tfx_err *err) {
  zmq_msg_t msg;
  size_t n = tfx__envelope__get_packed_size(env);
  int rc = check_sizes(n, payloads, n_payloads, err);
  if (rc) {
    return rc;
  }
  if (identity) {
    zmq_msg_init(&msg);
    zmq_msg_copy(&msg, (zmq_msg_t *)identity);
    rc = send_part(sock, &msg, 1, err);
  }
  if (!rc && zmq_msg_init_size(&msg, n)) {
    rc = tfx_err_sys(err, TFX_ENOMEM, "envelope of %zu bytes", n);
  } else if (!rc) {
    tfx__envelope__pack(env, zmq_msg_data(&msg));
    rc = send_part(sock, &msg, n_payloads > 0, err);
  }
  if (rc) {
    release_from(payloads, n_payloads);
    return rc;
  }
  for (int i = 0; i < n_payloads; i++) {
    if ((rc = send_payload(sock, &payloads[i], i + 1 < n_payloads, err))) {
      release_from(payloads + i + 1, n_payloads - i - 1); /* frames that will never go */
      return rc;
    }
  }
  return TFX_OK;
}

static int check_tensor(const tfx_tensor_meta *t, int i, tfx_err *err) {
  size_t es = tfx_wire_dtype_size(t->dtype);
  if (!es) {
    return tfx_err_set(err, TFX_EPROTO, "tensor %d '%.64s': unknown dtype %d", i, t->name, t->dtype);
  }
  if (t->n_shape > 8) {
    return tfx_err_set(err, TFX_EPROTO, "tensor %d '%.64s': rank %zu > 8", i, t->name, t->n_shape);
  }
  /* A row-sparse tensor (rows given) carries n_rows rows of a table whose dim 0 may be huge (a lazy table's ids):
   * only the rows it carries count against the frame limit. */
  uint64_t count = 1;
  for (size_t d = 0; d < t->n_shape; d++) {
    uint64_t dim = d == 0 && t->n_rows ? (uint64_t)t->n_rows : (uint64_t)t->shape[d];
    if (t->shape[d] < 0 || (dim > 0 && count > TFX_MAX_FRAME / dim)) {
      return tfx_err_set(err, TFX_EPROTO, "tensor %d '%.64s': bad dim %zu = %lld", i, t->name, d,
                         (long long)t->shape[d]);
    }
    count *= dim;
  }
  if (count * es != t->nbytes) {
    return tfx_err_set(err, TFX_EPROTO, "tensor %d '%.64s': nbytes %llu but shape holds %llu bytes", i, t->name,
                       (unsigned long long)t->nbytes, (unsigned long long)(count * es));
  }
  return TFX_OK;
}

/* Checks what protobuf cannot: version, type, and that tensors and frames agree. */
static int validate(const tfx_envelope *env, const size_t *part_sizes, int n_parts, tfx_err *err) {
  if (env->version != TFX_PROTOCOL_VERSION) {
    return tfx_err_set(err, TFX_EPROTO, "protocol version %u, this node speaks %d", env->version, TFX_PROTOCOL_VERSION);
  }
  if (env->type <= TFX__MSG_TYPE__MSG_NONE || env->type > TFX__MSG_TYPE__MSG_REREPLICATE) {
    return tfx_err_set(err, TFX_EPROTO, "unknown message type %d", env->type);
  }
  int part = 0;
  for (size_t i = 0; i < env->n_tensors; i++) {
    int rc = check_tensor(env->tensors[i], (int)i, err);
    if (rc) {
      return rc;
    }
    if (env->tensors[i]->nbytes == 0) {
      continue;
    }
    if (part >= n_parts || part_sizes[part] != env->tensors[i]->nbytes) {
      return tfx_err_set(err, TFX_EPROTO, "tensor %zu '%.64s': frame of %zu bytes, want %llu", i, env->tensors[i]->name,
                         part < n_parts ? part_sizes[part] : 0, (unsigned long long)env->tensors[i]->nbytes);
    }
    part++;
  }
  if (part != n_parts) {
    return tfx_err_set(err, TFX_EPROTO, "%d data frames for %d tensors", n_parts, part);
  }
  for (size_t i = 0; i < env->n_want; i++) {
    if (env->want[i]->nbytes || !env->want[i]->n_rows || !env->want[i]->name[0]) {
      return tfx_err_set(err, TFX_EPROTO, "want %zu '%.64s': a row request names a table and rows, without bytes", i,
                         env->want[i]->name);
    }
  }
  return TFX_OK;
}

int tfx_wire_unpack(const uint8_t *buf, size_t len, const size_t *part_sizes, int n_parts, tfx_envelope **out,
                    tfx_err *err) {
  tfx_envelope *env = tfx__envelope__unpack(NULL, len, buf);
  if (!env) {
    return tfx_err_set(err, TFX_EPROTO, "Envelope: cannot decode %zu bytes", len);
  }
  int rc = validate(env, part_sizes, n_parts, err);
  if (rc) {
    tfx__envelope__free_unpacked(env, NULL);
    return rc;
  }
  *out = env;
  return TFX_OK;
}

void tfx_wire_free_envelope(tfx_envelope *env) {
  if (env) {
    tfx__envelope__free_unpacked(env, NULL);
  }
}

void tfx_inmsg_fini(tfx_inmsg *m) {
  if (m->has_identity) {
    zmq_msg_close(&m->identity);
  }
  for (int i = 0; i < m->n_parts; i++) {
    zmq_msg_close(&m->parts[i]);
  }
  free(m->parts);
  tfx_wire_free_envelope(m->env);
  memset(m, 0, sizeof *m);
}

const void *tfx_inmsg_part(const tfx_inmsg *m, int i, size_t *size) {
  if (i < 0 || i >= m->n_parts) {
    return NULL;
  }
  *size = zmq_msg_size(&m->parts[i]);
  return zmq_msg_data(&m->parts[i]);
}

/* Discards the rest of a multipart message, so its frames are not taken for the next one. */
static void drain(void *sock) {
  int more = 1;
  while (more) {
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, sock, 0) < 0) {
      more = 0;
    } else {
      more = zmq_msg_more(&m);
    }
    zmq_msg_close(&m);
  }
}

/* Receives every frame of one message: frames[0] is the envelope. */
static int recv_frames(void *sock, zmq_msg_t **frames, int *n, tfx_err *err) {
  int cap = 4, count = 0, more = 1;
  zmq_msg_t *f = malloc(sizeof *f * (size_t)cap);
  if (!f) {
    return tfx_err_set(err, TFX_ENOMEM, "out of memory");
  }
  while (more) {
    if (count == cap) {
      zmq_msg_t *g = cap < TFX_MAX_PARTS + 2 ? realloc(f, sizeof *f * (size_t)(cap *= 2)) : NULL;
      if (!g) {
        for (int i = 0; i < count; i++) {
          zmq_msg_close(&f[i]);
        }
        free(f);
        drain(sock);
        return tfx_err_set(err, TFX_EPROTO, "message with more than %d frames", TFX_MAX_PARTS);
      }
      f = g;
    }
    zmq_msg_init(&f[count]);
    if (zmq_msg_recv(&f[count], sock, 0) < 0) {
      int rc = tfx_err_sys(err, TFX_EPEER, "recv");
      for (int i = 0; i <= count; i++) {
        zmq_msg_close(&f[i]);
      }
      free(f);
      return rc;
    }
    more = zmq_msg_more(&f[count]);
    count++;
  }
  *frames = f;
  *n = count;
  return TFX_OK;
}

int tfx_wire_recv(void *sock, int with_identity, tfx_inmsg *m, tfx_err *err) {
  memset(m, 0, sizeof *m);
  zmq_msg_t *f = NULL;
  int n = 0, rc = recv_frames(sock, &f, &n, err);
  if (rc) {
    return rc;
  }
  int head = with_identity ? 1 : 0;
  if (n <= head) {
    rc = tfx_err_set(err, TFX_EPROTO, "message of %d frame(s) has no envelope", n);
    goto fail;
  }
  size_t sizes[64], *ps = n - head - 1 <= 64 ? sizes : malloc(sizeof(size_t) * (size_t)(n - head - 1));
  if (!ps) {
    rc = tfx_err_set(err, TFX_ENOMEM, "out of memory");
    goto fail;
  }
  for (int i = head + 1; i < n; i++) {
    ps[i - head - 1] = zmq_msg_size(&f[i]);
  }
  rc = tfx_wire_unpack(zmq_msg_data(&f[head]), zmq_msg_size(&f[head]), ps, n - head - 1, &m->env, err);
  if (ps != sizes) {
    free(ps);
  }
  if (rc) {
    goto fail;
  }
  if (with_identity) {
    m->identity = f[0];
    m->has_identity = 1;
  }
  zmq_msg_close(&f[head]);
  m->n_parts = n - head - 1;
  m->parts = f;
  memmove(f, f + head + 1, sizeof *f * (size_t)m->n_parts);
  return TFX_OK;
fail:
  if (with_identity && n > 0) {
    /* Keep the identity so the caller can answer the sender with an error. */
    m->identity = f[0];
    m->has_identity = 1;
  }
  for (int i = with_identity ? 1 : 0; i < n; i++) {
    zmq_msg_close(&f[i]);
  }
  free(f);
  return rc;
}
