# Sparse tables over RDMA (tests/integration/table.sh with transport rdma):
# declarations, row pulls and pushes as SENDs, exact rows from three workers,
# bad input refused.
foreach(mode bsp asp)
  rps_rdma_test(integration.table_${mode}
    ${PROJECT_SOURCE_DIR}/tests/integration/table.sh ${CMAKE_BINARY_DIR}/bin ${mode} rdma
    TIMEOUT 120)
endforeach()
