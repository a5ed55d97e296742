# The core integration scenarios again, over RDMA: servers on rxe0, workers on
# rxe1 (tests/integration/cluster.sh with transport rdma).
foreach(mode bsp asp torn torn_sleep errors ssp ssp0 dead_bsp dead_ssp drop bsp_faults metrics elastic restart)
  rps_rdma_test(integration.${mode}
    ${PROJECT_SOURCE_DIR}/tests/integration/cluster.sh ${CMAKE_BINARY_DIR}/bin ${mode} rdma
    TIMEOUT 300)
endforeach()

# Not here yet: replicated shards (cluster.sh repl_bsp rdma). Run in the guest
# it did not get going: a server's second RDMA transport (the standby it hosts)
# failed rdma_create_qp with EINVAL and the workers' connects to server 0 timed
# out (docs/replication.md, "What is not (yet)").

# The job's optimizer spec per key (DECLARE with a spec, refusals with their
# reason), values read back with one-sided READs.
rps_rdma_test(integration.optim_spec
  ${PROJECT_SOURCE_DIR}/tests/integration/optim.sh ${CMAKE_BINARY_DIR}/bin spec rdma
  TIMEOUT 300)

# Not here: the restart-from-checkpoint scenario (tests/integration/restart.sh,
# a server killed in the middle of Fashion-MNIST training). It runs over TCP in
# the integration label. Over RDMA in the TCG-emulated guest a training step
# takes seconds (one epoch of 6,000 images took ~200 s), so its uninterrupted
# reference run alone exceeds the 300 s limit — both registrations failed that
# way in a clean CI run. Run it by hand on real RDMA hardware:
#   RDMAPS_RXE_IP0=<server ip> RDMAPS_RXE_IP1=<worker ip> \
#     tests/integration/restart.sh build/bin rdma 0.01 manual
