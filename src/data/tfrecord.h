/* TFRecord files: the record framing TensorFlow writes (tf.io.TFRecordWriter, TensorBoard event files), and
 * CRC32C (Castagnoli), the checksum it uses.
 *
 * A file is a sequence of records, each
 *     u64 length | u32 masked_crc32c(length bytes) | data[length] | u32 masked_crc32c(data)
 * all little-endian, with mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8. Only uncompressed files are read.
 *
 * Key types: tfx_tfrecord_reader streams a file one record at a time through one reusable buffer (as large as
 * the largest record so far), so a file larger than memory is never loaded whole; tfx_tfrecord_writer appends
 * records. Ownership: the caller owns both handles; a record returned by the reader is borrowed until the next
 * read or the close. Thread-safety: a handle is used by one thread at a time; the CRC functions are pure.
 * Errors: TFX_ENOTFOUND / TFX_ESYS (open, read, write), TFX_ECORRUPT (bad length or data CRC, a truncated
 * header or record; the message names the file, the record index and its byte offset), TFX_ENOMEM. */
#ifndef TFX_TFRECORD_H
#define TFX_TFRECORD_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct tfx_tfrecord_reader tfx_tfrecord_reader;
typedef struct tfx_tfrecord_writer tfx_tfrecord_writer;

/* Extends a CRC32C over n bytes: start with crc = 0; tfx_crc32c(0, "123456789", 9) == 0xE3069283. Pure. */
uint32_t tfx_crc32c(uint32_t crc, const void *data, size_t n);
/* The masked form of a CRC that TFRecord stores. Pure. */
uint32_t tfx_crc32c_mask(uint32_t crc);
/* The inverse of tfx_crc32c_mask. Pure. */
uint32_t tfx_crc32c_unmask(uint32_t masked);

/* Opens a TFRecord file for reading; caller owns *out; close with tfx_tfrecord_reader_close. */
int tfx_tfrecord_reader_open(const char *path, tfx_tfrecord_reader **out, tfx_err *err);
/* Reads the next record and verifies both CRCs: *data (borrowed until the next read or close) and *len; at a
 * clean end of file sets *data = NULL and *len = 0 and returns TFX_OK. After an error, the reader stays failed. */
int tfx_tfrecord_reader_next(tfx_tfrecord_reader *r, const uint8_t **data, size_t *len, tfx_err *err);
/* The byte offset of the next record (after the last one read). */
uint64_t tfx_tfrecord_reader_offset(const tfx_tfrecord_reader *r);
/* The number of records read so far. */
uint64_t tfx_tfrecord_reader_count(const tfx_tfrecord_reader *r);
/* The path the reader was opened with; borrowed until close. */
const char *tfx_tfrecord_reader_path(const tfx_tfrecord_reader *r);
/* Closes the file and frees the reader; NULL does nothing. */
void tfx_tfrecord_reader_close(tfx_tfrecord_reader *r);

/* Creates (or truncates) a TFRecord file for writing; caller owns *out; close with tfx_tfrecord_writer_close. */
int tfx_tfrecord_writer_open(const char *path, tfx_tfrecord_writer **out, tfx_err *err);
/* Appends one framed record; data is borrowed until return. */
int tfx_tfrecord_writer_write(tfx_tfrecord_writer *w, const void *data, size_t len, tfx_err *err);
/* Flushes and closes the file and frees the writer, on every path; NULL does nothing. Returns TFX_ESYS if the
 * final flush failed. */
int tfx_tfrecord_writer_close(tfx_tfrecord_writer *w, tfx_err *err);

#endif
