# The core integration scenarios again, over RDMA: servers on rxe0, workers on
# rxe1 (tests/integration/cluster.sh with transport rdma).
foreach(mode bsp asp errors ssp ssp0 dead_bsp dead_ssp drop bsp_faults metrics)
  rps_rdma_test(integration.${mode}
    ${PROJECT_SOURCE_DIR}/tests/integration/cluster.sh ${CMAKE_BINARY_DIR}/bin ${mode} rdma
    TIMEOUT 300)
endforeach()
