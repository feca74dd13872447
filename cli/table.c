/*
 * table.c — wmctl's readable lists (see table.h).  Cells are kept until the
 * whole table is known, since a column is as wide as its widest cell.
 * Widths count bytes: the daemon's names, ids and states are ASCII.
 */
#include "config.h"

#include "cli/table.h"

#include <stdlib.h>
#include <string.h>

struct table {
    size_t ncols;
    size_t nrows; /* the header included */
    size_t cap;
    char **cells; /* nrows * ncols, row after row */
};

static int
append(struct table *t, const char *const *cells)
{
    if (t->nrows == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        char **p = realloc(t->cells, cap * t->ncols * sizeof *p);
        if (p == NULL)
            return -1;
        t->cells = p;
        t->cap = cap;
    }
    char **row = t->cells + t->nrows * t->ncols;
    for (size_t i = 0; i < t->ncols; i++) {
        row[i] = strdup(cells[i] ? cells[i] : "-");
        if (row[i] == NULL) {
            while (i > 0)
                free(row[--i]);
            return -1;
        }
    }
    t->nrows++;
    return 0;
}

struct table *
table_new(size_t ncols, const char *const *header)
{
    struct table *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->ncols = ncols;
    if (append(t, header) != 0) {
        table_free(t);
        return NULL;
    }
    return t;
}

int
table_row_add(struct table *t, const char *const *cells)
{
    return append(t, cells);
}

void
table_print(const struct table *t, FILE *out)
{
    size_t *width = calloc(t->ncols, sizeof *width);
    if (width == NULL)
        return;
    for (size_t r = 0; r < t->nrows; r++)
        for (size_t c = 0; c < t->ncols; c++) {
            size_t n = strlen(t->cells[r * t->ncols + c]);
            if (n > width[c])
                width[c] = n;
        }
    for (size_t r = 0; r < t->nrows; r++) {
        for (size_t c = 0; c < t->ncols; c++) {
            const char *cell = t->cells[r * t->ncols + c];
            if (c + 1 == t->ncols)
                fprintf(out, "%s\n", cell);
            else
                fprintf(out, "%-*s  ", (int)width[c], cell);
        }
    }
    free(width);
}

void
table_free(struct table *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    free(t);
}
