# Models in and out over RDMA (tests/integration/model.sh): the ASSIGNed values
# as one-sided reads see them, refused files change nothing, save/load/save is
# bit-exact.
rps_rdma_test(integration.model
  ${PROJECT_SOURCE_DIR}/tests/integration/model.sh ${CMAKE_BINARY_DIR}/bin rdma
  TIMEOUT 300)
