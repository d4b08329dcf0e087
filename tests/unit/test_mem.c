/* common/mem: huge pages put back after a forked copy split them, and never a page made that was not there. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "common/mem.h"

#define WINDOW ((size_t)2 << 20)
#define BYTES (8 * WINDOW)

/* The resident pages of [p, p + bytes). */
static size_t resident_pages(void *p, size_t bytes) {
  static unsigned char vec[BYTES / 4096];
  cr_assert_eq(mincore(p, bytes, vec), 0);
  size_t n = 0;
  for (size_t i = 0; i < bytes / 4096; i++) {
    n += vec[i] & 1;
  }
  return n;
}

/* The kB of AnonHugePages in this process's mapping that holds p, or -1 when smaps cannot be read. */
static long huge_kb_at(const void *p) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) {
    return -1;
  }
  char line[256];
  long kb = -1;
  int inside = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long from, to;
    if (sscanf(line, "%lx-%lx ", &from, &to) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      inside = (uintptr_t)p >= from && (uintptr_t)p < to;
    } else if (inside && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) {
      break;
    }
  }
  fclose(f);
  return kb;
}

/* Splits every huge page of [p, p + bytes) into small-page mappings, as a forked copy's copy-on-write does (the
 * kernel may also copy a huge page whole there, so the fork is not a reliable way to split): one page of each
 * window made read-only and back. */
static void split_windows(char *p, size_t bytes) {
  for (size_t w = 0; w + WINDOW <= bytes; w += WINDOW) {
    cr_assert_eq(mprotect(p + w + 4096, 4096, PROT_READ), 0);
    cr_assert_eq(mprotect(p + w + 4096, 4096, PROT_READ | PROT_WRITE), 0);
  }
}

/* A table with every page written, its huge pages split: the collapse puts them back (where the kernel gives
 * this process huge pages at all; elsewhere the case is skipped, saying why). */
Test(mem, a_split_table_is_put_back_on_huge_pages) {
  char *p = tfx_map_zeroed(BYTES);
  cr_assert_not_null(p);
  memset(p, 1, BYTES);
  long before = huge_kb_at(p);
  if (before <= 0) {
    tfx_unmap(p, BYTES);
    cr_skip_test("no transparent huge pages for this process (AnonHugePages %ld kB)", before);
  }
  split_windows(p, BYTES);
  p[4096] = 2;
  long split = huge_kb_at(p);
  tfx_mem_collapse(p, BYTES);
  long after = huge_kb_at(p);
  cr_expect_lt(split, before, "the split left %ld of %ld kB on huge pages: the case proves nothing", split, before);
  cr_expect_geq(after, before, "collapsed back to %ld kB of the %ld kB before the split", after, before);
  cr_expect(p[0] == 1 && p[4096] == 2 && p[BYTES - 1] == 1, "the values are not kept");
  tfx_unmap(p, BYTES);
}

/* A lazy table's mapping with one page written per window: nothing is collapsed, no page is made. */
Test(mem, a_window_with_a_missing_page_is_left_alone) {
  char *p = tfx_map_zeroed(BYTES);
  cr_assert_not_null(p);
  madvise(p, BYTES, MADV_NOHUGEPAGE); /* so a fault makes one small page, not a huge one */
  for (size_t w = 0; w < BYTES; w += WINDOW) {
    p[w + 4096] = 1;
  }
  size_t pages = resident_pages(p, BYTES);
  cr_assert_leq(pages, 2 * BYTES / WINDOW);
  madvise(p, BYTES, MADV_HUGEPAGE);
  tfx_mem_collapse(p, BYTES);
  cr_expect_eq(resident_pages(p, BYTES), pages, "the collapse made pages nobody wrote");
  tfx_unmap(p, BYTES);
}

/* NULL, a small range and an unaligned one do nothing harmful. */
Test(mem, ranges_too_small_or_null_are_ignored) {
  tfx_mem_collapse(NULL, BYTES);
  char small[4096] = {0};
  tfx_mem_collapse(small, sizeof small);
  char *p = tfx_map_zeroed(BYTES);
  cr_assert_not_null(p);
  tfx_mem_collapse(p + 4096, BYTES - 8192);
  cr_expect_eq(resident_pages(p, BYTES), 0, "an untouched mapping grew pages");
  tfx_unmap(p, BYTES);
}
