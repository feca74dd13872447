/*
 * spell.h — the closest of a list of names to a misspelt word, for the
 * "did you mean ...?" of a message: a configuration key, a member of an
 * API object, a wmctl command.  Part of lib/ (the leaf library: small rules
 * the master, wmctl and the hosts share; it includes nothing of the
 * project but itself).
 *
 * One rule everywhere, so that the daemon and wmctl suggest alike: a name
 * is close when it is at most two edits away (an insertion, a deletion, a
 * substitution or two neighbours swapped, ASCII case ignored) and fewer
 * edits than the word is long, or when one of the two begins with the
 * other and the shorter has at least three characters (`timeout` for
 * `timeout_ms`, `creat` for `create`).
 */
#ifndef WM_LIB_SPELL_H
#define WM_LIB_SPELL_H

#include <stddef.h>

/* The optimal-string-alignment distance of a and b (insertions,
 * deletions, substitutions and swaps of adjacent characters each count
 * one; ASCII case ignored).  SIZE_MAX when either has 64 bytes or more:
 * such names are not compared. */
size_t spell_distance(const char *a, const char *b);

/* How close name is to word as its misspelling: a score (lower is
 * closer; 0 only for equal names), or SIZE_MAX when name is not close by
 * the rule above. */
size_t spell_score(const char *word, const char *name);

/* The closest of names[0..n) to word, the first of equal scores, or NULL
 * when none is close.  NULL entries are skipped. */
const char *spell_closest(const char *word, const char *const *names, size_t n);

#endif /* WM_LIB_SPELL_H */
