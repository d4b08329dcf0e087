# bench/curve: round trips through net.c's sockets, plaintext beside CURVE (what encryption costs on the wire).
add_executable(tfx-bench-curve EXCLUDE_FROM_ALL ${CMAKE_CURRENT_LIST_DIR}/curve.c)
target_link_libraries(tfx-bench-curve PRIVATE tfx_net tfx_config tfx_common)
