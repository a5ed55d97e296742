# Ring all-reduce over RDMA (RDMAPS_RING_TRANSPORT=rdma: the workers' ring
# frames are RDMA SENDs through transport/rdma): integer sums exact with 3
# workers, uneven lengths; a killed worker reported by the others; a length
# mismatch refused on every rank.
rps_rdma_test(integration.allreduce_exact
  ${PROJECT_SOURCE_DIR}/tests/integration/allreduce.sh ${CMAKE_BINARY_DIR}/bin exact 3 rdma
  TIMEOUT 300)
rps_rdma_test(integration.allreduce_dead
  ${PROJECT_SOURCE_DIR}/tests/integration/allreduce.sh ${CMAKE_BINARY_DIR}/bin dead 3 rdma
  TIMEOUT 300)
rps_rdma_test(integration.allreduce_mismatch
  ${PROJECT_SOURCE_DIR}/tests/integration/allreduce.sh ${CMAKE_BINARY_DIR}/bin mismatch 3 rdma
  TIMEOUT 300)
