/*
 * spell.c — the closest name to a misspelt word (spell.h).
 *
 * The distance is computed over three rows of at most 64 entries on the
 * stack: the names it is meant for (keys, members, commands) are short,
 * and a longer word is never anybody's typo of them.  Scores are twice the
 * edits, and a prefix match scores three: between one edit and two, so
 * that a one-letter typo of a name beats a name the word begins, which
 * beats two edits (`mime` is `mime_type` before `name`).
 */
#include "config.h"

#include "lib/spell.h"

#include <stdint.h>
#include <string.h>

#define SPELL_MAX 64
/* At most this many edits make a typo. */
#define SPELL_EDITS 2
/* The shorter of a prefix pair has at least this many characters. */
#define SPELL_PREFIX_MIN 3
/* A prefix pair's score: between one edit's (2) and two's (4). */
#define SPELL_PREFIX_SCORE 3

static char
lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

static size_t
min3(size_t a, size_t b, size_t c)
{
    size_t m = a < b ? a : b;
    return m < c ? m : c;
}

size_t
spell_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t rows[3][SPELL_MAX + 1];
    size_t *before = rows[0], *prev = rows[1], *cur = rows[2];

    if (la >= SPELL_MAX || lb >= SPELL_MAX)
        return SIZE_MAX;
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = lower(a[i - 1]) != lower(b[j - 1]);
            cur[j] = min3(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost);
            if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
                lower(a[i - 2]) == lower(b[j - 1]) &&
                before[j - 2] + 1 < cur[j])
                cur[j] = before[j - 2] + 1;
        }
        size_t *t = before;
        before = prev;
        prev = cur;
        cur = t;
    }
    return prev[lb];
}

/* Whether the shorter of a and b begins the other, ASCII case ignored,
 * and has at least SPELL_PREFIX_MIN characters. */
static int
prefix_pair(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), n = la < lb ? la : lb;

    if (n < SPELL_PREFIX_MIN)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (lower(a[i]) != lower(b[i]))
            return 0;
    return 1;
}

size_t
spell_score(const char *word, const char *name)
{
    size_t d = spell_distance(word, name);

    if (d <= SPELL_EDITS && d < strlen(word))
        return 2 * d;
    if (d != SIZE_MAX && prefix_pair(word, name))
        return SPELL_PREFIX_SCORE;
    return SIZE_MAX;
}

const char *
spell_closest(const char *word, const char *const *names, size_t n)
{
    const char *best = NULL;
    size_t best_score = SIZE_MAX;

    for (size_t i = 0; i < n; i++) {
        if (names[i] == NULL)
            continue;
        size_t s = spell_score(word, names[i]);
        if (s < best_score) {
            best_score = s;
            best = names[i];
        }
    }
    return best;
}
