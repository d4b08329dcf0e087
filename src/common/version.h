/* The binary's provenance: its version, the git commit it was built from and its build flags (generated at each
 * build by cmake/commit.cmake). Returned strings are static; nothing to free. Thread-safe. */
#ifndef TFX_COMMON_VERSION_H
#define TFX_COMMON_VERSION_H

/* The cluster protocol's version, carried in every envelope (net/wire.h refuses another; proto/README.md says
 * when it changes). */
#define TFX_PROTOCOL_VERSION 4

/* The release version, e.g. "0.1.0" (static). */
const char *tfx_version(void);

/* The source commit as 40 hex digits, with "-dirty" when the tree had uncommitted changes, or "unknown" when the
 * source was not a git checkout (static). */
const char *tfx_version_commit(void);

/* The build type, compiler and sanitizer flags, e.g. "RelWithDebInfo gcc-12.2.0 sanitize=off" (static). */
const char *tfx_version_build(void);

/* One line: "tfx-node VERSION (commit COMMIT; BUILD; protocol N)" (static). */
const char *tfx_version_line(void);

#endif
