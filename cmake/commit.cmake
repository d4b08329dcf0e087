# Writes OUT (tfx_commit.h) with the source tree's git commit, whether it has uncommitted changes, and the build
# flags; rewritten only when its text changes, so a build after a new commit relinks only what uses it.
# Usage: cmake -DSRC=dir -DOUT=file -DFLAGS=text -P commit.cmake
execute_process(COMMAND git -C "${SRC}" rev-parse HEAD OUTPUT_VARIABLE commit RESULT_VARIABLE rc
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
else()
  execute_process(COMMAND git -C "${SRC}" status --porcelain --untracked-files=no OUTPUT_VARIABLE changes
                  ERROR_QUIET)
  if(NOT changes STREQUAL "")
    set(commit "${commit}-dirty")
  endif()
endif()
set(text "#define TFX_COMMIT \"${commit}\"\n#define TFX_BUILD_FLAGS \"${FLAGS}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
