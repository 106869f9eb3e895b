/* The ids the engine backend gives a request's names: the fairness client
 * index of its "user" (first come, 63 own indexes), and the tenant and
 * cache_salt ids that namespace the prefix cache and the remote tier
 * (SHA-256, so a chosen name cannot collide with another's). */
#ifndef FKV_SERVER_CLIENT_NAMES_H
#define FKV_SERVER_CLIENT_NAMES_H

#include <stdint.h>

typedef struct fkv_client_names {
    char *name[64]; /* the names given indexes 1..63, in order of arrival */
    int n;
} fkv_client_names; /* zero-initialized: empty */

/* The client index (0..63) of a name: 0 for none, the first 63 distinct
 * names 1..63 in order of arrival, later ones share 1..63 by hash.  Not
 * thread-safe: the caller serializes. */
uint64_t fkv_client_index(fkv_client_names *c, const char *name);
void fkv_client_names_free(fkv_client_names *c);

/* The id of a name in a domain ("fairkv tenant", "fairkv cache_salt"): the
 * first 8 bytes of SHA-256(domain, NUL, name), never 0; 0 for no name. */
uint64_t fkv_name_id(const char *domain, const char *name);

#endif
