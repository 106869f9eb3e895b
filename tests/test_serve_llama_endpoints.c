/* llama-server's endpoints and flags on `fairkv serve --model` with
 * stories260K (a Llama SentencePiece vocabulary): /tokenize then
 * /detokenize gives every string of llama.cpp's SentencePiece vocabulary
 * test (vocab/ggml-vocab-llama-spm.gguf.inp) back, the pieces spell the
 * text with the space prefix the tokenizer adds, add_special puts BOS in
 * front, parse_special reads "<s>" as BOS; /props reports the context
 * and -np as total_slots (-b and an -ub as large accepted). */
#include <stdio.h>
#include <string.h>

#include "serve_proc.h"

#define SEP "\n__ggml_vocab_test__\n"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

static cJSON *post_json(unsigned port, const char *path, cJSON *body, long *status)
{
    char *b = cJSON_PrintUnformatted(body);
    http_resp r;
    memset(&r, 0, sizeof r);
    http_do(&r, port, "POST", path, b, strlen(b), NULL);
    free(b);
    *status = r.status;
    cJSON *j = cJSON_Parse(r.body.data ? r.body.data : "");
    if (r.status != 200) fprintf(stderr, "%s: %ld %s\n", path, r.status, r.body.data ? r.body.data : "");
    http_free(&r);
    return j;
}

/* One string through /tokenize (plain, with pieces, with BOS) and back
 * through /detokenize. */
static void round_trip(unsigned port, const char *text, int parse_special)
{
    long st;
    cJSON *q = cJSON_CreateObject();
    cJSON_AddStringToObject(q, "content", text);
    if (!parse_special) cJSON_AddBoolToObject(q, "parse_special", 0);
    cJSON *a = post_json(port, "/tokenize", q, &st);
    cJSON *ids = cJSON_GetObjectItemCaseSensitive(a, "tokens");
    CHECKF(st == 200 && cJSON_IsArray(ids), "tokenize '%s'", text);
    int n = cJSON_GetArraySize(ids);
    CHECKF(n > 0 || !*text, "'%s': %d tokens", text, n);

    /* the pieces spell " " + text: the SentencePiece prefix, then the text */
    cJSON_AddBoolToObject(q, "with_pieces", 1);
    cJSON *p = post_json(port, "/tokenize", q, &st);
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(p, "tokens");
    char spelled[4096];
    size_t sl = 0;
    int k = 0;
    for (const cJSON *e = pt ? pt->child : NULL; e; e = e->next, k++) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id"), *pc = cJSON_GetObjectItemCaseSensitive(e, "piece");
        CHECK(cJSON_IsNumber(id) && id->valueint == cJSON_GetArrayItem(ids, k)->valueint);
        if (cJSON_IsString(pc)) sl += (size_t)snprintf(spelled + sl, sizeof spelled - sl, "%s", pc->valuestring);
        else /* bytes that are not UTF-8 alone */
            for (const cJSON *by = pc ? pc->child : NULL; by && sl + 1 < sizeof spelled; by = by->next)
                spelled[sl++] = (char)by->valueint, spelled[sl] = 0;
    }
    CHECK(k == n);
    if (*text) CHECKF(spelled[0] == ' ' && !strcmp(spelled + 1, text), "'%s' spelled '%s'", text, spelled);

    /* add_special: BOS (1) first, the rest the same */
    cJSON_DeleteItemFromObject(q, "with_pieces");
    cJSON_AddBoolToObject(q, "add_special", 1);
    cJSON *s = post_json(port, "/tokenize", q, &st);
    const cJSON *sids = cJSON_GetObjectItemCaseSensitive(s, "tokens");
    CHECKF(cJSON_GetArraySize(sids) == n + 1 && cJSON_GetArrayItem(sids, 0)->valueint == 1, "'%s' with BOS", text);
    for (int i = 0; i < n && i + 1 < cJSON_GetArraySize(sids); i++)
        CHECK(cJSON_GetArrayItem(sids, i + 1)->valueint == cJSON_GetArrayItem(ids, i)->valueint);

    /* back: the string itself, with and without the BOS */
    for (int bos = 0; bos < 2; bos++) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddItemToObject(d, "tokens", cJSON_Duplicate(bos ? sids : ids, 1));
        cJSON *t = post_json(port, "/detokenize", d, &st);
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(t, "content");
        CHECKF(st == 200 && cJSON_IsString(c) && !strcmp(c->valuestring, text), "'%s' came back as '%s'", text,
               cJSON_IsString(c) ? c->valuestring : "(none)");
        cJSON_Delete(t);
        cJSON_Delete(d);
    }
    cJSON_Delete(s);
    cJSON_Delete(p);
    cJSON_Delete(a);
    cJSON_Delete(q);
}

int main(void)
{
    (void)sp_complete;
    (void)sp_metric;
    char model[1024];
    sp_model(model, sizeof model);

    sp_proc pr = {0};
    const char *args[] = {"--model", model, "-np", "3", "-b", "64", "-ub", "64", NULL};
    REQUIRE(sp_start(&pr, args) == 0);

    http_resp r;
    memset(&r, 0, sizeof r);
    http_do(&r, pr.port, "GET", "/props", NULL, 0, NULL);
    cJSON *j = cJSON_Parse(r.body.data ? r.body.data : "");
    const cJSON *slots = cJSON_GetObjectItemCaseSensitive(j, "total_slots");
    const cJSON *dgs = cJSON_GetObjectItemCaseSensitive(j, "default_generation_settings");
    const cJSON *nctx = cJSON_GetObjectItemCaseSensitive(dgs, "n_ctx");
    const cJSON *alias = cJSON_GetObjectItemCaseSensitive(j, "model_alias");
    CHECKF(r.status == 200 && cJSON_IsNumber(slots) && slots->valueint == 3, "/props: %s", r.body.data);
    CHECKF(cJSON_IsNumber(nctx) && nctx->valueint == 128, "/props n_ctx");
    CHECK(cJSON_IsString(alias) && !strcmp(alias->valuestring, "stories260K-llamacpp"));
    cJSON_Delete(j);
    http_free(&r);

    const char *d = getenv("FKV_DATA_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-llama-spm.gguf.inp", d ? d : "../shared/data");
    char *inp = slurp(path);
    int cases = 0;
    if (inp) {
        for (char *at = inp, *end; (end = strstr(at, SEP)); at = end + strlen(SEP), cases++) {
            *end = 0;
            round_trip(pr.port, at, 1);
        }
        free(inp);
        printf("%d strings of %s round-tripped\n", cases, path);
        CHECK(cases >= 40);
    } else {
        printf("(no %s: built-in strings only)\n", path);
    }
    static const char *const own[] = {"Once upon a time", "  two leading spaces", "tabs\tand\nnewlines",
                                      "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) round_trip(pr.port, own[i], 1);
    /* a control token's text: text with parse_special false; the token
     * itself (BOS, 1) by default, as llama-server's parse_special */
    round_trip(pr.port, "<s> is text here", 0);
    long st;
    cJSON *q = cJSON_CreateObject();
    cJSON_AddStringToObject(q, "content", "<s> is text");
    cJSON *a = post_json(pr.port, "/tokenize", q, &st);
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(a, "tokens");
    int has_bos = 0;
    for (const cJSON *e = ids ? ids->child : NULL; e; e = e->next) has_bos |= e->valueint == 1;
    CHECKF(st == 200 && has_bos, "'<s>' parsed as BOS");
    cJSON_Delete(a);
    cJSON_Delete(q);
    sp_end(&pr);
    return check_done();
}
