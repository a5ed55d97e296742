/* The transport contract (tests/contract/transport_contract.c) over TCP. */
#define CONTRACT_TR "tcp"
#include "tests/contract/transport_contract.c"
