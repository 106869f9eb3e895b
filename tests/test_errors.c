/* The one error convention of the public headers (fairkv.h, "Errors"): a
 * failing call returns its status and leaves a detail that names the bad
 * argument in the calling thread's buffer (fkv_last_error); calls that take
 * (err, errlen) get the same text there; another thread's failures do not
 * touch it. */
#include <pthread.h>
#include <string.h>

#include "check.h"
#include "fairkv.h"
#include "fairkv_attn.h"
#include "fairkv_quant.h"

static void *fail_elsewhere(void *arg)
{
    (void)arg;
    fkv_kv_geom g = {0};
    /* a failure of this thread's own */
    if (fkv_kv_geom_check(&g, NULL, 0) != FKV_EINVAL) return (void *)1;
    return strstr(fkv_last_error(), "fkv_kv_geom") ? NULL : (void *)1;
}

int main(void)
{
    char err[256] = "";
    fkv_config cfg;
    fkv_config_default(&cfg);
    cfg.page_tokens = 0;
    fkv_cache *c = NULL;
    CHECK(fkv_cache_create(&cfg, &c, err, sizeof err) == FKV_EINVAL && !c);
    CHECKF(strstr(err, "page_tokens") != NULL, "create: '%s'", err);
    CHECKF(!strcmp(err, fkv_last_error()), "create: '%s' vs the thread's '%s'", err, fkv_last_error());

    /* without a buffer: the detail is still there */
    CHECK(fkv_cache_create(&cfg, &c, NULL, 0) == FKV_EINVAL && strstr(fkv_last_error(), "page_tokens"));

    /* a sequence call on a live cache */
    fkv_config_default(&cfg);
    cfg.capacity_pages = 8;
    REQUIRE(fkv_cache_create(&cfg, &c, err, sizeof err) == FKV_OK);
    CHECK(fkv_seq_append(NULL, NULL, 1, NULL) == FKV_EINVAL && strstr(fkv_last_error(), "fkv_seq_append"));
    fkv_seq_params p;
    fkv_seq_params_default(&p);
    p.request_id = 1;
    fkv_seq *s;
    REQUIRE(fkv_seq_create(c, &p, &s) == FKV_OK);
    CHECK(fkv_seq_fetch(s, 5, 2, FKV_FETCH_RECOMPUTE, NULL, NULL) == FKV_EINVAL &&
          strstr(fkv_last_error(), "start=5 > end=2"));
    CHECK(fkv_seq_fetch(s, 0, 2, 4, NULL, NULL) == FKV_EINVAL && strstr(fkv_last_error(), "from=4"));
    CHECK(fkv_seq_fetch(s, 0, 2, 0, NULL, NULL) == FKV_EINVAL && strstr(fkv_last_error(), "from=0"));
    fkv_match_info mi;
    CHECK(fkv_seq_match_prefix(s, NULL, 0, 0, (fkv_match_tiers)7, &mi) == FKV_EINVAL &&
          strstr(fkv_last_error(), "tiers=7"));
    fkv_chunk_info in;
    CHECK(fkv_seq_chunk_info(s, 0, &in) == FKV_EINVAL && strstr(fkv_last_error(), "chunk 0 of 0"));
    fkv_seq_free(s);
    fkv_cache_destroy(c);

    /* the kernels and codecs: buffer and thread detail agree */
    float q[8] = {0}, out[8];
    CHECK(fkv_attn_decode(NULL, NULL, 1, NULL, 0, q, out, 1.0f, err, sizeof err) == FKV_EINVAL);
    CHECKF(strstr(err, "kv") && !strcmp(err, fkv_last_error()), "decode: '%s' / '%s'", err, fkv_last_error());
    fkv_kv_geom g = {1, 1, 8, 16, FKV_INT8, 0, 4};
    CHECK(fkv_kv_geom_check(&g, NULL, 0) == FKV_EINVAL && strstr(fkv_last_error(), "base"));
    char kept[256];
    snprintf(kept, sizeof kept, "%s", fkv_last_error());

    /* another thread's failure stays its own */
    pthread_t t;
    void *r = (void *)1;
    REQUIRE(!pthread_create(&t, NULL, fail_elsewhere, NULL));
    pthread_join(t, &r);
    CHECK(r == NULL);
    CHECKF(!strcmp(kept, fkv_last_error()), "this thread's detail changed: '%s' -> '%s'", kept, fkv_last_error());
    return check_done();
}
