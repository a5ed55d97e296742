# Sparse tables over RDMA (tests/integration/table.sh with transport rdma):
# declarations, row pulls and pushes as SENDs, exact rows from three workers,
# bad input refused; torn: rows read one-sided under continuous updates are
# never torn, and the servers' CPU during pull-only reads is printed; index:
# rows a worker never saw looked up by READs of the servers' row index;
# prec: fp16 / bf16 rows read one-sided (16 bits an element) and widened;
# evict: cached slots of evicted rows, reused for other ids, never give a wrong row;
# evrace: one-sided READs racing eviction, slot reuse and updates: every row exact.
foreach(mode bsp asp torn index prec evict evrace)
  rps_rdma_test(integration.table_${mode}
    ${PROJECT_SOURCE_DIR}/tests/integration/table.sh ${CMAKE_BINARY_DIR}/bin ${mode} rdma
    TIMEOUT 120)
endforeach()
