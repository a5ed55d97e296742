# The rdmaps Python package's pytest suite (python/tests) over RDMA: servers
# on rxe0 (RDMAPS_RXE_IP0), workers on rxe1 (RDMAPS_RXE_IP1), in the guest.
# The guest runs the host's /usr/bin/python3 with numpy (its root is the
# host's, read-only: no bytecode, no pytest cache; pytest's tmp_path is in
# the guest's /tmp).
if(TARGET rdmaps_py_core)
  rps_rdma_test(python.pytest env PYTHONPATH=${CMAKE_BINARY_DIR}/python
    RPS_BIN_DIR=${CMAKE_BINARY_DIR}/bin RDMAPS_TEST_TRANSPORT=rdma PYTHONDONTWRITEBYTECODE=1
    ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider -o cache_dir=/tmp/pytest-cache
    ${PROJECT_SOURCE_DIR}/python/tests TIMEOUT 900)
endif()
