/* Metrics: the seed's names exactly, valid Prometheus text 0.0.4, JSON
 * that parses and agrees with the counters. */
#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

#include "check.h"
#include "fairkv.h"

static int64_t now;

/* Every line is "# HELP name text", "# TYPE name counter|gauge" or
 * "name[{label="value"}] number", and every sample's name had a TYPE. */
static int prom_valid(const char *text, char *why, size_t len)
{
    char typed[64][64];
    int nt = 0;
    const char *p = text;
    int line = 0;
    while (*p) {
        const char *e = strchr(p, '\n');
        if (!e) return snprintf(why, len, "line %d: no newline at the end", line + 1), 0;
        line++;
        char buf[512];
        size_t n = (size_t)(e - p);
        if (n >= sizeof buf) return snprintf(why, len, "line %d too long", line), 0;
        memcpy(buf, p, n);
        buf[n] = 0;
        p = e + 1;
        if (!strncmp(buf, "# HELP ", 7)) continue;
        if (!strncmp(buf, "# TYPE ", 7)) {
            char name[64], type[16];
            if (sscanf(buf + 7, "%63s %15s", name, type) != 2 || (strcmp(type, "counter") && strcmp(type, "gauge")))
                return snprintf(why, len, "line %d: bad TYPE: %.60s", line, buf), 0;
            if (nt < 64) strcpy(typed[nt++], name);
            continue;
        }
        /* sample */
        size_t i = 0;
        while ((buf[i] >= 'a' && buf[i] <= 'z') || buf[i] == '_' || (buf[i] >= '0' && buf[i] <= '9') ||
               (buf[i] >= 'A' && buf[i] <= 'Z'))
            i++;
        if (!i) return snprintf(why, len, "line %d: no metric name: %.60s", line, buf), 0;
        char name[64];
        memcpy(name, buf, i < 63 ? i : 63);
        name[i < 63 ? i : 63] = 0;
        int known = 0;
        for (int k = 0; k < nt; k++) known |= !strcmp(typed[k], name);
        if (!known) return snprintf(why, len, "line %d: %s has no TYPE", line, name), 0;
        if (buf[i] == '{') {
            char *close = strchr(buf + i, '}');
            if (!close || !strstr(buf + i, "=\"")) return snprintf(why, len, "line %d: bad labels", line), 0;
            i = (size_t)(close - buf) + 1;
        }
        if (buf[i] != ' ') return snprintf(why, len, "line %d: no space before the value", line), 0;
        char *end;
        strtod(buf + i + 1, &end);
        if (end == buf + i + 1 || *end) return snprintf(why, len, "line %d: bad value", line), 0;
    }
    return 1;
}

int main(void)
{
    fkv_config cfg;
    fkv_config_default(&cfg);
    cfg.n_layers = 1;
    cfg.n_kv_heads = 1;
    cfg.head_dim = 2;
    cfg.page_tokens = 4;
    cfg.chunk_tokens = 8;
    cfg.capacity_pages = 8;
    cfg.device_label = "gpu0";
    cfg.policy = "lru";
    cfg.quotas = 0;
    cfg.clock.now_ns = fkv_virtual_clock_now;
    cfg.clock.ctx = &now;
    fkv_cache *c = NULL;
    REQUIRE(fkv_cache_create(&cfg, &c, NULL, 0) == FKV_OK);
    fkv_seq_params p;
    fkv_seq_params_default(&p);
    p.request_id = 1;
    p.expected_tokens = 20; /* short */
    fkv_seq *a;
    REQUIRE(fkv_seq_create(c, &p, &a) == FKV_OK);
    REQUIRE(fkv_seq_append(a, NULL, 22, NULL) == FKV_OK); /* 6 pages, chunks 8+8+6 */
    p.request_id = 2;
    p.expected_tokens = 1000; /* long */
    fkv_seq *b;
    REQUIRE(fkv_seq_create(c, &p, &b) == FKV_OK);
    fkv_seq_pin(b);
    REQUIRE(fkv_seq_append(b, NULL, 16, NULL) == FKV_OK); /* evicts a's first chunk (2 pages) */
    uint32_t miss;
    fkv_seq_touch(a, &miss);
    fkv_seq_touch(b, NULL);
    CHECK(miss == 8);

    char buf[16384];
    size_t len = 0;
    REQUIRE(fkv_cache_metrics_prometheus(c, buf, sizeof buf, &len) == FKV_OK && len < sizeof buf);
    char why[200] = "";
    CHECKF(prom_valid(buf, why, sizeof why), "%s", why);
    CHECK(strstr(buf, "\nkv_cache_chunk_size{device=\"gpu0\"} ") != NULL);
    CHECK(strstr(buf, "\nkv_cache_miss_rate{request_type=\"short\"} 0.3636363636") != NULL); /* 8 of 22 */
    CHECK(strstr(buf, "\nkv_cache_miss_rate{request_type=\"medium\"} 0\n") != NULL);
    CHECK(strstr(buf, "\nkv_cache_miss_rate{request_type=\"long\"} 0\n") != NULL);
    CHECK(strstr(buf, "\nfairkv_evicted_chunks_total{request_type=\"short\"} 1\n") != NULL);
    CHECK(strstr(buf, "\nfairkv_pages_used 8\n") != NULL);
    CHECK(strstr(buf, "\nfairkv_bytes{precision=\"f16\"} ") != NULL);
    CHECK(strstr(buf, "# TYPE fairkv_hit_tokens_total counter\n") != NULL);
    /* a short buffer reports the full length and stays terminated */
    char small[32];
    size_t need = 0;
    CHECK(fkv_cache_metrics_prometheus(c, small, sizeof small, &need) == FKV_OK && need == len &&
          strlen(small) == sizeof small - 1);

    REQUIRE(fkv_cache_metrics_json(c, buf, sizeof buf, &len) == FKV_OK && len < sizeof buf);
    cJSON *j = cJSON_Parse(buf);
    REQUIRE(j);
    cJSON *mr = cJSON_GetObjectItem(j, "kv_cache_miss_rate");
    CHECK(mr && fabs(cJSON_GetObjectItem(mr, "short")->valuedouble - 8.0 / 22.0) < 1e-12);
    CHECK(cJSON_GetObjectItem(j, "fairkv_pages_used")->valuedouble == 8);
    /* chunk size: a's 2 resident chunks (8, 6) + b's 2 (8, 8): 30/4 */
    CHECK(cJSON_GetObjectItem(j, "kv_cache_chunk_size")->valuedouble == 7.5);
    cJSON *hits = cJSON_GetObjectItem(j, "fairkv_hit_tokens_total");
    CHECK(cJSON_GetObjectItem(hits, "short")->valuedouble == 14 && cJSON_GetObjectItem(hits, "long")->valuedouble == 16);
    /* fragmentation: 30 tokens in 8 pages of 4 */
    CHECK(fabs(cJSON_GetObjectItem(j, "fairkv_fragmentation_ratio")->valuedouble - 2.0 / 32) < 1e-12);
    cJSON_Delete(j);
    fkv_cache_destroy(c);
    return check_done();
}
