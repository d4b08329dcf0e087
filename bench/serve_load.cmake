# bench/serve: a keep-alive HTTP load generator (closed loop, or open loop at a fixed rate) for tfx-node serve.
add_executable(tfx-bench-serve-load EXCLUDE_FROM_ALL ${CMAKE_CURRENT_LIST_DIR}/serve_load.c)
target_link_libraries(tfx-bench-serve-load PRIVATE Threads::Threads)
