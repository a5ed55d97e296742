# test_rdma_replay.c records a legitimate connect and replays it through the
# library's own connect path: link-time wrappers around librdmacm's
# rdma_connect (the connect request's private data) and src/auth.c's
# rps_auth_challenge_answer (the PROOF). It also runs a real server
# in-process (rps_server_serve: server/server_int.h, the server's view).
if(TARGET rdma_test_rdma_replay)
  target_link_options(rdma_test_rdma_replay PRIVATE
    "LINKER:--wrap=rdma_connect,--wrap=rps_auth_challenge_answer")
  target_link_libraries(rdma_test_rdma_replay PRIVATE rps_view_test_server)
endif()
