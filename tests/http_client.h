/* A small blocking libcurl client for the server tests. */
#ifndef FKV_TEST_HTTP_CLIENT_H
#define FKV_TEST_HTTP_CLIENT_H

#include <curl/curl.h>
#include <stdio.h>
#include <string.h>

#include "server/textbuf.h"

typedef struct http_resp {
    CURLcode cc;
    long status;
    fkv_textbuf body, headers;
    size_t abort_after; /* > 0: stop reading after this many body bytes (client gone) */
} http_resp;

static size_t http_body_cb(char *p, size_t s, size_t n, void *u)
{
    http_resp *r = u;
    fkv_textbuf_append(&r->body, p, s * n);
    if (r->abort_after && r->body.len >= r->abort_after) return 0;
    return s * n;
}

static size_t http_head_cb(char *p, size_t s, size_t n, void *u)
{
    fkv_textbuf_append(&((http_resp *)u)->headers, p, s * n);
    return s * n;
}

/* method "GET"/"POST"/...; body may be NULL; key NULL = no Authorization. */
static void http_do(http_resp *r, unsigned port, const char *method, const char *path, const char *body, size_t blen,
                    const char *key)
{
    size_t abort_after = r->abort_after;
    memset(r, 0, sizeof *r);
    r->abort_after = abort_after;
    fkv_textbuf_init(&r->body);
    fkv_textbuf_init(&r->headers);
    CURL *h = curl_easy_init();
    char url[256], auth[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", port, path);
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    if (key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", key);
        hdr = curl_slist_append(hdr, auth);
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    /* a stuck server still fails the test; 120 s leaves room for a
     * sanitizer build on a busy two-core machine (30 s did not) */
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, http_body_cb);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, http_head_cb);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)blen);
    }
    r->cc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
}

static void http_free(http_resp *r)
{
    fkv_textbuf_free(&r->body);
    fkv_textbuf_free(&r->headers);
}

#endif
