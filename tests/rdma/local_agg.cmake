# Aggregation on the host over RDMA (docs/local-aggregation.md): 4 workers on
# rxe1 in one guest, servers on rxe0; the leader pulls with one-sided READs
# into the shared values area (registered), pushes the host's sum by SEND.
foreach(mode exact kill kill_leader)
  rps_rdma_test(integration.local_agg_${mode}
    ${PROJECT_SOURCE_DIR}/tests/integration/local_agg.sh ${CMAKE_BINARY_DIR}/bin ${mode} rdma
    TIMEOUT 240)
endforeach()
