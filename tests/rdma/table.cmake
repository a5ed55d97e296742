# Sparse tables over RDMA (tests/integration/table.sh with transport rdma):
# declarations, row pulls and pushes as SENDs, exact rows from three workers,
# bad input refused; torn: rows read one-sided under continuous updates are
# never torn, and the servers' CPU during pull-only reads is printed; index:
# rows a worker never saw looked up by READs of the servers' row index.
foreach(mode bsp asp torn index)
  rps_rdma_test(integration.table_${mode}
    ${PROJECT_SOURCE_DIR}/tests/integration/table.sh ${CMAKE_BINARY_DIR}/bin ${mode} rdma
    TIMEOUT 120)
endforeach()
