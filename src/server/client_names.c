/* Client indexes and name ids (see client_names.h). */
#include "server/client_names.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

/* FNV-1a of a string: the fallback spread of names past the table */
static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

uint64_t fkv_client_index(fkv_client_names *c, const char *name)
{
    if (!name || !*name) return 0;
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->name[i], name)) return (uint64_t)i + 1 < 64 ? (uint64_t)i + 1 : 63;
    if (c->n < 63) {
        char *copy = strdup(name);
        if (copy) {
            c->name[c->n++] = copy;
            return (uint64_t)c->n;
        }
    }
    return 1 + fnv1a(name) % 63;
}

void fkv_client_names_free(fkv_client_names *c)
{
    for (int i = 0; i < c->n; i++) free(c->name[i]);
    c->n = 0;
}

/* A cryptographic hash because the id is a prefix-cache namespace: a user
 * who could pick a name colliding with another's would be matched against
 * that user's private prefixes (with 64 bits, chance collisions need ~2^32
 * names). */
uint64_t fkv_name_id(const char *domain, const char *name)
{
    if (!name || !*name) return 0;
    size_t dl = strlen(domain), nl = strlen(name);
    unsigned char *buf = malloc(dl + 1 + nl), md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    uint64_t id = 0;
    if (buf) {
        memcpy(buf, domain, dl);
        buf[dl] = 0; /* "a" + "bc" and "ab" + "c" differ */
        memcpy(buf + dl + 1, name, nl);
        if (EVP_Digest(buf, dl + 1 + nl, md, &n, EVP_sha256(), NULL) == 1 && n >= 8) memcpy(&id, md, 8);
        free(buf);
    }
    if (!id) id = fnv1a(name); /* out of memory or no digest: still per name */
    return id ? id : 1;
}
