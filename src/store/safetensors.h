/* The safetensors format (what PyTorch and numpy users read): u64 little-endian header length N, N bytes of
 * JSON {"NAME": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, "__metadata__": {str: str}},
 * then the data. tfx writes F32 tensors; the reader accepts F32/F64/F16/BF16/I64/I32/I16/I8/U8/BOOL entries
 * and converts F32 on request. Errors: TFX_ECORRUPT naming the file, tensor and offsets. */
#ifndef TFX_SAFETENSORS_H
#define TFX_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct tfx_st_tensor {
  char name[160];
  char dtype[8];
  int rank;
  int64_t shape[8];
  size_t begin, end; /* byte offsets into the data section */
} tfx_st_tensor;

typedef struct tfx_st_file {
  tfx_st_tensor *tensors;
  int n;
  uint8_t *data; /* the data section */
  size_t data_size;
  char *metadata_json; /* "__metadata__" as JSON text, or NULL */
} tfx_st_file;

/* Writes n float32 tensors (borrowed) and string metadata pairs (meta_kv[2i], meta_kv[2i+1]) atomically. */
int tfx_st_write(const char *path, const char *const *names, const int *ranks, const int64_t *const *shapes,
                 const float *const *data, int n, const char *const *meta_kv, int n_meta, tfx_err *err);
/* Reads and validates a safetensors file; caller owns *out; free with tfx_st_destroy. */
int tfx_st_read(const char *path, tfx_st_file **out, tfx_err *err);
/* Frees a file read by tfx_st_read; NULL does nothing. */
void tfx_st_destroy(tfx_st_file *f);
/* The tensor called name (borrowed), or NULL. */
const tfx_st_tensor *tfx_st_find(const tfx_st_file *f, const char *name);
/* The byte size of a safetensors dtype ("F32" -> 4), 0 if unknown. */
size_t tfx_st_dtype_size(const char *dtype);

#endif
