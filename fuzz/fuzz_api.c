/* libFuzzer target: the server's request parser and the metrics family
 * filter take untrusted bytes.  A parse either succeeds with fields inside
 * the limits or fails with an HTTP status and a named message; the filter
 * never writes more than it was given. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/api.h"
#include "server/metrics_http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fkv_api_limits lim = {64, 256, 128, 4, "m"};
    fkv_api_request r;
    fkv_api_error e;
    if (fkv_api_parse_completion((const char *)data, size, &lim, &r, &e) == 0) {
        int ok = r.n >= 1 && r.n <= lim.max_n && r.max_tokens >= 1 && r.max_tokens <= lim.max_context &&
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
    /* the bytes as a metrics text from a backend */
    const char *seen[] = {"a_total", "fairkv_num_requests_running"};
    fkv_textbuf out;
    fkv_textbuf_init(&out);
    fkv_prom_append_filtered(&out, (const char *)data, size, seen, 2);
    if (out.len > size) __builtin_trap();
    fkv_textbuf_free(&out);
    return 0;
}
