/* The spool command: standard input into a directory that a run follows (data.train.follow), so a stream
 * from a pipe keeps what a followed directory gives: where each worker stands is part of the checkpoint, and a
 * resumed run neither skips nor repeats a line. Every --lines lines (10000 by default) become one file, written
 * as DIR/.NAME.tmp, fsync'ed and renamed to DIR/NAME; NAME is spool-<the spool's start in ns, 20 digits>-<part,
 * 8 digits>, so the files of a later spool sort after those of an earlier one. At the end of input the last,
 * shorter part lands too; a spool killed mid-part leaves only its dot-named .tmp, which no run reads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/fs.h"

typedef struct spool {
  const char *dir;
  long long start_ns;
  int part;
  FILE *f;
  char tmp[700], name[700];
  long lines;
} spool;

/* Starts the next part's .tmp file. */
static int open_part(spool *s, tfx_err *err) {
  snprintf(s->name, sizeof s->name, "%s/spool-%020lld-%08d", s->dir, s->start_ns, s->part);
  snprintf(s->tmp, sizeof s->tmp, "%s/.spool-%020lld-%08d.tmp", s->dir, s->start_ns, s->part);
  s->f = fopen(s->tmp, "w");
  s->lines = 0;
  return s->f ? TFX_OK : tfx_err_sys(err, TFX_ESYS, "spool: open %s", s->tmp);
}

/* Lands the current part: flush, fsync, close, rename into place. */
static int land_part(spool *s, tfx_err *err) {
  int bad = fflush(s->f) || fsync(fileno(s->f));
  bad |= fclose(s->f) != 0;
  s->f = NULL;
  if (bad || rename(s->tmp, s->name)) {
    int rc = tfx_err_sys(err, TFX_ESYS, "spool: write %s", s->tmp);
    unlink(s->tmp);
    return rc;
  }
  s->part++;
  return TFX_OK;
}

/* Copies standard input into parts of `per` lines. */
static int copy_input(spool *s, long per, tfx_err *err) {
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  int rc = TFX_OK;
  while (!rc && (n = getline(&line, &cap, stdin)) > 0) {
    rc = s->f ? TFX_OK : open_part(s, err);
    if (!rc && fwrite(line, 1, (size_t)n, s->f) != (size_t)n) {
      rc = tfx_err_sys(err, TFX_ESYS, "spool: write %s", s->tmp);
    }
    if (!rc && ++s->lines == per) {
      rc = land_part(s, err);
    }
  }
  free(line);
  return rc;
}

int tfx_spool_run(const tfx_cli_opts *o, tfx_err *err) {
  if (!o->out_dir[0]) {
    return tfx_err_set(err, TFX_EINVAL, "spool needs --out DIR (the directory a run follows)");
  }
  int rc = tfx_mkdirs(o->out_dir, err);
  if (rc) {
    return rc;
  }
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  spool s = {.dir = o->out_dir, .start_ns = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec};
  rc = copy_input(&s, o->lines > 0 ? o->lines : 10000, err);
  if (!rc && s.f) {
    rc = land_part(&s, err);
  }
  if (s.f) {
    fclose(s.f);
    unlink(s.tmp);
  }
  if (!rc) {
    fprintf(stderr, "spool: %d file(s) landed in %s\n", s.part, o->out_dir);
  }
  return rc;
}
