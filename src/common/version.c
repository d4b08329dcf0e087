/* The binary's provenance (version.h), from the generated tfx_commit.h. */
#include "common/version.h"

#define TFX_STR_(x) #x
#define TFX_STR(x) TFX_STR_(x)

#include "common/tfx_commit.h" /* generated in the build tree (cmake/commit.cmake) */

const char *tfx_version(void) {
  return TFX_VERSION;
}

const char *tfx_version_commit(void) {
  return TFX_COMMIT;
}

const char *tfx_version_build(void) {
  return TFX_BUILD_FLAGS;
}

const char *tfx_version_line(void) {
  return "tfx-node " TFX_VERSION " (commit " TFX_COMMIT "; " TFX_BUILD_FLAGS "; protocol " TFX_STR(TFX_PROTOCOL_VERSION) ")";
}
