/* The transport contract (tests/contract/transport_contract.c) over TCP with
 * TLS 1.3 (RDMAPS_TLS=1, transport/tcp/tcp_tls.c). */
#define CONTRACT_TR  "tcp"
#define CONTRACT_TLS 1
#include "tests/contract/transport_contract.c"
