/* src/observe/events.c: a TensorBoard event file appears with the first event, so a run refused before it
 * writes nothing leaves none (it left a 40-byte file of only the file_version record: #30, item 18). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <string.h>

#include "data/tfrecord.h"
#include "observe/events.h"
#include "tmpdir.h"

static void init(void) {
  tmpdir_create("events");
}

TestSuite(events, .init = init, .fini = tmpdir_remove);

/* The one events file in tmp into path (1 when there is one, 0 when none). */
static int events_file(char *path, size_t n) {
  DIR *d = opendir(tmp);
  cr_assert_not_null(d);
  int found = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (!strncmp(de->d_name, "events.out.tfevents.", 20)) {
      snprintf(path, n, "%s/%s", tmp, de->d_name);
      found++;
    }
  }
  closedir(d);
  cr_assert_leq(found, 1);
  return found;
}

Test(events, created_at_the_first_event) {
  tfx_events *e = NULL;
  tfx_err err = {0};
  char path[512];
  cr_assert_eq(tfx_events_open(tmp, &e, &err), TFX_OK, "%s", err.msg);
  cr_assert_eq(events_file(path, sizeof path), 0, "opened, nothing written, yet %s exists", path);
  tfx_events_close(e);
  cr_assert_eq(events_file(path, sizeof path), 0, "a run with no event left %s", path);
  cr_assert_eq(tfx_events_open(tmp, &e, &err), TFX_OK, "%s", err.msg);
  const char *names[] = {"loss"};
  const double values[] = {0.5};
  tfx_events_write(e, "train", 1, names, values, 1);
  tfx_events_write(e, "train", 2, names, values, 1);
  tfx_events_close(e);
  cr_assert_eq(events_file(path, sizeof path), 1);
  tfx_tfrecord_reader *r = NULL;
  cr_assert_eq(tfx_tfrecord_reader_open(path, &r, &err), TFX_OK, "%s", err.msg);
  const uint8_t *data = NULL;
  size_t len = 0;
  int records = 0;
  while (!tfx_tfrecord_reader_next(r, &data, &len, &err) && data) {
    records++;
  }
  tfx_tfrecord_reader_close(r);
  cr_assert_eq(records, 3, "file_version and two events, got %d records", records);
}
