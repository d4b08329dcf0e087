# bench/datapath: push+pull round trips against a real `tfx-node --role=ps`, beside a raw ZeroMQ echo and memcpy.
add_executable(tfx-bench-datapath EXCLUDE_FROM_ALL ${CMAKE_CURRENT_LIST_DIR}/datapath.c)
target_link_libraries(tfx-bench-datapath PRIVATE tfx_master tfx_psclient tfx_nn tfx_common)
