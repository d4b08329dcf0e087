/* Unit tests of src/common/err.c: every code's name and text, tfx_err_set/tfx_err_sys formatting, NULL err. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"

static const struct {
  int code;
  const char *name;
  const char *text;
} codes[] = {
    {TFX_OK, "TFX_OK", "ok"},
    {TFX_EINVAL, "TFX_EINVAL", "invalid argument"},
    {TFX_ECONFIG, "TFX_ECONFIG", "bad configuration"},
    {TFX_EPROTO, "TFX_EPROTO", "protocol error"},
    {TFX_ESHAPE, "TFX_ESHAPE", "shape mismatch"},
    {TFX_EPEER, "TFX_EPEER", "peer unreachable or timed out"},
    {TFX_ECORRUPT, "TFX_ECORRUPT", "corrupt data"},
    {TFX_ESYS, "TFX_ESYS", "system error"},
    {TFX_ENOMEM, "TFX_ENOMEM", "out of memory"},
    {TFX_ENOTFOUND, "TFX_ENOTFOUND", "not found"},
    {TFX_ESTATE, "TFX_ESTATE", "wrong state"},
    {TFX_ELOSS, "TFX_ELOSS", "loss diverged"},
    {TFX_EINTR, "TFX_EINTR", "interrupted"},
    {TFX_ENAN, "TFX_ENAN", "NaN or Inf in the values"},
};
#define N_CODES ((int)(sizeof codes / sizeof codes[0]))

Test(err, every_code_has_its_name_and_text) {
  cr_assert_eq(N_CODES, TFX_ERR_COUNT, "the table above must list every code of TFX_ERRORS");
  for (int i = 0; i < N_CODES; i++) {
    cr_assert_eq(codes[i].code, i, "codes are 0, 1, 2... like errno (%s)", codes[i].name);
    cr_assert_str_eq(tfx_errname(codes[i].code), codes[i].name);
    cr_assert_str_eq(tfx_strerror(codes[i].code), codes[i].text);
  }
}

Test(err, ok_is_zero_and_errors_are_positive) {
  cr_assert_eq(TFX_OK, 0);
  for (int i = 1; i < N_CODES; i++) {
    cr_assert_gt(codes[i].code, 0);
  }
}

Test(err, out_of_range_codes_have_static_fallbacks) {
  const int bad[] = {-1, TFX_ERR_COUNT, TFX_ERR_COUNT + 1, INT_MAX, INT_MIN};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cr_assert_str_eq(tfx_strerror(bad[i]), "unknown error", "code %d", bad[i]);
    cr_assert_str_eq(tfx_errname(bad[i]), "TFX_E?", "code %d", bad[i]);
  }
}

Test(err, set_formats_the_message_and_returns_the_code) {
  tfx_err e;
  memset(&e, 0x5a, sizeof e);
  int rc = tfx_err_set(&e, TFX_ESHAPE, "layer %s: expected rank-%d input, got [%d, %d]", "dense_1", 1, 28, 28);
  cr_assert_eq(rc, TFX_ESHAPE);
  cr_assert_eq(e.code, TFX_ESHAPE);
  cr_assert_eq(e.sys_errno, 0);
  cr_assert_str_eq(e.msg, "layer dense_1: expected rank-1 input, got [28, 28]");
}

Test(err, set_overwrites_a_previous_message) {
  tfx_err e;
  tfx_err_set(&e, TFX_EPEER, "a long first message that should vanish entirely");
  tfx_err_set(&e, TFX_EPROTO, "short %d%%", 5);
  cr_assert_eq(e.code, TFX_EPROTO);
  cr_assert_str_eq(e.msg, "short 5%");
}

Test(err, set_truncates_to_the_buffer_and_terminates) {
  char big[1000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  tfx_err e;
  tfx_err_set(&e, TFX_EINVAL, "key %s", big);
  cr_assert_eq(strlen(e.msg), sizeof e.msg - 1);
  cr_assert_eq(strncmp(e.msg, "key xxx", 7), 0);
}

Test(err, null_err_is_allowed_everywhere) {
  cr_assert_eq(tfx_err_set(NULL, TFX_EPEER, "peer %s", "ps:0"), TFX_EPEER);
  errno = EACCES;
  cr_assert_eq(tfx_err_sys(NULL, TFX_ESYS, "open %s", "/x"), TFX_ESYS);
  tfx_err_clear(NULL);
}

Test(err, sys_appends_the_saved_errno_text) {
  int fd = open("/nonexistent-tfx-dir/file", O_RDONLY);
  cr_assert_lt(fd, 0);
  tfx_err e;
  int rc = tfx_err_sys(&e, TFX_ESYS, "open %s", "/nonexistent-tfx-dir/file");
  cr_assert_eq(rc, TFX_ESYS);
  cr_assert_eq(e.sys_errno, ENOENT);
  char want[256];
  snprintf(want, sizeof want, "open /nonexistent-tfx-dir/file: %s", strerror(ENOENT));
  cr_assert_str_eq(e.msg, want);
}

Test(err, sys_with_errno_zero_appends_nothing) {
  tfx_err e;
  errno = 0;
  tfx_err_sys(&e, TFX_ESYS, "plain");
  cr_assert_eq(e.sys_errno, 0);
  cr_assert_str_eq(e.msg, "plain");
}

Test(err, sys_keeps_the_errno_of_the_failure_not_of_formatting) {
  /* The arguments are evaluated before the call, the errno of the failed call must be the one reported. */
  tfx_err e;
  errno = EPIPE;
  tfx_err_sys(&e, TFX_EPEER, "send to %s", "worker 3");
  cr_assert_eq(e.sys_errno, EPIPE);
  cr_assert(strstr(e.msg, strerror(EPIPE)) != NULL, "msg: %s", e.msg);
  cr_assert(strstr(e.msg, "send to worker 3: ") == e.msg, "msg: %s", e.msg);
}

Test(err, sys_truncates_safely_when_the_message_fills_the_buffer) {
  char big[400];
  memset(big, 'y', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  tfx_err e;
  errno = ENOENT;
  tfx_err_sys(&e, TFX_ESYS, "%s", big);
  cr_assert_eq(strlen(e.msg), sizeof e.msg - 1);
  cr_assert_eq(e.sys_errno, ENOENT);
}

Test(err, clear_resets_everything) {
  tfx_err e;
  errno = EIO;
  tfx_err_sys(&e, TFX_ESYS, "disk");
  tfx_err_clear(&e);
  cr_assert_eq(e.code, TFX_OK);
  cr_assert_eq(e.sys_errno, 0);
  cr_assert_str_eq(e.msg, "");
}

Test(err, assert_true_does_nothing) {
  int x = 3;
  TFX_ASSERT(x == 3);
  cr_assert_eq(x, 3);
}

Test(err, assert_false_aborts, .signal = SIGABRT) {
  int x = 3;
  TFX_ASSERT(x == 4);
}
