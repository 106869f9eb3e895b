/* The chat formats of chat_template.h, each written to produce what its
 * model's Jinja template renders (Hugging Face's apply_chat_template with
 * string contents), so a served chat model sees the prompts it was tuned on. */
#include "server/chat_template.h"

#include <string.h>

static const char *const names[FKV_CHAT_N] = {"chatml", "llama2",  "llama3",     "phi3",
                                              "phi3.5", "zephyr",  "mistral-v7", "gemma"};

const char *fkv_chat_template_name(fkv_chat_tmpl t)
{
    return t >= 0 && t < FKV_CHAT_N ? names[t] : NULL;
}

fkv_chat_tmpl fkv_chat_template_by_name(const char *name)
{
    for (int i = 0; name && i < FKV_CHAT_N; i++)
        if (!strcmp(name, names[i])) return (fkv_chat_tmpl)i;
    return FKV_CHAT_UNKNOWN;
}

const char *fkv_chat_template_list(void)
{
    return "chatml, llama2, llama3, phi3, phi3.5, zephyr, mistral-v7, gemma";
}

static int has(const char *s, const char *marker)
{
    return strstr(s, marker) != NULL;
}

/* The order matters where formats share markers: Phi-3 and Zephyr both
 * write <|user|>, and only Phi-3 ends turns with <|end|>. */
fkv_chat_tmpl fkv_chat_template_detect(const char *j)
{
    if (!j || !*j) return FKV_CHAT_UNKNOWN;
    if (has(j, "<|im_start|>")) return FKV_CHAT_CHATML;
    if (has(j, "[SYSTEM_PROMPT]")) return FKV_CHAT_MISTRAL_V7;
    if (has(j, "[INST]")) return FKV_CHAT_LLAMA2;
    if (has(j, "<|start_header_id|>") && has(j, "<|end_header_id|>")) return FKV_CHAT_LLAMA3;
    if (has(j, "<|assistant|>") && has(j, "<|end|>")) return has(j, "<|system|>") ? FKV_CHAT_PHI35 : FKV_CHAT_PHI3;
    if (has(j, "<|user|>") && has(j, "<|assistant|>")) return FKV_CHAT_ZEPHYR;
    if (has(j, "<start_of_turn>")) return FKV_CHAT_GEMMA;
    return FKV_CHAT_UNKNOWN;
}

static const char *role_name(fkv_chat_role r)
{
    return r == FKV_ROLE_SYSTEM ? "system" : r == FKV_ROLE_USER ? "user" : "assistant";
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Jinja's trim / Python's strip, on ASCII whitespace. */
static void put_trimmed(fkv_textbuf *b, const char *s)
{
    size_t n = strlen(s);
    while (n && is_space(*s)) s++, n--;
    while (n && is_space(s[n - 1])) n--;
    fkv_textbuf_append(b, s, n);
}

static void chatml(const fkv_chat_msg *m, size_t n, int gen, fkv_textbuf *b)
{
    for (size_t i = 0; i < n; i++) {
        fkv_textbuf_printf(b, "<|im_start|>%s\n", role_name(m[i].role));
        fkv_textbuf_puts(b, m[i].content);
        fkv_textbuf_puts(b, "<|im_end|>\n");
    }
    if (gen) fkv_textbuf_puts(b, "<|im_start|>assistant\n");
}

/* Llama-2-chat: a leading system message goes, in <<SYS>>, into the first
 * turn; the whole turn is stripped; the prompt ends with " [/INST]". */
static void llama2(const fkv_chat_msg *m, size_t n, const fkv_chat_tokens *t, fkv_textbuf *b)
{
    const char *sys = n && m[0].role == FKV_ROLE_SYSTEM ? m[0].content : NULL;
    for (size_t i = sys ? 1 : 0, first = 1; i < n; i++, first = 0) {
        fkv_textbuf turn;
        fkv_textbuf_init(&turn);
        if (first && sys) fkv_textbuf_printf(&turn, "<<SYS>>\n%s\n<</SYS>>\n\n", sys);
        fkv_textbuf_puts(&turn, m[i].content);
        if (m[i].role == FKV_ROLE_USER) {
            fkv_textbuf_printf(b, "%s[INST] ", t->bos);
            put_trimmed(b, turn.data);
            fkv_textbuf_puts(b, " [/INST]");
        } else if (m[i].role == FKV_ROLE_ASSISTANT) {
            fkv_textbuf_puts(b, " ");
            put_trimmed(b, turn.data);
            fkv_textbuf_printf(b, " %s", t->eos);
        }
        if (turn.oom) b->oom = 1;
        fkv_textbuf_free(&turn);
    }
}

static void llama3(const fkv_chat_msg *m, size_t n, int gen, const fkv_chat_tokens *t, fkv_textbuf *b)
{
    fkv_textbuf_puts(b, t->bos);
    for (size_t i = 0; i < n; i++) {
        fkv_textbuf_printf(b, "<|start_header_id|>%s<|end_header_id|>\n\n", role_name(m[i].role));
        put_trimmed(b, m[i].content);
        fkv_textbuf_puts(b, "<|eot_id|>");
    }
    if (gen) fkv_textbuf_puts(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* Phi-3-mini's template: no system turns, and every user turn already ends
 * with the assistant's header (so add_generation_prompt changes nothing). */
static void phi3(const fkv_chat_msg *m, size_t n, const fkv_chat_tokens *t, fkv_textbuf *b)
{
    fkv_textbuf_puts(b, t->bos);
    for (size_t i = 0; i < n; i++) {
        if (m[i].role == FKV_ROLE_USER) {
            fkv_textbuf_puts(b, "<|user|>\n");
            fkv_textbuf_puts(b, m[i].content);
            fkv_textbuf_puts(b, "<|end|>\n<|assistant|>\n");
        } else if (m[i].role == FKV_ROLE_ASSISTANT) {
            fkv_textbuf_puts(b, m[i].content);
            fkv_textbuf_puts(b, "<|end|>\n");
        }
    }
}

static void phi35(const fkv_chat_msg *m, size_t n, int gen, const fkv_chat_tokens *t, fkv_textbuf *b)
{
    for (size_t i = 0; i < n; i++) {
        if (m[i].role == FKV_ROLE_SYSTEM && !*m[i].content) continue; /* the template skips empty ones */
        fkv_textbuf_printf(b, "<|%s|>\n", role_name(m[i].role));
        fkv_textbuf_puts(b, m[i].content);
        fkv_textbuf_puts(b, "<|end|>\n");
    }
    fkv_textbuf_puts(b, gen ? "<|assistant|>\n" : t->eos);
}

static void zephyr(const fkv_chat_msg *m, size_t n, int gen, const fkv_chat_tokens *t, fkv_textbuf *b)
{
    for (size_t i = 0; i < n; i++) {
        fkv_textbuf_printf(b, "<|%s|>\n", role_name(m[i].role));
        fkv_textbuf_puts(b, m[i].content);
        fkv_textbuf_printf(b, "%s\n", t->eos);
    }
    if (gen) fkv_textbuf_puts(b, "<|assistant|>\n");
}

/* Mistral's v7 format (Mistral-Small-2501 and later): system prompts in
 * their own brackets, no spaces around the [INST] markers. */
static void mistral_v7(const fkv_chat_msg *m, size_t n, const fkv_chat_tokens *t, fkv_textbuf *b)
{
    fkv_textbuf_puts(b, t->bos);
    for (size_t i = 0; i < n; i++) {
        const char *c = m[i].content;
        if (m[i].role == FKV_ROLE_SYSTEM) fkv_textbuf_printf(b, "[SYSTEM_PROMPT]%s[/SYSTEM_PROMPT]", c);
        else if (m[i].role == FKV_ROLE_USER) fkv_textbuf_printf(b, "[INST]%s[/INST]", c);
        else fkv_textbuf_printf(b, "%s%s", c, t->eos);
    }
}

/* Gemma has no system role: as Gemma 3's template does, a leading system
 * message becomes a prefix of the first user turn.  Assistant is "model". */
static void gemma(const fkv_chat_msg *m, size_t n, int gen, const fkv_chat_tokens *t, fkv_textbuf *b)
{
    fkv_textbuf_puts(b, t->bos);
    const char *sys = n && m[0].role == FKV_ROLE_SYSTEM ? m[0].content : NULL;
    for (size_t i = sys ? 1 : 0; i < n; i++) {
        fkv_textbuf_printf(b, "<start_of_turn>%s\n", m[i].role == FKV_ROLE_ASSISTANT ? "model" : role_name(m[i].role));
        if (sys) fkv_textbuf_printf(b, "%s\n\n", sys), sys = NULL;
        put_trimmed(b, m[i].content);
        fkv_textbuf_puts(b, "<end_of_turn>\n");
    }
    if (gen) fkv_textbuf_puts(b, "<start_of_turn>model\n");
}

int fkv_chat_template_apply(fkv_chat_tmpl t, const fkv_chat_msg *m, size_t n, int gen, const fkv_chat_tokens *tok,
                            fkv_textbuf *b)
{
    static const fkv_chat_tokens none = {"", ""};
    if (!tok) tok = &none;
    fkv_chat_tokens k = {tok->bos ? tok->bos : "", tok->eos ? tok->eos : ""};
    switch (t) {
    case FKV_CHAT_CHATML: chatml(m, n, gen, b); break;
    case FKV_CHAT_LLAMA2: llama2(m, n, &k, b); break;
    case FKV_CHAT_LLAMA3: llama3(m, n, gen, &k, b); break;
    case FKV_CHAT_PHI3: phi3(m, n, &k, b); break;
    case FKV_CHAT_PHI35: phi35(m, n, gen, &k, b); break;
    case FKV_CHAT_ZEPHYR: zephyr(m, n, gen, &k, b); break;
    case FKV_CHAT_MISTRAL_V7: mistral_v7(m, n, &k, b); break;
    case FKV_CHAT_GEMMA: gemma(m, n, gen, &k, b); break;
    default: return -1;
    }
    return 0;
}
