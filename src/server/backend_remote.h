/* The engine backend's remote tier (--remote): K/V pages shared through
 * Redis (src/remote) by every instance serving the same model file.  The
 * lookup runs on a connection thread before admission (prefetch), the
 * write-back on the step thread at a request's end (export); neither waits
 * on Redis past the client's timeout, and every failure is a miss.  The
 * rules (keys, namespaces, admission) are in docs/ARCHITECTURE.md, "The
 * engine backend's remote tier". */
#ifndef FKV_SERVER_BACKEND_REMOTE_H
#define FKV_SERVER_BACKEND_REMOTE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "model/model.h"
#include "remote/remote.h"
#include "server/backend.h"
#include "server/backend_engine_opts.h"

typedef struct fkv_eng_remote fkv_eng_remote;

/* What one request carries of the tier (set by fkv_eng_remote_begin). */
typedef struct fkv_eng_remote_req {
    char ns[FKV_REMOTE_NAME_MAX + 1]; /* the namespace of its tenant and salt */
    uint32_t hit;                     /* prompt tokens the lookup found (whole pages from 0) */
    uint32_t looked_up;               /* prompt pages the lookup counted as sightings (admission) */
} fkv_eng_remote_req;

/* Opens the tier of bo->remote for the engine e (created from cfg over
 * model m, read from model_path, served as `served`).  FKV_EINVAL (a bad
 * node list or client config), FKV_EIO (the model file unreadable),
 * FKV_ENOMEM, with err saying which. */
fkv_status fkv_eng_remote_open(const fkv_engine_backend_opts *bo, const fkv_engine_config *cfg, fkv_engine *e,
                               const fkv_llama *m, const char *model_path, const char *served, fkv_eng_remote **out,
                               char *err, size_t errlen);
/* After the engine is destroyed (its step thread puts).  NULL: nothing. */
void fkv_eng_remote_close(fkv_eng_remote *r);

/* The backend's prefetch and release (connection threads): the run of hits
 * from page 0 of the prompt's whole pages before its last token. */
void *fkv_eng_remote_prefetch(fkv_eng_remote *r, const fkv_gen_request *req);
void fkv_eng_remote_release(void *prefetched);

/* At submit: the request's namespace and lookup into rr; returns the K/V
 * of its rr->hit prompt tokens to import (NULL: none). */
const uint8_t *fkv_eng_remote_begin(fkv_eng_remote *r, const fkv_gen_request *req, fkv_eng_remote_req *rr);

/* The engine's on_export of a request begun with rr (step thread): queues
 * the full-precision pages past its hits that pass the admission filter. */
void fkv_eng_remote_export(fkv_eng_remote *r, const fkv_eng_remote_req *rr, const fkv_engine_export *x);

/* The tier's families of /metrics (src/metrics/remote_metrics.h);
 * hit_tokens: the engine's prompt tokens imported from the tier
 * (fkv_engine_stats.imported_tokens), the remote column of the hits per
 * tier beside the cache's device and host ones.
 * fairkv_remote_foreign_hits_total counts, among the leading pages a
 * lookup found, those this instance never wrote: another instance's (or a
 * previous process's) write-backs, read through a Bloom filter of the
 * keys it wrote (1 MiB; a false positive, about 1% at a million keys
 * written, only undercounts). */
void fkv_eng_remote_metrics(fkv_eng_remote *r, uint64_t hit_tokens, fkv_textbuf *out);

/* "redis://a:1,b:2" or "a:1,redis://b:2" -> "a:1,b:2" into out[cap];
 * -1 when empty or longer than cap - 1.  Exposed for tests. */
int fkv_eng_remote_nodes(const char *spec, char *out, size_t cap);

#endif
