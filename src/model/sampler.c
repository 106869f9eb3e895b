#include "model/sampler.h"

#include <math.h>
#include <stdlib.h>

struct fkv_prob {
    float p;
    int32_t id;
};

fkv_status fkv_sampler_init(fkv_sampler *s, uint32_t n_vocab, float temperature, float top_p, uint64_t seed)
{
    if (!n_vocab || !(temperature >= 0) || !isfinite(temperature) || !(top_p > 0 && top_p <= 1)) return FKV_EINVAL;
    s->temperature = temperature;
    s->top_p = top_p;
    s->n_vocab = n_vocab;
    fkv_rng_seed(&s->rng, seed);
    s->work = malloc((size_t)n_vocab * sizeof *s->work);
    return s->work ? FKV_OK : FKV_ENOMEM;
}

void fkv_sampler_free(fkv_sampler *s)
{
    free(s->work);
    s->work = NULL;
}

int32_t fkv_argmax(const float *logits, uint32_t n)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    return (int32_t)best;
}

/* descending probability, then ascending id: a total order, so qsort's
 * instability cannot change the result */
static int by_prob(const void *a, const void *b)
{
    const struct fkv_prob *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

int32_t fkv_sample(fkv_sampler *s, const float *logits)
{
    uint32_t n = s->n_vocab;
    if (s->temperature == 0) return fkv_argmax(logits, n);
    float mx = logits[fkv_argmax(logits, n)];
    double sum = 0;
    for (uint32_t i = 0; i < n; i++) {
        s->work[i].p = expf((logits[i] - mx) / s->temperature);
        s->work[i].id = (int32_t)i;
        sum += s->work[i].p;
    }
    uint32_t keep = n;
    if (s->top_p < 1) {
        qsort(s->work, n, sizeof *s->work, by_prob);
        double cum = 0;
        for (uint32_t i = 0; i < n; i++) {
            cum += s->work[i].p / sum;
            if (cum >= s->top_p) {
                keep = i + 1;
                break;
            }
        }
        sum = 0;
        for (uint32_t i = 0; i < keep; i++) sum += s->work[i].p;
    }
    double u = fkv_rng_unif(&s->rng) * sum, cum = 0;
    for (uint32_t i = 0; i < keep; i++) {
        cum += s->work[i].p;
        if (u < cum) return s->work[i].id;
    }
    return s->work[keep - 1].id; /* rounding left u at the top */
}
