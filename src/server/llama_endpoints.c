/* llama-server's endpoints of `fairkv serve`, in its request and answer
 * shapes (llama.cpp tools/server/README.md), for scripts written against
 * it: POST /tokenize, POST /detokenize, GET /props, GET /slots. */
#include <stdlib.h>
#include <string.h>

#include "server/http_internal.h"

static enum MHD_Result send_buf(struct MHD_Connection *c, fkv_textbuf *b)
{
    enum MHD_Result rc = b->oom ? MHD_NO : fkv__http_send_json(c, 200, b);
    fkv_textbuf_free(b);
    return rc;
}

/* The tokens a backend puts in front of any text (BOS): those of "". */
static uint32_t leading_specials(fkv_server *s, int32_t *out, uint32_t cap)
{
    uint32_t n = 0;
    if (s->be->ops->tokenize(s->be->impl, "", 0, out, cap, &n) != FKV_OK || n > cap) return 0;
    return n;
}

/* A piece as llama-server gives it: a string when it is valid UTF-8, else
 * its bytes as an array of numbers. */
static void piece_json(fkv_textbuf *b, const char *p, size_t n)
{
    if (fkv_api_utf8_valid(p, n)) {
        fkv_textbuf_json_str(b, p, n);
        return;
    }
    fkv_textbuf_puts(b, "[");
    for (size_t i = 0; i < n; i++) fkv_textbuf_printf(b, "%s%u", i ? "," : "", (unsigned char)p[i]);
    fkv_textbuf_puts(b, "]");
}

enum MHD_Result fkv__tokenize(fkv_server *s, struct MHD_Connection *c, conn *cn)
{
    fkv_api_error e;
    fkv_api_tokenize q;
    if (fkv_api_parse_tokenize(cn->body.data ? cn->body.data : "", cn->body.len, &q, &e))
        return fkv__http_send_error(s, c, &e);
    fkv_status (*tok)(void *, const char *, size_t, int32_t *, uint32_t, uint32_t *) =
        q.parse_special && s->be->ops->tokenize_special ? s->be->ops->tokenize_special : s->be->ops->tokenize;
    uint32_t cap = (uint32_t)(q.len < (1u << 20) ? q.len + 8 : (1u << 20)), n = 0;
    int32_t *t = NULL;
    fkv_status st = FKV_ENOMEM;
    for (int pass = 0; pass < 2; pass++) {
        free(t);
        if (!(t = malloc(sizeof *t * cap))) break;
        st = tok(s->be->impl, q.content, q.len, t, cap, &n);
        if (st != FKV_OK || n <= cap) break;
        cap = n;
        st = FKV_EINVAL; /* the count changed between calls */
    }
    if (st != FKV_OK || n > cap) {
        free(t);
        fkv_api_tokenize_free(&q);
        fkv_api_error_set(&e, st == FKV_ENOMEM ? 500 : 400, st == FKV_ENOMEM ? "server_error" : "invalid_request_error",
                          "invalid_value", "content", "the content could not be tokenized: %s", fkv_strerror(st));
        return fkv__http_send_error(s, c, &e);
    }
    /* the backend adds BOS when the model asks; add_special false (the
     * default) leaves it out, as llama-server does */
    uint32_t skip = 0;
    if (!q.add_special) {
        int32_t lead[8];
        uint32_t k = leading_specials(s, lead, 8);
        if (k <= n && !memcmp(t, lead, k * sizeof *t)) skip = k;
    }
    fkv_textbuf b;
    fkv_textbuf_init(&b);
    fkv_textbuf_puts(&b, "{\"tokens\":[");
    char piece[1100];
    for (uint32_t i = skip; i < n; i++) {
        if (i > skip) fkv_textbuf_puts(&b, ",");
        if (!q.with_pieces) {
            fkv_textbuf_printf(&b, "%d", t[i]);
            continue;
        }
        size_t pl = s->be->ops->piece(s->be->impl, t[i], piece, sizeof piece);
        fkv_textbuf_printf(&b, "{\"id\":%d,\"piece\":", t[i]);
        piece_json(&b, piece, pl < sizeof piece ? pl : sizeof piece - 1);
        fkv_textbuf_puts(&b, "}");
    }
    fkv_textbuf_puts(&b, "]}\n");
    free(t);
    fkv_api_tokenize_free(&q);
    return send_buf(c, &b);
}

enum MHD_Result fkv__detokenize(fkv_server *s, struct MHD_Connection *c, conn *cn)
{
    fkv_api_error e;
    int32_t *t;
    size_t n;
    if (fkv_api_parse_detokenize(cn->body.data ? cn->body.data : "", cn->body.len, s->info.vocab_size, &t, &n, &e))
        return fkv__http_send_error(s, c, &e);
    size_t cap = 64 + 16 * n, len = 0;
    char *out = NULL;
    fkv_status st = FKV_ENOMEM;
    for (int pass = 0; pass < 2; pass++) {
        free(out);
        if (!(out = malloc(cap))) break;
        st = s->be->ops->detokenize(s->be->impl, t, n, out, cap, &len);
        if (st != FKV_OK || len < cap) break;
        cap = len + 1;
        st = FKV_EINVAL;
    }
    free(t);
    if (st != FKV_OK) {
        free(out);
        fkv_api_error_set(&e, st == FKV_ENOMEM ? 500 : 400, st == FKV_ENOMEM ? "server_error" : "invalid_request_error",
                          "invalid_value", "tokens", "the tokens could not be detokenized: %s", fkv_strerror(st));
        return fkv__http_send_error(s, c, &e);
    }
    fkv_textbuf b;
    fkv_textbuf_init(&b);
    fkv_textbuf_puts(&b, "{\"content\":");
    fkv_api_json_text(&b, out, len);
    fkv_textbuf_puts(&b, "}\n");
    free(out);
    return send_buf(c, &b);
}

/* GET /props: the model, its context, the defaults a request gets, and
 * total_slots (the backend's running limit). */
enum MHD_Result fkv__props(fkv_server *s, struct MHD_Connection *c)
{
    fkv_textbuf b;
    fkv_textbuf_init(&b);
    fkv_textbuf_puts(&b, "{\"model_alias\":");
    fkv_textbuf_json_str(&b, s->info.model, strlen(s->info.model));
    fkv_textbuf_puts(&b, ",\"model_path\":");
    fkv_textbuf_json_str(&b, s->info.model, strlen(s->info.model)); /* the served name: no path of this machine */
    fkv_textbuf_printf(&b,
                       ",\"n_ctx\":%u,\"n_vocab\":%u,\"total_slots\":%u,\"default_generation_settings\":{"
                       "\"n_ctx\":%u,\"params\":{\"n_predict\":16,\"temperature\":1,\"top_p\":1,\"stream\":false,"
                       "\"n_probs\":0,\"ignore_eos\":false,\"max_prompt\":%u}},\"chat_template\":",
                       s->info.max_context, s->info.vocab_size, s->info.max_running, s->info.max_context,
                       s->lim.max_prompt);
    const char *t = fkv_chat_template_name(s->chat_tmpl);
    fkv_textbuf_json_str(&b, t, strlen(t));
    fkv_textbuf_puts(&b, ",\"build_info\":\"fairkv\"}\n");
    return send_buf(c, &b);
}

enum MHD_Result fkv__slots(fkv_server *s, struct MHD_Connection *c)
{
    fkv_textbuf b;
    fkv_textbuf_init(&b);
    fkv__slots_render(s, &b);
    return send_buf(c, &b);
}
