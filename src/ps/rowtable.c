/* Lazy embedding tables: an open-addressing id -> row map over slabs of rows. */
#include "ps/rowtable.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/mem.h"
#include "common/rand.h"
#include "config/config.h"
#include "nn/init.h"

#define SLAB_ROWS TFX_TABLE_SLAB_ROWS
#define HIST 1024 /* the buckets of a pass of the eviction's selection */
/* Slabs are carved from groups of this many: a group is 2 MiB x row_floats bytes, a whole number of huge pages,
 * mapped without reserving memory. Once a table's slabs hold HUGE_FROM bytes, its group is advised onto huge pages
 * (the rows made so far collapsed into them: MADV_COLLAPSE) and each new slab written in at once
 * (MADV_POPULATE_WRITE; rows made one by one were seen to get small pages), so a row's
 * update or read in a table larger than the TLB's reach costs no page walk of its own. A smaller table keeps small
 * pages: a huge page would cost it up to 2 MiB for a few rows (a model of 26 tables has 52 on each ps in sync). */
#define GROUP_SLABS 128
#define HUGE_FROM ((size_t)2 << 20)
#define HUGE_PAGE ((uintptr_t)2 << 20)
#define HUGE_MAP ((size_t)HUGE_PAGE)
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1; older glibc headers lack it */
#endif

/* A map cell: the id it holds beside its row index, so that a probe compares ids without a second miss on the rows'
 * id array (a table larger than the caches pays a miss for every array a lookup reads). */
typedef struct cell {
  int64_t id;
  uint32_t row; /* row index + 1, or 0 for an empty cell */
  uint32_t spare;
} cell;
_Static_assert(sizeof(cell) == 16, "tfx_table_cap_bound states 16 bytes a map cell");

struct tfx_rowtable {
  char *name, *init;
  int64_t vocab, fan_in, fan_out;
  uint64_t seed;
  int dim, n_slots;
  float slot_init;
  size_t row_floats;
  cell *map;                    /* id -> row index + 1 (0: an empty cell) */
  size_t map_cap;               /* cells: a power of two, or a capped table's final size */
  int map_mapped;               /* the map is a mapping of its own (a capped table's final one), not calloc's */
  float **slabs;                /* SLAB_ROWS rows each, GROUP_SLABS a mapping (the first of each owns it) */
  int64_t *ids;                 /* by row index */
  int64_t *touched;             /* by row index: the step of the last touch; a free row: -3 - the next free one */
  size_t n_slabs, n_rows, used; /* rows ever made (indices < n_rows), rows stored now */
  int64_t free_head;            /* the free row taken next (its touch step links to the one after), or -1 */
  size_t n_free;
  int64_t max_rows;                  /* 0: no cap */
  int track_gone;                    /* remember evicted ids for the next checkpoint delta */
  int64_t *gone;                     /* ids evicted since tfx_rowtable_mark */
  size_t n_gone, gone_cap, gone_max; /* remembered, room for, most remembered (0: no limit) */
  int gone_lost;                     /* memory ran out or max_rows / 2 reached: the next checkpoint must be whole */
  tfx_rowtable_counts counts;
  int64_t ttl_steps, expired_at; /* age limit, and the step of the last scan */
  int admit_min;                 /* admission: the count an id needs, or 0 */
  double admit_p;                /* admission: the probability per coming (>= 1: always) */
  uint64_t *door;                /* admission's doorkeeper: two filters of DOOR_BITS bits, or NULL */
  int door_cur;                  /* the filter new ids are marked in */
  size_t door_adds;              /* new ids marked in it since it was cleared */
  uint16_t *sketch;              /* admission's counts [DEPTH][WIDTH] past the doorkeeper (admit_min > 2), or NULL */
  uint32_t sketch_adds;          /* comings counted since the counts were last halved */
  int64_t marked_at;             /* the step of the last checkpoint (-1: none yet) */
  int deltas;                    /* deltas written since the last full checkpoint */
};

/* Frees a map of cap cells: unmapped when it is a mapping of its own, else freed. */
static void free_map(cell *map, size_t cap, int mapped) {
  if (mapped) {
    tfx_unmap(map, cap * sizeof *map);
  } else {
    free(map);
  }
}

/* The rows a capped table may make at most: its cap in whole slabs (0: no cap). */
static size_t cap_rows(const tfx_rowtable *t) {
  return ((size_t)t->max_rows + SLAB_ROWS - 1) / SLAB_ROWS * SLAB_ROWS;
}

/* The bytes of a group of slabs. */
static size_t group_bytes(const tfx_rowtable *t) {
  return (size_t)GROUP_SLABS * SLAB_ROWS * t->row_floats * sizeof(float);
}

int tfx_rowtable_create(const tfx_rowtable_spec *spec, tfx_rowtable **out, tfx_err *err) {
  if (spec->vocab <= 0 || spec->vocab > TFX_ROWTABLE_MAX_IDS || spec->dim <= 0 || spec->n_slots < 0 ||
      spec->n_slots > 2) {
    return tfx_err_set(err, TFX_EINVAL, "table %s: %lld ids of %d floats with %d slots is not a table", spec->name,
                       (long long)spec->vocab, spec->dim, spec->n_slots);
  }
  tfx_rowtable *t = calloc(1, sizeof *t);
  if (t) {
    t->name = strdup(spec->name);
    t->init = strdup(spec->init ? spec->init : "zeros");
    t->map_cap = 1024;
    t->map = calloc(t->map_cap, sizeof *t->map);
  }
  if (!t || !t->name || !t->init || !t->map) {
    tfx_rowtable_destroy(t);
    return tfx_err_set(err, TFX_ENOMEM, "table %s: out of memory", spec->name);
  }
  t->vocab = spec->vocab;
  t->fan_in = spec->fan_in;
  t->fan_out = spec->fan_out;
  t->seed = spec->seed;
  t->dim = spec->dim;
  t->n_slots = spec->n_slots;
  t->slot_init = spec->slot_init;
  t->row_floats = (size_t)spec->dim * (size_t)(1 + spec->n_slots);
  /* A cap above the table's ids can never bind: the cap is at most vocab rows, so that its books and map (sized
   * for the cap at once) reserve nothing the table may never use. */
  t->max_rows = spec->max_rows > 0 ? (spec->max_rows < spec->vocab ? spec->max_rows : spec->vocab) : 0;
  t->track_gone = spec->track_gone;
  t->gone_max = t->max_rows ? tfx_table_gone_max(t->max_rows) : 0;
  t->marked_at = -1;
  t->free_head = -1;
  t->ttl_steps = spec->ttl_steps > 0 ? spec->ttl_steps : 0;
  t->admit_min = spec->admit_min_count > 1 ? spec->admit_min_count : 0;
  t->admit_p = spec->admit_probability > 0 && spec->admit_probability < 1 ? spec->admit_probability : 1;
  int counts = t->admit_min > 2; /* a count-min past the doorkeeper */
  if (t->admit_min && (!(t->door = calloc(2 * TFX_ROWTABLE_DOOR_BITS / 64, 8)) ||
                       (counts && !(t->sketch = calloc(TFX_ROWTABLE_SKETCH_DEPTH * TFX_ROWTABLE_SKETCH_WIDTH, 2))))) {
    tfx_rowtable_destroy(t);
    return tfx_err_set(err, TFX_ENOMEM, "table %s: out of memory for the admission sketch", spec->name);
  }
  *out = t;
  return TFX_OK;
}

void tfx_rowtable_destroy(tfx_rowtable *t) {
  if (!t) {
    return;
  }
  for (size_t i = 0; i < t->n_slabs; i += GROUP_SLABS) {
    munmap(t->slabs[i], group_bytes(t));
  }
  free(t->slabs);
  if (t->max_rows) {
    tfx_unmap(t->ids, cap_rows(t) * sizeof *t->ids);
    tfx_unmap(t->touched, cap_rows(t) * sizeof *t->touched);
  } else {
    free(t->ids);
    free(t->touched);
  }
  if (t->gone_max) {
    tfx_unmap(t->gone, t->gone_max * sizeof *t->gone);
  } else {
    free(t->gone);
  }
  free(t->sketch);
  free(t->door);
  free_map(t->map, t->map_cap, t->map_mapped);
  free(t->name);
  free(t->init);
  free(t);
}

int tfx_rowtable_check_ids(const tfx_rowtable *t, const int64_t *ids, size_t n, tfx_err *err) {
  for (size_t i = 0; i < n; i++) {
    if (ids[i] < 0 || ids[i] >= t->vocab) {
      return tfx_err_set(err, TFX_EINVAL, "table %s: id %lld is outside [0, %lld)", t->name, (long long)ids[i],
                         (long long)t->vocab);
    }
    if (i && ids[i] <= ids[i - 1]) {
      return tfx_err_set(err, TFX_EINVAL, "table %s: id %lld %s (ids must be unique and ascending)", t->name,
                         (long long)ids[i], ids[i] == ids[i - 1] ? "is duplicated" : "comes after a larger one");
    }
  }
  return TFX_OK;
}

/* id's home cell: its hash scaled onto the cells (any count of them, not only a power of two). */
static size_t cell_of(const tfx_rowtable *t, int64_t id) {
  return (size_t)(((unsigned __int128)tfx_rand_mix((uint64_t)id) * t->map_cap) >> 64);
}

/* The cell after c, cyclically. */
static size_t next_cell(const tfx_rowtable *t, size_t c) {
  return c + 1 < t->map_cap ? c + 1 : 0;
}

static float *row_at(const tfx_rowtable *t, size_t r) {
  return t->slabs[r / SLAB_ROWS] + (r % SLAB_ROWS) * t->row_floats;
}

/* The cell holding id, or the empty cell where it would go. */
static size_t probe(const tfx_rowtable *t, int64_t id) {
  size_t c = cell_of(t, id);
  while (t->map[c].row && t->map[c].id != id) {
    c = next_cell(t, c);
  }
  return c;
}

float *tfx_rowtable_find(const tfx_rowtable *t, int64_t id) {
  uint32_t r = t->map[probe(t, id)].row;
  return r ? row_at(t, r - 1) : NULL;
}

int64_t tfx_rowtable_touched(const tfx_rowtable *t, int64_t id) {
  uint32_t r = t->map[probe(t, id)].row;
  return r ? t->touched[r - 1] : -1;
}

int64_t tfx_rowtable_scanned(const tfx_rowtable *t) {
  return t->expired_at;
}

void tfx_rowtable_set_scanned(tfx_rowtable *t, int64_t step) {
  t->expired_at = step;
}

void tfx_rowtable_read(const tfx_rowtable *t, int64_t id, float *out) {
  const float *row = tfx_rowtable_find(t, id);
  if (row) {
    memcpy(out, row, sizeof(float) * (size_t)t->dim);
  } else if (t->admit_min || t->admit_p < 1) {
    memset(out, 0, sizeof(float) * (size_t)t->dim); /* not admitted: the empty bag */
  } else {
    tfx_init_fill(t->init, t->name, t->seed, t->fan_in, t->fan_out, (size_t)id * (size_t)t->dim, (size_t)t->dim, out);
  }
}

/* A map of bytes (a multiple of HUGE_PAGE) in a mapping of its own aligned on a huge page and advised onto huge
 * pages: a probe into a map of 2 MiB or more is a random access whose page walk would otherwise cost as much as
 * the miss (calloc's heap, below tfx_calloc_large's 4 MiB, keeps it on small pages). NULL when out of memory. */
static cell *map_huge(size_t bytes) {
  char *p = mmap(NULL, bytes + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return NULL;
  }
  char *at = (char *)(((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1));
  if (at > p) {
    munmap(p, (size_t)(at - p));
  }
  munmap(at + bytes, (size_t)(p + HUGE_PAGE - at));
  madvise(at, bytes, MADV_HUGEPAGE); /* advice only: without THP nothing changes */
  return (cell *)at;
}

/* Doubles the map; a capped table's goes at once to its final size, the cells max_rows need (a mapping of its own,
 * so that its memory is its cells touched and goes back whole if the table is destroyed); a map of HUGE_MAP bytes
 * or more is a mapping of its own on huge pages. */
static int grow_map(tfx_rowtable *t) {
  size_t cap = t->map_cap * 2, last = t->max_rows ? tfx_table_map_cells(t->max_rows) : 0;
  int mapped = last > t->map_cap, huge = !mapped && cap * sizeof(cell) >= HUGE_MAP;
  cap = mapped ? last : cap;
  cell *map = mapped ? tfx_map_zeroed(cap * sizeof *map)
              : huge ? map_huge(cap * sizeof *map)
                     : tfx_calloc_large(cap, sizeof *map),
       *old = t->map;
  if (!map) {
    return -1;
  }
  size_t old_cap = t->map_cap;
  int old_mapped = t->map_mapped;
  t->map = map;
  t->map_cap = cap;
  t->map_mapped = mapped || huge;
  for (size_t c = 0; c < old_cap; c++) {
    if (old[c].row) {
      t->map[probe(t, old[c].id)] = old[c];
    }
  }
  free_map(old, old_cap, old_mapped);
  return 0;
}

/* A new group of slabs: address space only, no memory reserved; NULL when it runs out. */
static float *map_group(const tfx_rowtable *t) {
  void *p = mmap(NULL, group_bytes(t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

/* Advises slab k's group up to it onto huge pages and writes the slab in; first: the table's first such slab. */
static void huge_slab(const tfx_rowtable *t, float *slab, size_t k, int first) {
  size_t bytes = SLAB_ROWS * t->row_floats * sizeof(float);
  uintptr_t group = (uintptr_t)(slab - k * SLAB_ROWS * t->row_floats), end = group + group_bytes(t);
  uintptr_t to = ((uintptr_t)slab + bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
  to = to > end ? end : to;
  madvise((void *)group, to - group, MADV_HUGEPAGE); /* advice only: without THP nothing changes */
  if (first && (uintptr_t)slab > group) { /* the rows made before, on small pages (Linux 6.1+; else nothing) */
    madvise((void *)group, ((uintptr_t)slab - group) & ~(HUGE_PAGE - 1), MADV_COLLAPSE);
  }
  madvise(slab, bytes, MADV_POPULATE_WRITE); /* from a page boundary: bytes is a multiple of 16 KiB */
}

/* Adds a slab of rows (slabs, ids, touch steps and free list have room for it). */
static int add_slab(tfx_rowtable *t) {
  size_t k = t->n_slabs % GROUP_SLABS;
  float *slab = k ? t->slabs[t->n_slabs - 1] + SLAB_ROWS * t->row_floats : map_group(t);
  if (!slab) {
    return -1;
  }
  size_t held = t->n_slabs * SLAB_ROWS * t->row_floats * sizeof(float);
  if (held >= HUGE_FROM) {
    huge_slab(t, slab, k, held - SLAB_ROWS * t->row_floats * sizeof(float) < HUGE_FROM);
  }
  t->slabs[t->n_slabs++] = slab;
  return 0;
}

/* A capped table's ids, touch steps and free list at their final size at once, each a mapping of its own (pages
 * written as rows are made): no copy as they grow, no freed heap left behind. -1 when out of address space. */
static int map_books(tfx_rowtable *t) {
  size_t rows = cap_rows(t);
  t->ids = tfx_map_zeroed(rows * sizeof *t->ids);
  t->touched = tfx_map_zeroed(rows * sizeof *t->touched);
  return t->ids && t->touched ? 0 : -1;
}

/* One more slab of rows, and room for its rows in the books. -1 when out of memory. */
static int grow_rows(tfx_rowtable *t) {
  size_t n = t->n_slabs + 1, rows = n * SLAB_ROWS;
  float **slabs = realloc(t->slabs, n * sizeof *slabs);
  if (slabs) {
    t->slabs = slabs;
  }
  if (slabs && t->max_rows) {
    return !t->ids && map_books(t) ? -1 : add_slab(t);
  }
  int64_t *ids = slabs ? realloc(t->ids, rows * sizeof *ids) : NULL;
  if (ids) {
    t->ids = ids;
  }
  int64_t *touched = ids ? realloc(t->touched, rows * sizeof *touched) : NULL;
  if (touched) {
    t->touched = touched;
  }
  return touched ? add_slab(t) : -1;
}

/* A free row index (a freed one first), or -1 when out of memory. */
static int64_t take_row(tfx_rowtable *t) {
  if (t->n_free) { /* the last freed first */
    int64_t r = t->free_head;
    t->free_head = -3 - t->touched[r];
    t->n_free--;
    return r;
  }
  if (t->n_rows == t->n_slabs * SLAB_ROWS && (t->n_rows >= UINT32_MAX - SLAB_ROWS || grow_rows(t))) {
    return -1;
  }
  return (int64_t)t->n_rows++;
}

/* Empties cell c and moves later cells of its probe run back (no tombstones). */
static void remove_cell(tfx_rowtable *t, size_t c) {
  size_t cap = t->map_cap, next = next_cell(t, c);
  t->map[c].row = 0;
  while (t->map[next].row) {
    size_t home = cell_of(t, t->map[next].id);
    /* the entry at next may move to c when its home is not in (c, next] (cyclically) */
    size_t from_home = next >= home ? next - home : next + cap - home, from_c = next >= c ? next - c : next + cap - c;
    if (from_home >= from_c) {
      t->map[c] = t->map[next];
      t->map[next].row = 0;
      c = next;
    }
    next = next_cell(t, next);
  }
}

/* Remembers an evicted id for the next checkpoint delta (tracking tables only). */
static void remember_gone(tfx_rowtable *t, int64_t id) {
  if (!t->track_gone || t->gone_lost) {
    return;
  }
  if (t->n_gone == t->gone_cap) { /* a capped table's list: a mapping of its most at once (no heap left behind) */
    size_t cap = t->gone_max ? t->gone_max : t->gone_cap ? t->gone_cap * 2 : 1024;
    int64_t *g = cap <= t->gone_cap ? NULL
                 : t->gone_max    ? tfx_map_zeroed(cap * sizeof *g)
                                  : realloc(t->gone, cap * sizeof *g);
    if (!g) { /* out of memory, or a capped table's most: the next checkpoint is full */
      t->gone_lost = 1;
      return;
    }
    t->gone = g;
    t->gone_cap = cap;
  }
  t->gone[t->n_gone++] = id;
}

/* Drops stored row r: its map cell, its index to the free list. */
static void remove_row(tfx_rowtable *t, size_t r) {
  remove_cell(t, probe(t, t->ids[r]));
  remember_gone(t, t->ids[r]);
  t->touched[r] = -3 - t->free_head; /* <= -2: free, linking to the next free row (-1: none) */
  t->free_head = (int64_t)r;
  t->n_free++;
  t->used--;
  t->counts.evicted++;
}

/* The k-th smallest (0-based, k < rows stored) of the stored rows' touch steps, without a copy of them: a pass
 * over the rows finds their range, then each pass counts the steps in HIST buckets of that range and narrows it to
 * the bucket holding the k-th (one pass when the range spans at most HIST steps). */
static int64_t kth_touch(const tfx_rowtable *t, size_t k) {
  int64_t lo = INT64_MAX, hi = -1;
  for (size_t r = 0; r < t->n_rows; r++) {
    int64_t s = t->touched[r];
    lo = s >= 0 && s < lo ? s : lo;
    hi = s > hi ? s : hi;
  }
  size_t below = 0; /* stored rows touched before lo */
  while (lo < hi) {
    uint64_t width = ((uint64_t)(hi - lo) + HIST) / HIST;
    uint32_t hist[HIST] = {0};
    for (size_t r = 0; r < t->n_rows; r++) {
      int64_t s = t->touched[r];
      if (s >= lo && s <= hi) {
        hist[(uint64_t)(s - lo) / width]++;
      }
    }
    size_t b = 0;
    while (below + hist[b] <= k) {
      below += hist[b++];
    }
    lo += (int64_t)(b * width);
    hi = lo + (int64_t)width - 1 < hi ? lo + (int64_t)width - 1 : hi;
  }
  return lo;
}

static int cmp_id(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Of the stored rows touched at step `last`, the need-th lowest id (INT64_MAX when need covers them all, or memory
 * is short: then the rows' order decides): eviction among rows of one step goes by id, not by where a row sits, so a
 * copy of the table streamed to a backup, or restored from a checkpoint, evicts the rows its primary does. */
static int64_t tied_threshold(const tfx_rowtable *t, int64_t last, size_t need) {
  size_t n = 0;
  for (size_t r = 0; r < t->n_rows; r++) {
    n += t->touched[r] == last;
  }
  int64_t *ids = n > need && need ? malloc(n * sizeof *ids) : NULL;
  if (!ids) {
    return INT64_MAX;
  }
  n = 0;
  for (size_t r = 0; r < t->n_rows; r++) {
    if (t->touched[r] == last) {
      ids[n++] = t->ids[r];
    }
  }
  qsort(ids, n, sizeof *ids, cmp_id);
  int64_t below = ids[need - 1];
  free(ids);
  return below;
}

/* The cap is reached: evicts the max_rows / 16 (at least one) least recently touched rows, so a new row fits and
 * the next ones do too without ranking every row again. */
static void make_room(tfx_rowtable *t) {
  size_t k = (size_t)(t->max_rows / 16 > 0 ? t->max_rows / 16 : 1);
  k = k < t->used ? k : t->used;
  int64_t last = k ? kth_touch(t, k - 1) : -1;
  size_t dropped = 0;
  for (size_t r = 0; r < t->n_rows && dropped < k; r++) { /* those older than the k-th */
    if (t->touched[r] >= 0 && t->touched[r] < last) {
      remove_row(t, r);
      dropped++;
    }
  }
  int64_t below = tied_threshold(t, last, k - dropped);
  for (size_t r = 0; r < t->n_rows && dropped < k; r++) { /* then as many of its step as needed, lowest ids first */
    if (t->touched[r] == last && t->ids[r] <= below) {
      remove_row(t, r);
      dropped++;
    }
  }
}

/* Makes the row of id (absent), without values; its index, or -1 when out of memory. */
static int64_t insert(tfx_rowtable *t, int64_t id, int64_t step) {
  if (t->max_rows && (int64_t)t->used >= t->max_rows) {
    make_room(t);
  }
  if ((t->used + 1) * 10 > t->map_cap * 7 && grow_map(t)) {
    return -1;
  }
  int64_t r = take_row(t);
  if (r < 0) {
    return -1;
  }
  t->ids[r] = id;
  t->touched[r] = step;
  t->map[probe(t, id)] = (cell){id, (uint32_t)r + 1, 0};
  t->used++;
  t->counts.made++;
  return r;
}

/* A new row's values from the initializer, its slots at slot_init. */
static void initial_row(const tfx_rowtable *t, int64_t id, float *row) {
  tfx_init_fill(t->init, t->name, t->seed, t->fan_in, t->fan_out, (size_t)id * (size_t)t->dim, (size_t)t->dim, row);
  for (size_t i = (size_t)t->dim; i < t->row_floats; i++) {
    row[i] = t->slot_init;
  }
}

float *tfx_rowtable_touch(tfx_rowtable *t, int64_t id, int64_t step) {
  uint32_t have = t->map[probe(t, id)].row;
  if (have) {
    t->touched[have - 1] = step;
    return row_at(t, have - 1);
  }
  int64_t r = insert(t, id, step);
  if (r < 0) {
    return NULL;
  }
  float *row = row_at(t, (size_t)r);
  initial_row(t, id, row);
  return row;
}

int tfx_rowtable_add(tfx_rowtable *t, int64_t id, const float *g) {
  uint32_t have = t->map[probe(t, id)].row; /* a sum table's rows are all touched at step 0 */
  int64_t r = have ? (int64_t)have - 1 : insert(t, id, 0);
  if (r < 0) {
    return -1;
  }
  float *row = row_at(t, (size_t)r);
  for (size_t i = 0; i < t->row_floats; i++) { /* a new row: zeros plus g, bit for bit (0 + -0.0 is +0.0) */
    row[i] = (have ? row[i] : 0.0f) + g[i];
  }
  return 0;
}

int64_t tfx_rowtable_vocab(const tfx_rowtable *t) {
  return t->vocab;
}

size_t tfx_rowtable_rows(const tfx_rowtable *t) {
  return t->used;
}

size_t tfx_rowtable_row_floats(const tfx_rowtable *t) {
  return t->row_floats;
}

size_t tfx_rowtable_bytes(const tfx_rowtable *t) {
  size_t per_row = t->row_floats * sizeof(float) + 2 * sizeof(int64_t);
  return t->n_slabs * SLAB_ROWS * per_row + t->map_cap * sizeof(cell) + t->gone_cap * sizeof(int64_t) +
         (t->door ? 2 * TFX_ROWTABLE_DOOR_BITS / 8 : 0) +
         (t->sketch ? TFX_ROWTABLE_SKETCH_DEPTH * TFX_ROWTABLE_SKETCH_WIDTH * 2 : 0) + sizeof *t;
}

int tfx_rowtable_each(const tfx_rowtable *t, int (*fn)(int64_t id, const float *row, void *ctx), void *ctx) {
  for (size_t r = 0; r < t->n_rows; r++) {
    int rc = t->touched[r] >= 0 ? fn(t->ids[r], row_at(t, r), ctx) : 0;
    if (rc) {
      return rc;
    }
  }
  return 0;
}

int tfx_rowtable_put(tfx_rowtable *t, int64_t id, const float *row, tfx_err *err) {
  return tfx_rowtable_put_at(t, id, row, 0, err);
}

size_t tfx_rowtable_evict(tfx_rowtable *t, int64_t before) {
  size_t n = 0;
  for (size_t r = 0; r < t->n_rows; r++) {
    if (t->touched[r] < 0 || t->touched[r] >= before) {
      continue;
    }
    remove_row(t, r);
    n++;
  }
  return n;
}

tfx_rowtable_counts tfx_rowtable_get_counts(const tfx_rowtable *t) {
  return t->counts;
}

int tfx_rowtable_each_since(const tfx_rowtable *t, int64_t since, int (*fn)(int64_t id, const float *row, void *ctx),
                            void *ctx) {
  for (size_t r = 0; r < t->n_rows; r++) {
    int rc = t->touched[r] >= 0 && t->touched[r] >= since ? fn(t->ids[r], row_at(t, r), ctx) : 0;
    if (rc) {
      return rc;
    }
  }
  return 0;
}

size_t tfx_rowtable_rows_since(const tfx_rowtable *t, int64_t since) {
  size_t n = 0;
  for (size_t r = 0; r < t->n_rows; r++) {
    n += t->touched[r] >= 0 && t->touched[r] >= since;
  }
  return n;
}

int tfx_rowtable_gone(const tfx_rowtable *t, const int64_t **ids, size_t *n) {
  *ids = t->gone;
  *n = t->n_gone;
  return t->gone_lost ? -1 : 0;
}

void tfx_rowtable_mark(tfx_rowtable *t, int64_t step, int full) {
  t->n_gone = 0;
  t->gone_lost = 0;
  t->marked_at = step;
  t->deltas = full ? 0 : t->deltas + 1;
}

int64_t tfx_rowtable_marked(const tfx_rowtable *t, int *deltas) {
  *deltas = t->deltas;
  return t->marked_at;
}

void tfx_rowtable_drop(tfx_rowtable *t, int64_t id) {
  uint32_t have = t->map[probe(t, id)].row;
  if (have) {
    remove_row(t, have - 1);
  }
}

int tfx_rowtable_put_at(tfx_rowtable *t, int64_t id, const float *row, int64_t step, tfx_err *err) {
  if (tfx_rowtable_check_ids(t, &id, 1, err)) {
    return TFX_EINVAL;
  }
  float *dst = tfx_rowtable_touch(t, id, step);
  if (!dst) {
    return tfx_err_set(err, TFX_ENOMEM, "table %s: out of memory for row %lld", t->name, (long long)id);
  }
  memcpy(dst, row, t->row_floats * sizeof *dst);
  return TFX_OK;
}

/* Whether id is in either of the doorkeeper's filters; marks it in the current one, which takes the other's place
 * (that one cleared) after DOOR_BITS / 12 new ids. */
static int door_seen(tfx_rowtable *t, int64_t id) {
  const size_t words = TFX_ROWTABLE_DOOR_BITS / 64;
  uint64_t h1 = tfx_rand_mix((uint64_t)id ^ 0xD1B54A32D192ED03ULL), h2 = tfx_rand_mix(h1) | 1;
  uint64_t *cur = t->door + (size_t)t->door_cur * words, *prev = t->door + (size_t)(1 - t->door_cur) * words;
  int in_cur = 1, in_prev = 1;
  for (uint64_t i = 0; i < 8; i++) {
    size_t b = (size_t)((h1 + i * h2) & (TFX_ROWTABLE_DOOR_BITS - 1));
    uint64_t bit = (uint64_t)1 << (b & 63);
    in_cur &= (cur[b >> 6] & bit) != 0;
    in_prev &= (prev[b >> 6] & bit) != 0;
    cur[b >> 6] |= bit;
  }
  if (!in_cur && ++t->door_adds >= TFX_ROWTABLE_DOOR_BITS / 12) {
    memset(prev, 0, words * sizeof *prev);
    t->door_cur = 1 - t->door_cur;
    t->door_adds = 0;
  }
  return in_cur || in_prev;
}

/* Counts one coming of id past the doorkeeper in the count-min and returns its estimate. A conservative update
 * (only the least of its counters grow) and the halving of every count each WIDTH / 2 comings (TinyLFU's reset)
 * keep it from filling: an id must come admit_min_count - 1 more times within about that many such comings. */
static unsigned sketch_add(tfx_rowtable *t, int64_t id) {
  uint16_t *c[TFX_ROWTABLE_SKETCH_DEPTH];
  unsigned least = UINT16_MAX;
  for (int d = 0; d < TFX_ROWTABLE_SKETCH_DEPTH; d++) {
    uint64_t h = tfx_rand_mix((uint64_t)id ^ (0x9E3779B97F4A7C15ULL * (uint64_t)(d + 1)));
    c[d] = &t->sketch[(size_t)d * TFX_ROWTABLE_SKETCH_WIDTH + (h & (TFX_ROWTABLE_SKETCH_WIDTH - 1))];
    least = *c[d] < least ? *c[d] : least;
  }
  for (int d = 0; d < TFX_ROWTABLE_SKETCH_DEPTH && least < UINT16_MAX; d++) {
    *c[d] += *c[d] == least;
  }
  if (++t->sketch_adds >= TFX_ROWTABLE_SKETCH_WIDTH / 2) {
    for (size_t i = 0; i < (size_t)TFX_ROWTABLE_SKETCH_DEPTH * TFX_ROWTABLE_SKETCH_WIDTH; i++) {
      t->sketch[i] >>= 1;
    }
    t->sketch_adds = 0;
  }
  return least + (least < UINT16_MAX);
}

/* Whether a new id is admitted now: seen admit_min times (the doorkeeper, then the count-min), then the coin of (seed,
 * table, id, the table's count of admission decisions), the same run after run. */
static int admitted(tfx_rowtable *t, int64_t id) {
  unsigned n = !t->door || !door_seen(t, id) ? 1 : t->sketch ? 1 + sketch_add(t, id) : 2;
  if (t->admit_min && n < (unsigned)t->admit_min) {
    return 0;
  }
  uint64_t decisions = t->counts.made + t->counts.refused;
  return t->admit_p >= 1 || tfx_rand_uniform(t->seed ^ tfx_hash_str(t->name) ^ (uint64_t)id, decisions) < t->admit_p;
}

float *tfx_rowtable_update(tfx_rowtable *t, int64_t id, int64_t step, int *refused) {
  *refused = 0;
  if ((t->admit_min || t->admit_p < 1) && !t->map[probe(t, id)].row && !admitted(t, id)) {
    *refused = 1;
    t->counts.refused++;
    return NULL;
  }
  return tfx_rowtable_touch(t, id, step);
}

size_t tfx_rowtable_expire(tfx_rowtable *t, int64_t now) {
  int64_t every = t->ttl_steps / 4 > 0 ? t->ttl_steps / 4 : 1;
  if (!t->ttl_steps || now - t->expired_at < every) {
    return 0;
  }
  t->expired_at = now;
  return tfx_rowtable_evict(t, now - t->ttl_steps);
}

void tfx_rowtable_clear(tfx_rowtable *t) {
  memset(t->map, 0, t->map_cap * sizeof *t->map);
  t->n_rows = t->used = t->n_free = 0; /* the slabs stay, taken again from the first row */
  t->free_head = -1;
}

void tfx_rowtable_prefetch(const tfx_rowtable *t, int64_t id, int stage) {
  size_t c = cell_of(t, id);
  if (stage == 0) {
    __builtin_prefetch(&t->map[c]);
    return;
  }
  cell home = t->map[c]; /* the id's home cell: its row when no other id came first (a hint either way) */
  if (home.row && home.id == id) {
    const float *row = row_at(t, home.row - 1);
    size_t n = stage == 1 ? t->row_floats : (size_t)t->dim; /* an update: values and slots; a read: values */
    if (stage == 1) {
      __builtin_prefetch(&t->touched[home.row - 1], 1);
    }
    for (size_t i = 0; i < n; i += 16) { /* every cache line of them */
      __builtin_prefetch(row + i);
    }
    __builtin_prefetch(row + n - 1);
  }
}
