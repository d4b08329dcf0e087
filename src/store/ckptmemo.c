/* Checkpoints this process has already verified, so that pruning after each new checkpoint does not read and
 * checksum every kept one again (with keep_max 5 and 15 MB checkpoints, 75 MB read per checkpoint). A directory
 * counts as verified while the fingerprint of its files (name, inode, size, mtime) is the one it had when it was
 * verified: a part rewritten, truncated, added or removed since is verified again (tfx_ckpt_verify_once). A
 * checkpoint the master has just collected is taken as verified by its sizes (tfx_ckpt_memo_accept). Pruning
 * (tfx_ckpt_prune) lives here, its one user. Resuming and reading commands always verify in full. */
#include "store/ckptmemo.h"
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "common/rand.h"
#include "store/best.h"
#include "store/ckpt.h"
#include "store/store_impl.h"

enum { MEMO_SLOTS = 64 };

typedef struct memo_entry {
  char dir[1100];
  uint64_t print;
  int64_t step;
  int n_ps;
} memo_entry;

static memo_entry memo[MEMO_SLOTS];
static int memo_next;
static uint64_t memo_hits;
static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;

uint64_t tfx_ckpt_memo_print(const char *dir) { /* whatever order readdir gives the files in */
  DIR *d = opendir(dir);
  if (!d) {
    return 0;
  }
  uint64_t print = 1;
  struct dirent *e;
  struct stat st;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.' || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      continue;
    }
    uint64_t mtime = (uint64_t)st.st_mtim.tv_sec * 1000000000ULL + (uint64_t)st.st_mtim.tv_nsec;
    uint64_t h = tfx_hash_str(e->d_name) ^ tfx_rand_mix((uint64_t)st.st_ino) ^ tfx_rand_mix((uint64_t)st.st_size * 31);
    print += tfx_rand_mix(tfx_rand_mix(h) ^ tfx_rand_mix(mtime));
  }
  closedir(d);
  return print;
}

/* Whether dir with this fingerprint was verified: its step and shard count. Called with memo_lock held. */
static int memo_find(const char *dir, uint64_t print, int64_t *step, int *n_ps) {
  for (int i = 0; i < MEMO_SLOTS; i++) {
    if (memo[i].print == print && strcmp(memo[i].dir, dir) == 0) {
      *step = memo[i].step;
      *n_ps = memo[i].n_ps;
      memo_hits++;
      return 1;
    }
  }
  return 0;
}

int tfx_ckpt_memo_find(const char *dir, uint64_t print, int64_t *step, int *n_ps) {
  pthread_mutex_lock(&memo_lock);
  int known = print && memo_find(dir, print, step, n_ps);
  pthread_mutex_unlock(&memo_lock);
  return known;
}

void tfx_ckpt_memo_keep(const char *dir, uint64_t print, int64_t step, int n_ps) {
  pthread_mutex_lock(&memo_lock);
  memo_entry *e = &memo[memo_next];
  memo_next = (memo_next + 1) % MEMO_SLOTS;
  snprintf(e->dir, sizeof e->dir, "%s", dir);
  e->print = print;
  e->step = step;
  e->n_ps = n_ps;
  pthread_mutex_unlock(&memo_lock);
}

uint64_t tfx_ckpt_verify_hits(void) {
  pthread_mutex_lock(&memo_lock);
  uint64_t hits = memo_hits;
  pthread_mutex_unlock(&memo_lock);
  return hits;
}

int tfx_ckpt_verify_once(const char *dir, int64_t *step, int *n_ps) {
  uint64_t print = tfx_ckpt_memo_print(dir);
  if (print && tfx_ckpt_memo_find(dir, print, step, n_ps)) {
    return TFX_OK;
  }
  int rc = tfx_ckpt_verify(dir, step, n_ps, NULL);
  if (rc == TFX_OK && print && print == tfx_ckpt_memo_print(dir)) { /* nothing changed while it was read */
    tfx_ckpt_memo_keep(dir, print, *step, *n_ps);
  }
  return rc;
}

int tfx_ckpt_memo_accept(const char *dir, tfx_err *err) {
  uint64_t print = tfx_ckpt_memo_print(dir);
  int64_t step;
  int n_ps;
  int rc = tfx_ckpt_check(dir, 0, &step, &n_ps, err);
  if (rc == TFX_OK && print && print == tfx_ckpt_memo_print(dir)) {
    tfx_ckpt_memo_keep(dir, print, step, n_ps);
  }
  return rc;
}

/* Removes a checkpoint directory and the files in it. */
static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) {
    return;
  }
  struct dirent *de;
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.') {
      continue;
    }
    char p[1400];
    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

void tfx_ckpt_prune(const char *run_dir, int keep) {
  int64_t *steps = NULL, floor = INT64_MAX; /* the oldest step a kept checkpoint's chain of deltas needs */
  int count = store__ckpt_steps(run_dir, &steps), kept = 0;
  int64_t best = tfx_best_step(run_dir); /* checkpoint.keep_best: kept beside the newest `keep` */
  for (int i = 0; i < count; i++) {
    char d[1100];
    int64_t s;
    int nps;
    tfx_ckpt_dir(run_dir, steps[i], d, sizeof d);
    int complete = tfx_ckpt_verify_once(d, &s, &nps) == TFX_OK;
    if (complete && (kept < keep || steps[i] == best || steps[i] >= floor)) {
      kept += steps[i] != best;
      floor = tfx_ckpt_chain_floor(d, floor); /* checkpoint.incremental: its deltas' bases stay too */
    } else if (complete || (kept > 0 && !tfx_ckpt_has_manifest(d) && steps[i] < floor)) {
      /* beyond keep_max, or an unfinished write older than a kept one and no link of its chain; a corrupt one
       * stays */
      remove_dir(d);
    }
  }
  free(steps);
}
