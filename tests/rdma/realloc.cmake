# Pull buffers freed and allocated again at the same address, over RDMA
# (itest-worker realloc, tests/integration/itest_worker.c): every value read
# must land in the new pages, registered (rps_worker_register) or not.
rps_rdma_test(integration.realloc
  ${PROJECT_SOURCE_DIR}/tests/integration/cluster.sh ${CMAKE_BINARY_DIR}/bin realloc rdma
  TIMEOUT 300)
