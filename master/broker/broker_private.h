/*
 * broker_private.h — what the embedded broker's files lend each other
 * (broker_embedded.c, broker_storage.c); nothing outside master/broker/
 * includes it.  Callers of broker.h never see the journal.
 */
#ifndef WM_MASTER_BROKER_PRIVATE_H
#define WM_MASTER_BROKER_PRIVATE_H

struct ebroker;
struct journal;

/* The journal of an embedded broker (broker_embedded.c). */
struct journal *broker_journal(const struct ebroker *b);

#endif /* WM_MASTER_BROKER_PRIVATE_H */
