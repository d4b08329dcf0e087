/* Writes the committed seed corpus (tests/fuzz/corpus/<target>/) from real encoders: the wire codec, the
 * checkpoint writer, the tf.train.Example encoder (tfx_example_pack), zlib. Run once when a format changes:
 * make_seeds CORPUS_DIR. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/fs.h"
#include "data/example.h"
#include "data/tfrecord.h"
#include "net/wire.h"
#include "store/ckpt.h"
#include "store/rowfile.h"
#include "store/safetensors.h"

static const char *root;

/* Writes prefix bytes then data to ROOT/target/name. */
static void seed(const char *target, const char *name, const void *prefix, size_t np, const void *data, size_t n) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", root, target);
  tfx_mkdirs(path, NULL);
  snprintf(path, sizeof path, "%s/%s/%s", root, target, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(prefix, 1, np, f) != np || fwrite(data, 1, n, f) != n) {
    fprintf(stderr, "cannot write %s\n", path);
    exit(1);
  }
  fclose(f);
}

static void text(const char *target, const char *name, const char *prefix, const char *body) {
  seed(target, name, prefix, strlen(prefix), body, strlen(body));
}

static void wire_seed(const char *name, tfx_envelope *env, const uint32_t *sizes, int n) {
  uint8_t head[1 + 4 * 15];
  head[0] = (uint8_t)n;
  for (int i = 0; i < n; i++) {
    for (int b = 0; b < 4; b++) {
      head[1 + 4 * i + b] = (uint8_t)(sizes[i] >> (8 * b));
    }
  }
  size_t len = 0;
  uint8_t *buf = tfx_wire_pack(env, &len);
  seed("wire", name, head, 1 + 4 * (size_t)n, buf, len);
  free(buf);
}

static void wire_seeds(void) {
  tfx_envelope env;
  tfx_wire_set_sender(TFX__ROLE__ROLE_WORKER, 1);
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STATUS);
  wire_seed("status", &env, NULL, 0);
  int64_t shape[2] = {3, 4}, rows[2] = {0, 2};
  Tfx__Tensor t1 = TFX__TENSOR__INIT, t2 = TFX__TENSOR__INIT, *ts[2] = {&t1, &t2};
  t1.name = "dense/kernel", t1.n_shape = 2, t1.shape = shape, t1.nbytes = 48;
  t2.name = "emb", t2.n_shape = 2, t2.shape = shape, t2.n_rows = 2, t2.rows = rows, t2.nbytes = 32;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PUSH);
  env.step = 7, env.n_tensors = 2, env.tensors = ts;
  wire_seed("push", &env, (uint32_t[]){48, 32}, 2);
  char *names[2] = {"dense/kernel", "dense/bias"};
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_PULL);
  env.n_names = 2, env.names = names;
  wire_seed("pull", &env, NULL, 0);
  Tfx__Shard s = TFX__SHARD__INIT, *ss[1] = {&s};
  s.key = "dense/kernel/part_1", s.var = "dense/kernel", s.ps = 1, s.n_shape = 2, s.shape = shape, s.row_end = 3;
  s.init = "glorot_uniform";
  Tfx__KeyValue kv = TFX__KEY_VALUE__INIT, *kvs[1] = {&kv};
  kv.key = "loss", kv.value = 0.5;
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_INIT);
  Tfx__Init init = TFX__INIT__INIT;
  init.workers = 2, init.as_backup = 1;
  env.n_shards = 1, env.shards = ss, env.n_stats = 1, env.stats = kvs, env.text = "{}", env.path = "/tmp/x";
  env.init = &init;
  wire_seed("init", &env, NULL, 0);
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_REPLY);
  env.code = 3, env.error = "bad", env.outcome = TFX__PUSH_OUTCOME__PUSH_STALE;
  wire_seed("reply", &env, NULL, 0);
  /* The other kinds, so that every message type has a seed. */
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_REGISTER);
  env.text = "host1:2222";
  wire_seed("register", &env, NULL, 0);
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_CHECKPOINT);
  env.step = 200, env.path = "/tmp/run/checkpoints/ckpt-000000000200";
  wire_seed("checkpoint", &env, NULL, 0);
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_STOP);
  env.step = 1000;
  wire_seed("stop", &env, NULL, 0);
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_REPORT);
  env.step = 50, env.n_stats = 1, env.stats = kvs;
  wire_seed("report", &env, NULL, 0);
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_REPLICATE);
  Tfx__Replicate how = TFX__REPLICATE__INIT;
  how.kind = TFX__REPLICATE_KIND__REPLICATE_SNAPSHOT, how.acked = 1;
  env.replicate = &how, env.step = 16, env.target = 1, env.epoch = 7;
  wire_seed("replicate", &env, NULL, 0);
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_REREPLICATE);
  Tfx__Rereplicate to = TFX__REREPLICATE__INIT;
  to.to_ps = 1;
  env.rereplicate = &to, env.target = 1, env.epoch = 8;
  wire_seed("rereplicate", &env, NULL, 0);
  tfx_wire_request(&env, TFX__MSG_TYPE__MSG_REPLY);
  Tfx__ShardWritten written = TFX__SHARD_WRITTEN__INIT;
  written.crc32 = 0xdeadbeef, written.bytes = 4096;
  env.written = &written, env.instance_state = TFX__INSTANCE_STATE__INSTANCE_SERVING;
  wire_seed("reply_written", &env, NULL, 0);
}

/* Writes the file at path (written by a real encoder) as a seed of target, then removes it. */
static void file_seed(const char *target, const char *name, const char *path) {
  FILE *f = fopen(path, "rb");
  uint8_t buf[4096];
  size_t len = f ? fread(buf, 1, sizeof buf, f) : 0;
  if (f) {
    fclose(f);
  }
  if (!len) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(1);
  }
  seed(target, name, "", 0, buf, len);
  remove(path);
}

static void safetensors_seeds(void) {
  char path[1024];
  snprintf(path, sizeof path, "%s/st.tmpseed", root);
  float a[6] = {1, 2, 3, 4, 5, 6}, b[2] = {0.5f, -1};
  const int64_t sa[2] = {3, 2}, sb[1] = {2};
  const char *names[2] = {"dense/kernel", "dense/bias"}, *meta[2] = {"format", "pt"};
  const int ranks[2] = {2, 1};
  const int64_t *shapes[2] = {sa, sb};
  const float *data[2] = {a, b};
  if (tfx_st_write(path, names, ranks, shapes, data, 2, meta, 1, NULL)) {
    exit(1);
  }
  file_seed("safetensors", "two", path);
}

static void rowfile_seeds(void) {
  char path[1024];
  snprintf(path, sizeof path, "%s/rows.tmpseed", root);
  float r[3] = {0.25f, -1, 2};
  uint32_t crc = 0;
  uint64_t bytes = 0;
  tfx_rowfile *w = NULL;
  if (tfx_rowfile_create(path, 40, 2, &w, NULL) || tfx_rowfile_table(w, "emb/part_0", 1000, 3, 2, NULL) ||
      tfx_rowfile_row(w, 7, r, NULL) || tfx_rowfile_row(w, 999, r, NULL) ||
      tfx_rowfile_table(w, "emb@accumulator/part_0", 1000, 3, 1, NULL) || tfx_rowfile_row(w, 7, r, NULL) ||
      tfx_rowfile_finish(w, &crc, &bytes, NULL)) {
    exit(1);
  }
  file_seed("rowfile", "two_tables", path);
}

static void ckpt_seeds(void) {
  float a[6] = {1, 2, 3, 4, 5, 6}, b[2] = {0.5f, -1};
  tfx_ckpt_entry e[2] = {
      {.name = "dense/kernel", .rank = 2, .dims = {3, 2}, .row_end = 3, .count = 6, .data = a},
      {.name = "dense/bias@m", .rank = 1, .dims = {2}, .row_end = 2, .version = 4, .count = 2, .data = b}};
  char path[1024];
  snprintf(path, sizeof path, "%s/shard.tmpseed", root);
  for (int n = 0; n <= 2; n++) {
    tfx_ckpt_write(path, 100 + n, e, n, NULL, NULL, NULL);
    FILE *f = fopen(path, "rb");
    uint8_t buf[512];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    char name[32];
    snprintf(name, sizeof name, "shard%d", n);
    seed("ckpt", name, "\x01", 1, buf, len);
  }
  remove(path);
  uint32_t crc = 0;
  uint64_t bytes = 0;
  float v[3] = {1, 2, 3}; /* the shard fuzz_ckpt writes beside the manifest */
  tfx_ckpt_entry w = {.name = "w", .rank = 1, .dims = {3}, .row_end = 3, .count = 3, .data = v};
  tfx_ckpt_write(path, 7, &w, 1, &crc, &bytes, NULL);
  remove(path);
  char json[256];
  snprintf(json, sizeof json, "{\"step\": 7, \"shards\": [{\"file\": \"ps-0.shard\", \"crc32\": %u, \"bytes\": %llu}]}",
           crc, (unsigned long long)bytes);
  seed("ckpt", "manifest", "\x02", 1, json, strlen(json));
}

/* One Example with a float feature x of n values and an int64 label y, packed; caller frees. */
static uint8_t *example(int n, int64_t label, size_t *len) {
  static const float x[4] = {0, 127, 255, 3};
  const tfx_feature f[2] = {{.key = "x", .kind = TFX_FEATURE_KIND_FLOAT, .n = (size_t)n, .floats = x},
                            {.key = "y", .kind = TFX_FEATURE_KIND_INT64, .n = 1, .int64s = &label}};
  uint8_t *buf = NULL;
  tfx_err err = {0};
  if (tfx_example_pack(f, 2, &buf, len, &err)) {
    fprintf(stderr, "make_seeds: %s\n", err.msg);
    exit(1);
  }
  return buf;
}

static void tfrecord_seeds(void) {
  uint8_t rec[1024];
  size_t off = 0, len;
  for (int i = 0; i < 3; i++) { /* structured mode: [u16 len][Example] records */
    uint8_t *ex = example(4, i, &len);
    rec[off] = (uint8_t)len, rec[off + 1] = (uint8_t)(len >> 8);
    memcpy(rec + off + 2, ex, len);
    off += 2 + len;
    free(ex);
  }
  seed("tfrecord", "framed3", "\x01", 1, rec, off);
  char path[1024];
  snprintf(path, sizeof path, "%s/rec.tmpseed", root);
  tfx_tfrecord_writer *w = NULL;
  tfx_tfrecord_writer_open(path, &w, NULL);
  for (int i = 0; i < 2; i++) {
    uint8_t *ex = example(3, i, &len);
    tfx_tfrecord_writer_write(w, ex, len, NULL);
    free(ex);
  }
  tfx_tfrecord_writer_close(w, NULL);
  FILE *f = fopen(path, "rb");
  off = fread(rec, 1, sizeof rec, f);
  fclose(f);
  remove(path);
  seed("tfrecord", "raw2", "\x00", 1, rec, off); /* raw mode: a TFRecord file as written */
}

static void idx_seeds(void) {
  uint8_t img[4 + 12 + 2 * 2 * 3] = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3};
  for (int i = 16; i < (int)sizeof img; i++) {
    img[i] = (uint8_t)(i * 13);
  }
  uint8_t lab[4 + 4 + 3] = {0, 0, 8, 1, 0, 0, 0, 3, 1, 9, 0};
  seed("idx", "images", "", 0, img, sizeof img);
  seed("idx", "labels", "", 0, lab, sizeof lab);
  uint8_t gz[256];
  uLongf gzlen = sizeof gz;
  z_stream zs = {0};
  deflateInit2(&zs, 9, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY); /* 31: gzip wrapper */
  zs.next_in = img, zs.avail_in = sizeof img, zs.next_out = gz, zs.avail_out = (uInt)gzlen;
  deflate(&zs, Z_FINISH);
  gzlen = zs.total_out;
  deflateEnd(&zs);
  seed("idx", "images.gz", "", 0, gz, gzlen);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: make_seeds CORPUS_DIR\n");
    return 2;
  }
  root = argv[1];
  wire_seeds();
  ckpt_seeds();
  tfrecord_seeds();
  idx_seeds();
  safetensors_seeds();
  rowfile_seeds();
  text("columns", "rows", "", "y,cat,words,w,x,n\n1,2,a b c,0.5 1 2,3.5,10\n0,4,b,1,,0\n1,0,,,-2,1e6\n");
  text("columns", "quoted", "", "n,x,y,w,words,cat\n7,\"1,5\",0,2,\"x y\",3\n");
  text("where", "two", "", "accuracy>0.88, train.loss<=0.4");
  text("where", "and", "", "validation.heldout.accuracy >= 0.5 and step=100 and seconds<3600");
  text("where", "bad", "", "accuracy >> 1");
  text("csv", "header", "\x05", "a,b,label\n1,2,0\n3.5,-4e2,1\n");
  text("csv", "plain", "\x00", "0,0.1,0.2\n1,0.3,0.4\n2,,0.5\n");
  text("libsvm", "inferred", "\x00", "1 1:0.5 3:2\n0 2:1e-3 # comment\n\n-1 qid:3 4:7\n");
  text("libsvm", "dim8", "\x08", "3 1:1 8:2\n2 5:0.25\n");
  text("cluster", "tfjob", "",
       "{\"cluster\":{\"chief\":[\"host0:2222\"],\"worker\":[\"host1:2222\",\"host2:2222\"],\"ps\":"
       "[\"[::1]:2223\"]},\"task\":{\"type\":\"worker\",\"index\":1},\"environment\":\"cloud\"}");
  text("cluster", "master", "",
       "{\"cluster\":{\"master\":[\"127.0.0.1:5000\"],\"evaluator\":[\"e:1\"]},"
       "\"task\":{\"type\":\"evaluator\",\"index\":0},\"rpc_layer\":\"grpc\"}");
  text("cluster", "no_chief", "", "{\"cluster\":{\"worker\":[\"a:1\"]},\"task\":{\"type\":\"worker\",\"index\":0}}");
  return 0;
}
