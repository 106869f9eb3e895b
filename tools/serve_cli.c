/* `fairkv serve`: options, backend creation, and the signal-driven
 * lifecycle (SIGTERM or SIGINT: stop accepting, finish running requests,
 * exit 0). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "server/server.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: fairkv serve [options]\n"
            "  --host ADDR          address to bind (default 127.0.0.1; IPv4 or IPv6 literal)\n"
            "  --port N             TCP port (default 8080; 0 = any free port, printed)\n"
            "  --api-key KEY        require 'Authorization: Bearer KEY' on /v1/ (default: none;\n"
            "                       also read from FAIRKV_API_KEY)\n"
            "  --max-body BYTES     request body limit (default 1048576; larger: 413)\n"
            "  --max-prompt TOKENS  prompt limit (default: the model's context - 1; longer: 400)\n"
            "  --max-queue N        waiting requests (default 256; beyond: 429 + Retry-After)\n"
            "  --max-n N            choices per request (default 8, at most 64)\n"
            "  --max-connections N  concurrent connections (default 256)\n"
            "  --max-connections-per-ip N  concurrent connections from one client address\n"
            "                       (default 64; 0 = no limit, e.g. behind a reverse proxy)\n"
            "  --read-timeout S     a request's headers and body must arrive within S seconds of\n"
            "                       its connection (or its previous answer); slower ones are\n"
            "                       closed (default 10; 0 = no deadline; generation time not counted)\n"
            "  --retry-after S      Retry-After of 429/503 answers (default 1)\n"
            "  --drain-timeout S    on SIGTERM, wait at most S seconds for running requests (default 60)\n"
            "  --chat-template NAME prompt format of /v1/chat/completions: chatml, llama2, llama3, phi3,\n"
            "                       phi3.5, zephyr, mistral-v7, gemma (default: recognized from the\n"
            "                       model's tokenizer.chat_template; chatml when it has none, and\n"
            "                       with a warning when it has one not recognized)\n"
            "  --model FILE         GGUF model served by the engine backend (the default with --model)\n");
    fprintf(f,
            /* three strings: one would pass C's 4095-character limit */
            "  --kv-budget BYTES    engine: KV cache bytes, K+V of all layers (default 64MiB; K, KiB, M, MiB, G, GiB)\n"
            "  --kv-dtype f32|f16   engine: K/V storage type (default f32)\n"
            "  --policy NAME        engine: eviction policy (default flru)\n"
            "  --quotas on|off|tenant  engine: per-request quotas around the policy (on), or fair shares\n"
            "                       per 'user' (tenant: weighted max-min over demand; the default)\n"
            "  --shares guarantee|target  engine: tenant shares as guarantees (no 'user' at or under its\n"
            "                       share loses memory to another; the default) or as targets\n"
            "  --victim last-started|fewest-output|fair  engine: preemption victim (default fair)\n"
            "  --reclaim LIST       engine: before preempting, take memory from the fair victim by\n"
            "                       quantize8,quantize4,offload,drop,evict in that order (default\n"
            "                       quantize8,quantize4,evict; none: preempt at once)\n"
            "  --host-bytes BYTES   engine: host tier for offloaded chunks (default 0: none)\n"
            "  --host-kv BYTES      engine: host tier that idle evicted chunks are demoted to and found\n"
            "                       again in by later prompts (default 0: none)\n"
            "  --tier-admission off|tinylfu|seen  engine: below the device only what a TinyLFU filter\n"
            "                       has seen often enough: host demotions (tinylfu: as often as the chunk it\n"
            "                       would push out; seen: twice) and Redis write-back (twice) (default off)\n"
            "  --host-policy lru|s3fifo|arc  engine: the --host-kv tier's eviction order (default s3fifo;\n"
            "                       the Redis tier evicts by Redis's own maxmemory-policy)\n"
            "  --remote redis://HOST:PORT[,HOST:PORT...]  engine: remote KV tier in Redis, shared by\n"
            "                       every instance of the same model (default: none)\n"
            "  --remote-cluster     engine: the --remote nodes are seeds of a Redis Cluster\n"
            "  --remote-timeout-ms N  engine: bound of a request's remote lookup (default 100)\n"
            "  --remote-ttl S       engine: expiry of the chunks written (default 3600)\n"
            "  --remote-quota SIZE  engine: bytes each tenant (user, cache_salt) may hold in the remote tier;\n"
            "                       past it its least recently used leaf pages are deleted (default: none)\n"
            "  --dynamic-chunking on|off  engine: variable chunk sizes (default off)\n");
    fprintf(f,
            "  --chunk-tokens N     engine: chunk size, or base size when dynamic (default 64)\n"
            "  --quant off|always|under-pressure  engine: cold-chunk quantization (default\n"
            "                       under-pressure)\n"
            "  --quant-dtype int4|int8|fp8  engine: the cold chunks' precision (default int4; int8 with\n"
            "                       --backend-opt quant_warm=N, the int8 -> int4 ladder)\n"
            "  --quant-hot N        engine: newest tokens kept full precision (default 64); while\n"
            "                       quantizing, a step computes at most N tokens\n"
            "  --threads N          engine: forward and attention threads (default 1)\n"
            "  --ctx N              engine: context length, overriding the model's llama.context_length\n"
            "                       (warns when beyond it)\n"
            "  --max-batch-tokens N engine: new + recomputed tokens per step (default 256; also -b,\n"
            "                       --batch-size)\n"
            "  -ub, --ubatch-size N engine: accepted when >= the step's token budget (the step's whole\n"
            "                       batch is one forward pass); a smaller one is refused\n"
            "  --max-running N      engine: running requests at most (default 16; also -np, --parallel)\n"
            "  --admission fcfs|vtc engine: admission order; vtc shares service among 'user' ids\n"
            "  --step-share off|drr engine: drr shares each step's prefill budget among 'user' ids by\n"
            "                       weighted deficit round robin after decodes (default drr)\n"
            "  --admit-reclaim on|off  engine: within-share 'user' ids first, taking memory from\n"
            "                       over-share ones (default off)\n"
            "  --step-bound K       engine: while a within-share request waits for its first token, cap\n"
            "                       the step's predicted time at K x its own step's (default 2; 0 = off)\n"
            "  --step-cost auto|flops|tokens|C0,C1,C2[,C3]  engine: how the bound predicts a step's time:\n"
            "                       fitted on its own steps, the model's FLOPs (default), its tokens,\n"
            "                       or coefficients in ms from `fairkv bench --calibrate MODEL --coeffs-out FILE`\n"
            "  --step-log FILE      engine: write one line per step (tokens, requests, attention work,\n"
            "                       wall ns) for `fairkv bench --calibrate-log FILE`\n"
            "  --backend NAME       token generator (default: engine with --model, else fake; known:");
    for (const char *const *n = fkv_backend_names(); *n; n++) fprintf(f, " %s", *n);
    fprintf(f, ")\n"
               "  --backend-opt K=V    backend option, repeatable (fake: pace_ms, max_batch,\n"
               "                       max_waiting, pages, max_context; engine: the options above\n"
               "                       as key=value, e.g. kv_budget=8MiB)\n");
}

/* An unsigned option value in [lo, hi]; prints what is wrong otherwise. */
static int parse_u64(const char *opt, const char *v, unsigned long long lo, unsigned long long hi,
                     unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long x = v ? strtoull(v, &end, 10) : 0;
    if (!v || errno || end == v || *end || x < lo || x > hi || v[0] == '-') {
        fprintf(stderr, "fairkv serve: %s needs an integer in [%llu, %llu], got '%s'\n", opt, lo, hi, v ? v : "");
        return -1;
    }
    *out = x;
    return 0;
}

/* engine options given as flags become "key=value" backend options */
static const struct {
    const char *flag, *key;
} eflags[] = {{"--model", "model"},           {"--kv-budget", "kv_budget"},
              {"--kv-dtype", "kv_dtype"},     {"--policy", "policy"},
              {"--quotas", "quotas"},         {"--dynamic-chunking", "dynamic_chunking"},
              {"--chunk-tokens", "chunk_tokens"}, {"--quant", "quant"}, {"--quant-dtype", "quant_dtype"},
              {"--quant-hot", "quant_hot"},
              {"--threads", "threads"},       {"--max-batch-tokens", "max_batch_tokens"},
              {"--max-running", "max_running"}, {"--admission", "admission"},
              {"--step-log", "step_log"},     {"--victim", "victim"},
              {"--reclaim", "reclaim"},       {"--host-bytes", "host_bytes"},
              {"--ctx", "ctx"},               {"--host-kv", "host_kv"},
              {"--remote", "remote"},         {"--remote-timeout-ms", "remote_timeout_ms"},
              {"--remote-ttl", "remote_ttl_s"}, {"--remote-quota", "remote_quota"},
              {"--step-share", "step_share"}, {"--tier-admission", "tier_admission"},
              {"--host-policy", "host_policy"},
              {"--admit-reclaim", "admit_reclaim"}, {"--step-bound", "step_bound"}, {"--step-cost", "step_cost"},
              {"--shares", "shares"},
              /* llama-server's names (docs/OPERATIONS.md has the table) */
              {"-np", "max_running"},         {"--parallel", "max_running"},
              {"-b", "max_batch_tokens"},     {"--batch-size", "max_batch_tokens"}};
#define N_EFLAGS (sizeof eflags / sizeof eflags[0])

static int is_engine_flag(const char *a)
{
    for (size_t k = 0; k < N_EFLAGS; k++)
        if (!strcmp(a, eflags[k].flag)) return 1;
    return 0;
}

int fkv_cli_serve(int argc, char **argv)
{
    fkv_server_config cfg;
    fkv_server_config_default(&cfg);
    const char *backend = NULL;
    const char *opts[65];
    char ebuf[N_EFLAGS][1100];
    int has_model = 0;
    int n_opts = 0;
    unsigned long long v, drain_s = 60, ubatch = 0, batch = 256; /* batch: the engine's default budget */
    cfg.api_key = getenv("FAIRKV_API_KEY");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 0;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
#define OPT(name) (!strcmp(a, name) && (ok = 1) && (i++, 1))
        if (OPT("--host")) cfg.host = val;
        else if (OPT("--port")) {
            if (parse_u64(a, val, 0, 65535, &v)) return 2;
            cfg.port = (uint16_t)v;
        } else if (OPT("--api-key")) cfg.api_key = val;
        else if (OPT("--max-body")) {
            if (parse_u64(a, val, 1, 1ull << 32, &v)) return 2;
            cfg.max_body = (size_t)v;
        } else if (OPT("--max-prompt")) {
            if (parse_u64(a, val, 1, 1u << 30, &v)) return 2;
            cfg.max_prompt = (uint32_t)v;
        } else if (OPT("--max-queue")) {
            if (parse_u64(a, val, 1, 1u << 30, &v)) return 2;
            cfg.max_queue = (uint32_t)v;
        } else if (OPT("--max-n")) {
            if (parse_u64(a, val, 1, 64, &v)) return 2;
            cfg.max_n = (uint32_t)v;
        } else if (OPT("--max-connections")) {
            if (parse_u64(a, val, 1, 65536, &v)) return 2;
            cfg.max_connections = (unsigned)v;
        } else if (OPT("--max-connections-per-ip")) {
            if (parse_u64(a, val, 0, 65536, &v)) return 2;
            cfg.max_conn_per_ip = (unsigned)v;
        } else if (OPT("--read-timeout")) {
            if (parse_u64(a, val, 0, 86400, &v)) return 2;
            cfg.read_timeout_s = (unsigned)v;
        } else if (OPT("--retry-after")) {
            if (parse_u64(a, val, 0, 86400, &v)) return 2;
            cfg.retry_after_s = (unsigned)v;
        } else if (OPT("--drain-timeout")) {
            if (parse_u64(a, val, 0, 86400, &drain_s)) return 2;
        } else if (OPT("--chat-template")) cfg.chat_template = val;
        else if (OPT("--backend")) backend = val;
        else if (OPT("-ub") || OPT("--ubatch-size")) {
            if (parse_u64(a, val, 1, 1u << 20, &ubatch)) return 2;
        }
        else if (!strcmp(a, "--remote-cluster")) { /* a switch: no value */
            ok = 1;
            if (n_opts == 64) {
                fprintf(stderr, "fairkv serve: too many options\n");
                return 2;
            }
            opts[n_opts++] = "remote_cluster=on";
        }
        else if (is_engine_flag(a)) {
            ok = 1;
            i++;
            if (val && (!strcmp(a, "-b") || !strcmp(a, "--batch-size") || !strcmp(a, "--max-batch-tokens")))
                batch = strtoull(val, NULL, 10); /* checked as an engine option */
            for (size_t k = 0; k < N_EFLAGS && val; k++) {
                if (strcmp(a, eflags[k].flag)) continue;
                if (strlen(val) > 1024 || n_opts == 64) {
                    fprintf(stderr, "fairkv serve: %s: value too long or too many options\n", a);
                    return 2;
                }
                snprintf(ebuf[k], sizeof ebuf[k], "%s=%s", eflags[k].key, val);
                opts[n_opts++] = ebuf[k];
                has_model |= k == 0;
            }
        }
        else if (OPT("--backend-opt")) {
            if (n_opts == 64) {
                fprintf(stderr, "fairkv serve: at most 64 --backend-opt\n");
                return 2;
            }
            opts[n_opts++] = val;
        }
#undef OPT
        if (!ok) {
            fprintf(stderr, "fairkv serve: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (!val) {
            fprintf(stderr, "fairkv serve: %s needs a value\n", a);
            return 2;
        }
    }
    opts[n_opts] = NULL;
    if (!backend) backend = has_model ? "engine" : "fake";
    /* llama.cpp splits a batch (-b) into micro-batches (-ub) of at most
     * that many tokens per forward pass; the engine computes a step's
     * whole batch in one pass, so only -ub >= -b describes it */
    if (ubatch && ubatch < batch) {
        fprintf(stderr,
                "fairkv serve: -ub/--ubatch-size %llu is smaller than the step's token budget %llu (-b, "
                "--max-batch-tokens): the engine computes a step's whole batch in one forward pass and has no "
                "micro-batches; give -b %llu to bound the step instead\n",
                ubatch, batch, ubatch);
        return 2;
    }

    /* Block the stop signals before any thread starts (the backend starts
     * its own) so every thread inherits the mask and only sigwait below
     * receives them; an unblocked thread would take the default action. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    char err[512] = "";
    fkv_backend be;
    fkv_status st = fkv_backend_create(backend, opts, &be, err, sizeof err);
    if (st != FKV_OK) {
        fprintf(stderr, "fairkv serve: --backend %s: %s\n", backend, err);
        return 2;
    }
    fkv_server *srv;
    st = fkv_server_start(&cfg, &be, &srv, err, sizeof err);
    if (st != FKV_OK) {
        fprintf(stderr, "fairkv serve: %s\n", err);
        fkv_backend_destroy(&be);
        return 1;
    }
    fkv_backend_info info;
    be.ops->info(be.impl, &info);
    printf("fairkv serve: model %s (backend %s) on http://%s%s%s:%u/ (POST /v1/completions, POST /v1/chat/completions, GET /v1/models, "
           "/health, /metrics)\n",
           info.model, backend, strchr(cfg.host, ':') ? "[" : "", cfg.host, strchr(cfg.host, ':') ? "]" : "",
           (unsigned)fkv_server_port(srv));
    fflush(stdout);

    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "fairkv serve: %s: no new requests; finishing %llu running\n", sig == SIGTERM ? "SIGTERM" : "SIGINT",
            (unsigned long long)fkv_server_in_flight(srv));
    st = fkv_server_drain(srv, (int64_t)drain_s * 1000000000);
    if (st != FKV_OK) fprintf(stderr, "fairkv serve: drain timed out after %llu s; stopping anyway\n", drain_s);
    fkv_server_destroy(srv);
    fkv_backend_destroy(&be);
    return st == FKV_OK ? 0 : 1;
}
