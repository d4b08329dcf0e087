/* Large zeroed allocations for tables that are read and written at random rows (embedding tables and their
 * optimizer slots): backed by transparent huge pages where the kernel offers them, which cuts the TLB misses of a
 * random row access. */
#ifndef TFX_MEM_H
#define TFX_MEM_H

#include <stddef.h>

/* calloc(n, size), with the kernel advised to back it by huge pages when it spans at least 4 MiB; caller owns
 * the memory (free()); NULL when it runs out. */
void *tfx_calloc_large(size_t n, size_t size);
/* A zeroed mapping of bytes that reserves no memory up front (MAP_NORESERVE): pages exist once written, so a
 * table of 2^30 rows of which a process touches a few costs what it touches. Advised onto huge pages like
 * tfx_calloc_large. Caller owns it: tfx_unmap with the same size. NULL when the address space runs out. */
void *tfx_map_zeroed(size_t bytes);
/* Puts the 2 MiB windows of [p, p + bytes) whose every page is resident back onto huge pages now (MADV_COLLAPSE,
 * Linux 6.1): a forked copy's copy-on-write splits huge pages into small ones, which the kernel merges back only
 * slowly. Windows with a missing page are left alone (a collapse would fill them); best effort. */
void tfx_mem_collapse(void *p, size_t bytes);
/* Releases a tfx_map_zeroed mapping; NULL does nothing. */
void tfx_unmap(void *p, size_t bytes);

#endif
