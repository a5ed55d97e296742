# Performance settings (issue 21): the default polling mode sleeps when idle
# (a pull-only run costs the server almost no CPU, busy-poll does). The QP
# retransmission settings are checked by test_rdma_qpopt.c.
rps_rdma_test(perf.idle_cpu ${CMAKE_CURRENT_SOURCE_DIR}/perf_cpu.sh ${CMAKE_BINARY_DIR}/bin
  TIMEOUT 120)
