/* libFuzzer target: the server's request parsers (completions and chat,
 * llama-server's /tokenize and /detokenize), the chat templates and the
 * metrics family filter take untrusted bytes.  A parse either succeeds
 * with fields inside the limits or fails with an HTTP status and a named
 * message; every template renders any parsed conversation; the filter
 * never writes more than it was given; any bytes as token text render as
 * valid UTF-8, also through the engine backend's holdback cut into pieces;
 * a --remote node list parses into no more bytes than it had, or fails. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/api.h"
#include "server/backend_remote.h"
#include "server/metrics_http.h"
#include "server/utf8_hold.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fkv_api_limits lim = {64, 256, 128, 4, "m"};
    fkv_api_request r;
    fkv_api_error e;
    if (fkv_api_parse_completion((const char *)data, size, &lim, &r, &e) == 0) {
        int ok = r.n >= 1 && r.n <= lim.max_n && r.max_tokens >= 1 && r.max_tokens <= lim.max_context &&
                 r.top_logprobs <= FKV_API_MAX_LOGPROBS && (r.logprobs || !r.top_logprobs) &&
                 r.temperature >= 0 && r.temperature <= 2 && r.top_p > 0 && r.top_p <= 1 && r.user &&
                 (r.prompt_text ? r.prompt_text_len > 0
                                : r.prompt && r.n_prompt >= 1 && r.n_prompt <= lim.max_prompt &&
                                      r.n_prompt + r.max_tokens <= lim.max_context);
        for (uint32_t i = 0; ok && r.prompt && i < r.n_prompt; i++) ok = r.prompt[i] >= 0 && r.prompt[i] < 256;
        if (!ok) __builtin_trap();
        fkv_api_request_free(&r);
    } else if (!(e.http == 400 || e.http == 404 || e.http == 500) || !e.message[0]) {
        __builtin_trap();
    }
    if (fkv_api_parse_chat((const char *)data, size, &lim, &r, &e) == 0) {
        int ok = r.n_messages >= 1 && r.messages && r.n_stop <= FKV_API_MAX_STOP && !r.prompt && r.user;
        for (uint32_t i = 0; ok && i < r.n_messages; i++)
            ok = r.messages[i].content && r.messages[i].role >= FKV_ROLE_SYSTEM && r.messages[i].role <= FKV_ROLE_ASSISTANT;
        for (uint32_t i = 0; ok && i < r.n_stop; i++) ok = r.stop[i] && r.stop[i][0];
        if (!ok) __builtin_trap();
        fkv_chat_tokens tok = {"<s>", "</s>"};
        for (int t = 0; t < FKV_CHAT_N; t++) {
            fkv_textbuf b;
            fkv_textbuf_init(&b);
            if (fkv_chat_template_apply((fkv_chat_tmpl)t, r.messages, r.n_messages, t & 1, &tok, &b)) __builtin_trap();
            fkv_textbuf_free(&b);
        }
        fkv_api_request_free(&r);
    } else if (!(e.http == 400 || e.http == 404 || e.http == 500) || !e.message[0]) {
        __builtin_trap();
    }
    fkv_api_tokenize tq;
    if (fkv_api_parse_tokenize((const char *)data, size, &tq, &e) == 0) {
        if (!tq.content || strlen(tq.content) != tq.len) __builtin_trap();
        fkv_api_tokenize_free(&tq);
    } else if (!(e.http == 400 || e.http == 500) || !e.message[0]) {
        __builtin_trap();
    }
    int32_t *ids;
    size_t n_ids;
    if (fkv_api_parse_detokenize((const char *)data, size, 256, &ids, &n_ids, &e) == 0) {
        for (size_t i = 0; i < n_ids; i++)
            if (ids[i] < 0 || ids[i] >= 256) __builtin_trap();
        free(ids);
    } else if (!(e.http == 400 || e.http == 500) || !e.message[0] || ids) {
        __builtin_trap();
    }
    {
        fkv_textbuf t;
        fkv_textbuf_init(&t);
        fkv_api_json_text(&t, (const char *)data, size);
        if (t.data && !fkv_api_utf8_valid(t.data, t.len)) __builtin_trap();
        fkv_textbuf_free(&t);
    }
    {
        /* the bytes as token pieces: cut where the first byte says */
        char out[FKV_UTF8_HOLD_OUT(7)];
        fkv_utf8_hold h = {0};
        size_t cut = size ? 1 + data[0] % 7 : 0, at = 0;
        while (at < size) {
            size_t k = size - at < cut ? size - at : cut;
            size_t n = fkv_utf8_hold_feed(&h, (const char *)data + at, k, out, at + k == size);
            if (n > FKV_UTF8_HOLD_OUT(k) || !fkv_api_utf8_valid(out, n)) __builtin_trap();
            at += k;
        }
        if (h.n_pend) __builtin_trap();
    }
    {
        /* the bytes as a --remote node list */
        char spec[256], nodes[64];
        size_t sl = size < sizeof spec - 1 ? size : sizeof spec - 1;
        memcpy(spec, data, sl);
        spec[sl] = 0;
        if (fkv_eng_remote_nodes(spec, nodes, sizeof nodes) == 0 && (!nodes[0] || strlen(nodes) > strlen(spec)))
            __builtin_trap();
    }
    /* the bytes as a metrics text from a backend */
    const char *seen[] = {"a_total", "fairkv_num_requests_running"};
    fkv_textbuf out;
    fkv_textbuf_init(&out);
    fkv_prom_append_filtered(&out, (const char *)data, size, seen, 2);
    if (out.len > size) __builtin_trap();
    fkv_textbuf_free(&out);
    return 0;
}
