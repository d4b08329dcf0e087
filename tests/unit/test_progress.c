/* Unit tests of src/observe/progress.c: the progress line shows step/max and an ETA only when they say something:
 * an endless max_steps (a followed stream's) is left out, and an ETA of a year or more shows as "-". */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "observe/progress.h"

static void line(int64_t max_steps, int64_t step, double elapsed, char *out, size_t n) {
  tfx_progress p = {.start_step = 0, .max_steps = max_steps};
  tfx_progress_format(&p, step, 0.5, NAN, 100, elapsed, out, n);
}

Test(progress, a_bounded_run_shows_its_end_and_eta) {
  char out[256];
  line(1000, 100, 10, out, sizeof out);
  cr_assert(strstr(out, "step 100/1000 ") && strstr(out, "ETA 90s"), "%s", out);
}

Test(progress, an_endless_run_shows_no_end_and_no_eta) {
  char out[256];
  line(1000000000000000000LL, 20, 3, out, sizeof out);
  cr_assert(strstr(out, "step 20 ") && strstr(out, "ETA -") && !strstr(out, "/1000"), "%s", out);
  line(100000020, 20, 3, out, sizeof out); /* 15 000 000 s: half a year */
  cr_assert(strstr(out, "step 20/100000020 ") && strstr(out, "ETA 15000000s"), "%s", out);
  line(1000000000, 20, 3, out, sizeof out); /* 150 000 000 s: years */
  cr_assert(strstr(out, "ETA -"), "%s", out);
}
