# tfx-bench-compute: training-step throughput and the sgemm ceiling per model (run through bench/compute).
add_executable(tfx-bench-compute ${CMAKE_CURRENT_LIST_DIR}/compute.c)
target_link_libraries(tfx-bench-compute PRIVATE tfx_nn tfx_config tfx_common)
