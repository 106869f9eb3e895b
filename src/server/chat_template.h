/* Chat prompts: the conversation of a /v1/chat/completions request turned
 * into the text a model was trained on.
 *
 * No Jinja interpreter: a GGUF's tokenizer.chat_template is recognized by
 * the marker strings it contains (as llama.cpp's llm_chat_detect_template
 * does) and each known format is written out in C, producing what the
 * model's own Jinja template renders for plain string contents. */
#ifndef FKV_SERVER_CHAT_TEMPLATE_H
#define FKV_SERVER_CHAT_TEMPLATE_H

#include <stddef.h>

#include "server/textbuf.h"

typedef enum fkv_chat_tmpl {
    FKV_CHAT_UNKNOWN = -1,
    FKV_CHAT_CHATML = 0, /* the default: <|im_start|>role\n...<|im_end|>\n */
    FKV_CHAT_LLAMA2,     /* [INST] <<SYS>>\n..\n<</SYS>>\n\n.. [/INST] */
    FKV_CHAT_LLAMA3,     /* <|start_header_id|>role<|end_header_id|>\n\n..<|eot_id|> */
    FKV_CHAT_PHI3,       /* Phi-3-mini: system dropped, <|assistant|> after each user turn */
    FKV_CHAT_PHI35,      /* Phi-3.5: <|system|> turns, generation prompt on request */
    FKV_CHAT_ZEPHYR,     /* <|role|>\n..</s>\n */
    FKV_CHAT_MISTRAL_V7, /* [SYSTEM_PROMPT]..[/SYSTEM_PROMPT][INST]..[/INST]..</s> */
    FKV_CHAT_GEMMA,      /* <start_of_turn>user|model\n..<end_of_turn>\n */
    FKV_CHAT_N
} fkv_chat_tmpl;

#define FKV_CHAT_DEFAULT FKV_CHAT_CHATML

typedef enum fkv_chat_role { FKV_ROLE_SYSTEM = 0, FKV_ROLE_USER = 1, FKV_ROLE_ASSISTANT = 2 } fkv_chat_role;

typedef struct fkv_chat_msg {
    fkv_chat_role role;
    const char *content; /* UTF-8, NUL-terminated */
} fkv_chat_msg;

/* The special-token texts a template writes where its Jinja source says
 * {{ bos_token }} / {{ eos_token }}; "" leaves them out (the server leaves
 * BOS to the tokenizer, which adds it per the model's add_bos_token). */
typedef struct fkv_chat_tokens {
    const char *bos, *eos;
} fkv_chat_tokens;

/* "chatml", "llama2", ... ; NULL for an out-of-range value. */
const char *fkv_chat_template_name(fkv_chat_tmpl t);
/* By name (as --chat-template takes it); FKV_CHAT_UNKNOWN if none. */
fkv_chat_tmpl fkv_chat_template_by_name(const char *name);
/* The format of a Jinja template text; FKV_CHAT_UNKNOWN if none fits. */
fkv_chat_tmpl fkv_chat_template_detect(const char *jinja);
/* "chatml, llama2, ...": the names, for help and error messages. */
const char *fkv_chat_template_list(void);

/* Appends the prompt of msgs[0..n) to out; add_generation_prompt ends it
 * with the assistant's header so the model answers next.  0, or -1 for an
 * unknown template (out unchanged). */
int fkv_chat_template_apply(fkv_chat_tmpl t, const fkv_chat_msg *msgs, size_t n, int add_generation_prompt,
                            const fkv_chat_tokens *tok, fkv_textbuf *out);

#endif
