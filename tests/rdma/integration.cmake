# The core integration scenarios again, over RDMA: servers on rxe0, workers on
# rxe1 (tests/integration/cluster.sh with transport rdma).
foreach(mode bsp asp errors ssp ssp0 dead_bsp dead_ssp drop bsp_faults metrics elastic)
  rps_rdma_test(integration.${mode}
    ${PROJECT_SOURCE_DIR}/tests/integration/cluster.sh ${CMAKE_BINARY_DIR}/bin ${mode} rdma
    TIMEOUT 300)
endforeach()

# A server killed in the middle of Fashion-MNIST training, restored from its
# checkpoint; workers reconnect over RDMA (tests/integration/restart.sh).
foreach(mode manual launch)
  rps_rdma_test(integration.restart_${mode}
    ${PROJECT_SOURCE_DIR}/tests/integration/restart.sh ${CMAKE_BINARY_DIR}/bin rdma 0.01 ${mode}
    TIMEOUT 600)
endforeach()
