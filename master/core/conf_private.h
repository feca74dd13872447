/*
 * conf_private.h — what the three files of the configuration share, and
 * nothing outside master/core/conf*.c may include.
 *
 * conf_keys.c holds the table of keys, conf_values.c turns text into the
 * values of struct conf and back (with the syntax checks the table's rows
 * name), conf.c reads the sources in order (file, environment, -o) and
 * checks the rules between keys.  The table is reached through
 * conf_key_table/conf_key_count here rather than conf_keys(), so that the
 * sources and the values index it as one array, as the rows' order is the
 * order of struct conf's origins.
 */
#ifndef WM_MASTER_CONF_PRIVATE_H
#define WM_MASTER_CONF_PRIVATE_H

#include "master/core/conf.h"

#include <stddef.h>
#include <sys/types.h>

/* Room for one reason ("'x' is not one of: a, b, c") in messages. */
#define CONF_WHY_MAX 256

/* The table of keys (conf_keys.c) and its length; conf->origin[i] is the
 * origin of conf_key_table[i]. */
extern const struct conf_key conf_key_table[];
extern const size_t conf_key_count;

/* The index of key `name` in conf_key_table, or -1. */
ssize_t conf_key_index(const char *name);

/*
 * Parses text v as key k's value and stores it in c, freeing the value it
 * replaces.  Returns 0, or -1 with what is wrong in why (and c unchanged).
 */
int conf_value_set(struct conf *c, const struct conf_key *k, const char *v,
                   char *why, size_t whylen);

/* Frees key k's value in c (strings and lists) and leaves it empty. */
void conf_value_free(struct conf *c, const struct conf_key *k);

/*
 * The syntax checks of string values that the table's rows name in
 * `.check` (see struct conf_key): each returns 0, or -1 with what is wrong
 * in why.  conf_check_instance also checks the host name that instance is
 * derived from.
 */
int conf_check_listen(const char *v, char *why, size_t whylen);
int conf_check_group(const char *v, char *why, size_t whylen);
int conf_check_instance(const char *v, char *why, size_t whylen);
int conf_check_networks(const char *v, char *why, size_t whylen);
int conf_check_modules(const char *v, char *why, size_t whylen);
int conf_check_topic_patterns(const char *v, char *why, size_t whylen);
int conf_check_nats_url(const char *v, char *why, size_t whylen);
int conf_check_nats_bucket_prefix(const char *v, char *why, size_t whylen);
int conf_check_word(const char *v, char *why, size_t whylen);
int conf_check_user(const char *v, char *why, size_t whylen);

#endif /* WM_MASTER_CONF_PRIVATE_H */
