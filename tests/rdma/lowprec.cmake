# Low-precision pulls over RDMA (tests/integration/lowprec.sh): the workers
# READ each slice's bf16 / fp16 copy one-sided (through bounce blocks, with
# the clock wait and torn-chunk re-reads of any slice) and widen it: values
# exact where the precision represents them, the converters' rounding of the
# float32 master otherwise; refusals with their reasons.
rps_rdma_test(integration.lowprec
  ${PROJECT_SOURCE_DIR}/tests/integration/lowprec.sh ${CMAKE_BINARY_DIR}/bin rdma
  TIMEOUT 90)
