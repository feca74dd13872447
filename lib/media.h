/*
 * media.h — what an event's content type says about its data, as the
 * master's CloudEvents codec and the Python host both read it (DESIGN §3),
 * part of lib/ (the leaf library: small rules the master, wmctl and the
 * hosts share; it includes nothing of the project but itself).
 *
 * Only the type/subtype counts: blanks around it and parameters after ';'
 * are ignored, letters compare without case.  A type can be both
 * (text/x+json): the two predicates stay apart because their callers
 * differ on which wins (the master's codec takes JSON first, the Python
 * host's decoding text first).
 */
#ifndef WM_LIB_MEDIA_H
#define WM_LIB_MEDIA_H

#include <stdbool.h>
#include <stddef.h>

/* Whether data of the content type ct[0..len) is JSON: ct absent (NULL),
 * application/json, or any type/subtype ending in "+json". */
bool media_is_json(const char *ct, size_t len);

/* Whether data of the content type ct[0..len) is text: text/anything.  An
 * absent type (NULL) is not (it means JSON). */
bool media_is_text(const char *ct, size_t len);

#endif /* WM_LIB_MEDIA_H */
