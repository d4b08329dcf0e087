/* Checkpoints this process has already verified, so that pruning after each new checkpoint does not read and
 * checksum every kept one again (with keep_max 5 and 15 MB checkpoints, 75 MB read per checkpoint). A directory
 * counts as verified while the fingerprint of its files (name, inode, size, mtime) is the one it had when it was
 * verified: a part rewritten, truncated, added or removed since is verified again (tfx_ckpt_verify_once in
 * ckpt.c). Resuming and reading commands always verify in full. */
#include "store/ckptmemo.h"
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/rand.h"
#include "store/ckpt.h"

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
