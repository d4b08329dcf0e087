/* CSV datasets: one example per line, comma-separated numeric cells, one of which is the integer label.
 *
 * The first line may be a header of column names. The label column is named by its header name or by its
 * 0-based index as a decimal string (negative counts from the end: "-1" is the last column); a header name
 * that looks like a number wins over the index. Every other column is a float feature, in file order. Cells may be
 * double-quoted ("" inside quotes is a quote, a line end inside quotes is part of the cell and the row goes on;
 * messages name a row by its first line) and padded with blanks; blank lines, CRLF line ends and a UTF-8
 * byte-order mark are accepted. Every row must have as many cells as the first.
 *
 * Ownership: the dataset is the caller's (tfx_dataset_destroy). Thread-safety: no shared state. Errors:
 * TFX_EINVAL (NULL arguments), TFX_ENOTFOUND / TFX_ESYS (open, read), TFX_ECONFIG (unknown or out-of-range label
 * column, fewer than two columns), TFX_ECORRUPT (a cell that is not a finite number, a label that is not an
 * int32, a row of the wrong width, an unterminated quote, no data rows, two header columns of one name; the message
 * names the file, the 1-based line and column and, with a header, the column's name), TFX_ENOMEM. */
#ifndef TFX_CSV_H
#define TFX_CSV_H

#include <stdint.h>

#include "common/err.h"
#include "data/dataset.h"

typedef struct tfx_csv_reader tfx_csv_reader;

/* Opens a CSV file for reading in chunks (the header and label column are resolved now); caller owns *out;
 * close with tfx_csv_close. */
int tfx_csv_open(const char *path, const char *label_column, int has_header, tfx_csv_reader **out, tfx_err *err);
/* Reads up to max more rows into a new dataset; caller owns *out (NULL at the end of the file). */
int tfx_csv_read(tfx_csv_reader *r, size_t max, tfx_dataset **out, tfx_err *err);
/* Closes the file and frees the reader; NULL does nothing. */
void tfx_csv_close(tfx_csv_reader *r);
/* Counts the rows of a CSV file without parsing them: its non-blank lines, less the header (the reader's rules);
 * *n is written on success. TFX_ECORRUPT for an empty file, as the reader. */
int tfx_csv_count(const char *path, int has_header, int64_t *n, tfx_err *err);
/* The 1-based line of data row `index` (0-based, the reader's rules: blank lines skipped, after the header) into
 * *line; TFX_ENOTFOUND when the file has fewer rows. */
int tfx_csv_line_of(const char *path, int has_header, size_t index, size_t *line, tfx_err *err);
/* Loads a CSV file; label_column is a header name or an index string; caller owns *out; free with
 * tfx_dataset_destroy. */
int tfx_csv_load(const char *path, const char *label_column, int has_header, tfx_dataset **out, tfx_err *err);

/* Row by row, as text: a header of column names (required) and rows of as many cells, quotes removed, blanks
 * trimmed (the reader of feature columns). */
typedef struct tfx_csv_rows tfx_csv_rows;

/* Opens a CSV file and reads its header; caller owns *out (tfx_csv_rows_close). */
int tfx_csv_rows_open(const char *path, tfx_csv_rows **out, tfx_err *err);
/* The column names (borrowed from the reader) and their number. */
const char *const *tfx_csv_rows_header(const tfx_csv_rows *r, size_t *ncols);
/* The next row's cells (borrowed until the next call; *cells NULL at the end) and its 1-based line number.
 * TFX_ECORRUPT naming the line for a row of another width or an unterminated quote. */
int tfx_csv_rows_next(tfx_csv_rows *r, char ***cells, size_t *lineno, tfx_err *err);
/* Closes the file and frees the reader; NULL does nothing. */
void tfx_csv_rows_close(tfx_csv_rows *r);

#endif
