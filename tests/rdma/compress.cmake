# Compression chosen per key over RDMA (tests/integration/compress.sh): the
# compressed PUSH frames as RDMA SENDs, every key's values exact, the wire
# counters.
rps_rdma_test(integration.compress
  ${PROJECT_SOURCE_DIR}/tests/integration/compress.sh ${CMAKE_BINARY_DIR}/bin rdma
  TIMEOUT 120)
