/*
 * table.h — wmctl's readable lists: columns padded to their widest cell,
 * a header row first.
 */
#ifndef WMCTL_TABLE_H
#define WMCTL_TABLE_H

#include <stdio.h>

struct table;

/* A table of ncols columns named by header (copied).  NULL when out of
 * memory. */
struct table *table_new(size_t ncols, const char *const *header);

/* Appends a row of ncols cells (copied; NULL prints as "-").  Returns 0,
 * or -1 when out of memory. */
int table_row_add(struct table *t, const char *const *cells);

/* Prints the header and the rows, two spaces between columns, the last
 * column unpadded. */
void table_print(const struct table *t, FILE *out);

void table_free(struct table *t);

#endif
