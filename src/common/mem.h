/* Large zeroed allocations for tables that are read and written at random rows (embedding tables and their
 * optimizer slots): backed by transparent huge pages where the kernel offers them, which cuts the TLB misses of a
 * random row access. */
#ifndef TFX_MEM_H
#define TFX_MEM_H

#include <stddef.h>

/* calloc(n, size), with the kernel advised to back it by huge pages when it spans at least 4 MiB; caller owns
 * the memory (free()); NULL when it runs out. */
void *tfx_calloc_large(size_t n, size_t size);

#endif
