# tfx-bench-transport: the CPU of one message pair through ZeroMQ beside a bare Unix socket (#26's floor).
add_executable(tfx-bench-transport EXCLUDE_FROM_ALL ${CMAKE_CURRENT_LIST_DIR}/transport.c)
target_link_libraries(tfx-bench-transport PRIVATE PkgConfig::ZMQ)
