/* Large allocations (mem.h). */
#include "common/mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE_PAGE ((uintptr_t)2 << 20)
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1; older glibc headers lack it */
#endif

/* The 2 MiB-aligned part [*from, *to) of [p, p + bytes); 0 when p is NULL or the range spans less than 4 MiB. */
static int huge_windows(void *p, size_t bytes, uintptr_t *from, uintptr_t *to) {
  if (!p || bytes < 2 * HUGE_PAGE) {
    return 0;
  }
  *from = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
  *to = ((uintptr_t)p + bytes) & ~(HUGE_PAGE - 1);
  return *to > *from;
}

/* Advises [p, p + bytes) onto huge pages (the 2 MiB-aligned part) when it spans at least 4 MiB. */
static void advise_huge(void *p, size_t bytes, int advice) {
  uintptr_t from, to;
  if (huge_windows(p, bytes, &from, &to)) {
    madvise((void *)from, to - from, advice); /* advice only: without THP nothing changes */
  }
}

void *tfx_map_zeroed(size_t bytes) {
  void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return NULL;
  }
  advise_huge(p, bytes, MADV_HUGEPAGE);
  return p;
}

/* Whether every page of a 2 MiB window is resident (vec: the window's mincore bytes). */
static int window_resident(const unsigned char *vec) {
  for (size_t i = 0; i < HUGE_PAGE / 4096; i++) {
    if (!(vec[i] & 1)) {
      return 0;
    }
  }
  return 1;
}

void tfx_mem_collapse(void *p, size_t bytes) {
  uintptr_t from, to;
  if (sysconf(_SC_PAGESIZE) != 4096 || !huge_windows(p, bytes, &from, &to)) {
    return;
  }
  unsigned char vec[HUGE_PAGE / 4096];
  for (uintptr_t w = from; w < to; w += HUGE_PAGE) {
    if (!mincore((void *)w, HUGE_PAGE, vec) && window_resident(vec)) {
      madvise((void *)w, HUGE_PAGE, MADV_COLLAPSE); /* an older kernel refuses it: the pages stay as they are */
    }
  }
}

void tfx_unmap(void *p, size_t bytes) {
  if (p) {
    munmap(p, bytes ? bytes : 1);
  }
}

void *tfx_calloc_large(size_t n, size_t size) {
  void *p = calloc(n, size);
  advise_huge(p, n * size, MADV_HUGEPAGE); /* calloc has checked the product */
  return p;
}
