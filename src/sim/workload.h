/* Workloads of the simulator: the seed's synthetic mix and real traces.
 *
 * A workload is an array of requests (sched.h's fkv_req, caller part filled)
 * sorted by arrival.  Request ids are index + 1.
 *
 * Seed workload (the mix the seed evaluates on): a request's class is drawn first, 60%
 * short, 30% medium, 10% long; its total tokens (prompt + output) are then
 * uniform within the class: short [16, 127], medium [128, 512], long
 * [513, 2048] (2048 = a common context limit of the Llama-2 era).  The
 * output takes a fraction f ~ U[0.2, 0.5) of the total (at least 1 token);
 * the prompt is the rest.  The class boundaries are those of the cache's
 * class rule (short < 128 <= medium <= 512 < long) applied to prompt +
 * output.  Clients (for VTC) are uniform over n_clients.
 *
 * Traces (format recognized from the first line; see fkv_trace_format):
 *   azure     TIMESTAMP,ContextTokens,GeneratedTokens  (Splitwise trace;
 *             "2023-11-16 18:15:46.6805900" local times, made relative)
 *   mooncake  JSON lines {timestamp (ms), input_length, output_length,
 *             hash_ids (one id per 512-token prompt block)}
 *   plain     arrival_ms,prompt_tokens,output_tokens[,client[,shared_tokens]]
 *             (ours; '#' starts a comment line).  shared_tokens (<= prompt)
 *             leading prompt tokens are the same for every request of the
 *             client (what `fairkv load --write-trace` prompts share): the
 *             full cache pages inside them are shared in the prefix cache,
 *             the rest of the prompt is unique to the request.
 * A request with 0 output tokens is read as 1 (every request emits at least
 * its first token).  Clients of trace requests: index mod n_clients.
 *
 * Sessions of traces (for `--tenant-assign session`; trace.c gives the
 * measurements behind the rule): a Mooncake request's session is its first
 * hash_id past the leading blocks more than half of the trace's requests
 * share (a common system prompt; its first 512-token prompt block when
 * there is none: requests that share it share their prompt's head); a
 * plain trace's is its client column.  An Azure
 * trace, a plain trace without clients, or a Mooncake trace with a request
 * without hash_ids has none (session NULL).
 */
#ifndef FKV_SIM_WORKLOAD_H
#define FKV_SIM_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "fairkv.h"
#include "fairkv_eval.h"
#include "sched/sched.h"
#include "sim/req_tokens.h"

typedef enum fkv_trace_format {
    FKV_TRACE_AUTO = 0,
    FKV_TRACE_AZURE,
    FKV_TRACE_MOONCAKE,
    FKV_TRACE_PLAIN
} fkv_trace_format;

typedef struct fkv_workload {
    char name[64];
    fkv_req *reqs; /* [n], sorted by arrival_ns */
    size_t n;
    /* where the requests' token ids come from (req_tokens.h): NULL when
     * each has only a token seed, its fkv_req.tag; else src[n_src], its
     * tag the index there */
    fkv_req_src *src;
    size_t n_src;
    uint64_t *blocks; /* storage of all requests' block ids (src's) */
    size_t n_blocks, cap_blocks;
    uint32_t block_tokens; /* tokens per block id (512 for Mooncake) */
    /* generator workloads (tenants, chat): requests carry their tenant ids */
    uint32_t n_tenants;    /* 0: tenants are assigned by the bench options */
    uint32_t n_light;      /* tenants 1..n_light are light, the rest heavy (tenants) */
    /* chat: session (0-based) and turn (0 = first) of each request, or NULL;
     * traces: the recovered session (above), turn NULL */
    uint32_t *session, *turn;
    size_t n_sessions;
    /* traces: [n_sessions] the key each session was recovered from (first
     * hash_id or client), so its tenant follows from the key, not from the
     * order sessions arrive in; NULL otherwise */
    uint64_t *session_key;
} fkv_workload;

/* Fairness workloads (docs/EVALUATION.md, "Fairness workloads", gives
 * every default and its source).
 *
 * tenants: n_light light tenants (ids 1..n_light) send the seed's short and
 * medium requests (the seed's 60:30 ratio, so 2/3 short); n_heavy heavy
 * tenants (ids after them) send heavy_frac of the requests, long prompts
 * uniform in [heavy_prompt_lo, heavy_prompt_hi] and outputs uniform in
 * [heavy_out_lo, heavy_out_hi] (RAG / summarization).  A request's tenant is
 * drawn independently of the others, so each tenant's arrivals are a
 * thinned Poisson stream, Poisson too.  alike: the same requests (same
 * sizes, same order), their tenant drawn uniformly over all tenants from
 * another stream, so the total load is the same and no tenant differs.
 * Clients (VTC) are (tenant - 1) mod n_clients. */
typedef struct fkv_tenants_params {
    uint32_t n_light, n_heavy;
    double heavy_frac;
    uint32_t heavy_prompt_lo, heavy_prompt_hi;
    uint32_t heavy_out_lo, heavy_out_hi;
    int alike;
} fkv_tenants_params;
void fkv_tenants_params_default(fkv_tenants_params *p);
fkv_status fkv_workload_tenants(size_t n, uint64_t seed, uint32_t n_clients, const fkv_tenants_params *p,
                                fkv_workload *w);

/* chat: multi-turn sessions.  A session draws its tenant (uniform over
 * n_tenants), its class and final length as the seed draws a request's
 * (60/30/10, uniform within the class), and its turns T = 1 + a geometric
 * number with mean turns_mean - 1 (at most turns_max <= 64 and at most half the
 * final length).  The final length is split into T chunks (2 tokens each
 * plus the rest in proportion to weights uniform in [0.5, 1.5)); a chunk is
 * a user message and the model's answer, the answer taking the seed's
 * output fraction f ~ U[0.2, 0.5).  Turn k's prompt is the whole history
 * (chunks 0..k-1) plus its user message; its output is its answer; so the
 * last turn's prompt + output is the final length.  Every turn of a session
 * has the session's token seed (its tag) and no blocks, so fkv_req_token gives the
 * same ids at the same positions in every turn: turn k's prompt begins
 * with turn k-1's prompt and output, id for id.
 * Timing (open loop): sessions start as a Poisson process at session_rate
 * per second; turn k arrives think_k after turn k-1's arrival, think_k ~
 * exponential with mean think_mean_s (at least 1 ns), whether or not turn
 * k-1 has finished.  Sessions are generated until n requests exist (whole
 * sessions, so w->n may exceed n by less than turns_max); requests are
 * sorted by arrival (ties by session, then turn), ids index + 1.  Sizes come
 * from one stream and times from another, so another rate moves the same
 * requests in time. */
typedef struct fkv_chat_params {
    uint32_t n_tenants;
    double turns_mean;
    uint32_t turns_max;
    double think_mean_s;
    double session_rate;
} fkv_chat_params;
void fkv_chat_params_default(fkv_chat_params *p);
fkv_status fkv_workload_chat(size_t n, uint64_t seed, uint32_t n_clients, const fkv_chat_params *p, fkv_workload *w);

/* Class of a request of `total` tokens (prompt + output). */
fkv_class fkv_sim_class(uint32_t total);

/* Sizes of n seed-workload requests; all arrive at 0 until
 * fkv_workload_poisson sets arrivals. */
fkv_status fkv_workload_seed(size_t n, uint64_t seed, uint32_t n_clients, fkv_workload *w);

/* Poisson arrivals at `rate` requests per second (exponential gaps from the
 * stream of `seed`). */
void fkv_workload_poisson(fkv_workload *w, double rate, uint64_t seed);

/* Multiplies every arrival time by `factor` (> 0). */
void fkv_workload_scale_time(fkv_workload *w, double factor);

/* Parses a trace held in memory.  `fname` names it in messages
 * ("file:line: ...").  limit > 0 keeps the first `limit` requests.
 * FKV_EPARSE on malformed input. */
fkv_status fkv_trace_parse(const char *buf, size_t len, const char *fname, fkv_trace_format fmt,
                           size_t limit, uint32_t n_clients, fkv_workload *w, char *err,
                           size_t errlen);
fkv_status fkv_trace_load(const char *path, fkv_trace_format fmt, size_t limit, uint32_t n_clients,
                          fkv_workload *w, char *err, size_t errlen);
/* "azure", "mooncake", "plain", "auto" -> format; -1 if unknown. */
int fkv_trace_format_parse(const char *s);
const char *fkv_trace_format_name(fkv_trace_format f);

/* The token sources of w's requests, block ids of block_tokens tokens. */
fkv_sim_tokens fkv_workload_tokens(const fkv_workload *w, uint32_t block_tokens);

void fkv_workload_free(fkv_workload *w);

/* Duration from the first to the last arrival, ns. */
int64_t fkv_workload_span(const fkv_workload *w);

#endif
