/* The transport contract (tests/contract/transport_contract.c) over RDMA, in
 * the SoftRoCE guest. */
#define CONTRACT_TR "rdma"
#include "tests/contract/transport_contract.c"
