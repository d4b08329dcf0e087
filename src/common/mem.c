/* Large allocations (mem.h). */
#include "common/mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define HUGE_PAGE ((uintptr_t)2 << 20)

void *tfx_calloc_large(size_t n, size_t size) {
  void *p = calloc(n, size);
  size_t bytes = n * size; /* calloc has checked the product */
  if (p && bytes >= 2 * HUGE_PAGE) {
    uintptr_t from = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1), to = ((uintptr_t)p + bytes) & ~(HUGE_PAGE - 1);
    if (to > from) {
      madvise((void *)from, to - from, MADV_HUGEPAGE); /* advice only: without THP nothing changes */
    }
  }
  return p;
}
