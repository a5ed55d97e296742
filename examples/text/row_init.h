/* A table row's initial value, as the servers create it (table.h: "a value
 * that depends only on the table's seed and the id"): text-train --local
 * needs the very same rows without servers. */
#ifndef TEXT_ROW_INIT_H
#define TEXT_ROW_INIT_H

#include <stdint.h>

#include <rdmaps/table.h>

void text_row_init(const struct rps_table_spec *spec, uint64_t id, float *row);

#endif
