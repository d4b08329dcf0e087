/* Declarations shared by the experiment index's two files (runindex.c: storage and import; runquery.c: --where,
 * list, compare). Not for use outside them. */
#ifndef TFX_RUNINDEX_IMPL_H
#define TFX_RUNINDEX_IMPL_H

#include <sqlite3.h>

#include "store/runindex.h"

struct tfx_runindex {
  sqlite3 *db;
  char path[1024];
};

/* Maps a SQLite result code to a tfx code, with the index path, what failed and SQLite's message in err. */
int store__runindex_fail(tfx_runindex *x, int rc, const char *what, tfx_err *err);
/* Prepares sql on the index's connection; caller owns *st (sqlite3_finalize). */
int store__runindex_prepare(tfx_runindex *x, const char *sql, sqlite3_stmt **st, tfx_err *err);
/* A text column ("-" when NULL), borrowed from st until its next step. */
const char *store__runindex_text(sqlite3_stmt *st, int col);

#endif
