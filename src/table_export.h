/* Tables in a model export's .npz (src/table_export.c, docs/tables.md):
 * "table<T>.ids" (uint64, n) and "table<T>.rows" (float32, n x dim). */
#ifndef RPS_SRC_TABLE_EXPORT_H
#define RPS_SRC_TABLE_EXPORT_H

#include <stddef.h>
#include <stdint.h>

/* name is "table<T>.ids" (*rows_p 0) or "table<T>.rows" (*rows_p 1), T a
 * decimal uint32 without leading zeros: 1 with *table_p; else 0. Either
 * pointer may be NULL. */
int rps_table_export_name(const char *name, uint32_t *table_p, int *rows_p);
/* The two names of table t into ids / rows (each of len bytes). */
void rps_table_export_names(uint32_t t, char *ids, char *rows, size_t len);

#endif
