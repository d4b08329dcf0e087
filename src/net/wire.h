/* The wire codec: an Envelope frame (protobuf-c) followed by one raw frame per tensor with nbytes > 0.
 * Only this module packs and unpacks protobuf. Received tensor bytes stay in their ZeroMQ frames and are used
 * in place (tfx_inmsg_tensor); large payloads are sent without a copy (zmq_msg_init_data).
 * Errors: TFX_EPROTO for malformed, oversize or inconsistent frames (the message names the field). */
#ifndef TFX_WIRE_H
#define TFX_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "common/err.h"
#include "common/version.h"
#include "tfx.pb-c.h"

#define TFX_MAX_FRAME ((size_t)1 << 31) /* 2 GiB: the largest tensor frame accepted */
#define TFX_MAX_PARTS 4096
/* The largest frame of a process that does not know its experiment (tfx_wire_set_max_frame): enough for the
 * experiment and plan that INIT and a registration's reply carry. */
#define TFX_WIRE_DEFAULT_MAX_FRAME ((size_t)64 << 20)
/* Senders put the data frames of tensors up to this size before the larger ones: a tiny frame behind a large
 * zero-copy one costs ZeroMQ an extra send and the receiver an extra wake-up. Receivers look tensors up by
 * name, so the order carries no meaning. */
#define TFX_WIRE_SMALL ((size_t)64 << 10)

typedef Tfx__Envelope tfx_envelope;
typedef Tfx__Tensor tfx_tensor_meta;
typedef Tfx__Shard tfx_shard_meta;

/* Bytes to send after the envelope. With copy = 0 the bytes are sent in place: they must stay unchanged until
 * release(data, hint) is called by ZeroMQ (release may be NULL when the caller waits for the peer's reply). */
typedef struct tfx_payload {
  const void *data;
  size_t size;
  int copy;
  void (*release)(void *data, void *hint);
  void *hint;
} tfx_payload;

/* A received message: the routing identity (ROUTER sockets), the envelope and the tensor frames. */
typedef struct tfx_inmsg {
  zmq_msg_t identity;
  int has_identity;
  tfx_envelope *env;
  zmq_msg_t *parts;
  int n_parts;
} tfx_inmsg;

/* Sends [identity], envelope, payloads as one multipart message; payloads[i] belongs to the i-th tensor with
 * nbytes > 0. identity (may be NULL) is borrowed. Returns TFX_EPEER when the socket refuses, TFX_ECONFIG (nothing
 * sent) when a frame is over tfx_wire_max_frame; on any failure every zero-copy payload not sent is released. */
int tfx_wire_send(void *sock, const zmq_msg_t *identity, const tfx_envelope *env, const tfx_payload *payloads,
                  int n_payloads, tfx_err *err);
/* Sets the largest frame this process sends and that every socket net.c opens from now on accepts
 * (ZMQ_MAXMSGSIZE): a peer announcing a longer frame, authenticated or not, is disconnected before anything is
 * allocated for it. 0: TFX_WIRE_DEFAULT_MAX_FRAME; at most TFX_MAX_FRAME. Set before the sockets are opened. */
void tfx_wire_set_max_frame(size_t bytes);
/* The largest frame, as set. */
size_t tfx_wire_max_frame(void);
/* Receives one whole message (blocking; poll first) into m; the caller tfx_inmsg_fini's m on every path. On a
 * decode error m holds only the sender's identity (to answer it) and the error names the problem. */
int tfx_wire_recv(void *sock, int with_identity, tfx_inmsg *m, tfx_err *err);
/* Releases everything m holds; a zeroed or already finished m is fine. */
void tfx_inmsg_fini(tfx_inmsg *m);
/* The bytes of the i-th data frame, borrowed from m (NULL if out of range); *size gets its length. */
const void *tfx_inmsg_part(const tfx_inmsg *m, int i, size_t *size);
/* Packs env alone into a new buffer; caller owns; free with free(). For tests and fuzzing. */
uint8_t *tfx_wire_pack(const tfx_envelope *env, size_t *len);
/* Decodes and validates an envelope against the data frame sizes; caller owns *out; free with
 * tfx_wire_free_envelope. */
int tfx_wire_unpack(const uint8_t *buf, size_t len, const size_t *part_sizes, int n_parts, tfx_envelope **out,
                    tfx_err *err);
/* Frees an envelope from tfx_wire_unpack; NULL does nothing. */
void tfx_wire_free_envelope(tfx_envelope *env);
/* Fills env as a request of the given type from this process (stack-built, borrows nothing). */
void tfx_wire_request(tfx_envelope *env, Tfx__MsgType type);
/* Sets the role and index every request of this process carries. */
void tfx_wire_set_sender(int role, int index);
/* The byte size of one element of a dtype, 0 if unknown. */
size_t tfx_wire_dtype_size(int dtype);

#endif
