/* The MIN bound per tier: the most prompt tokens any cache of a given size
 * could find, for the device alone, device + host, and all tiers.
 *
 * The reference string: the requests in arrival order; each reads the full
 * pages of its first prompt - 1 tokens (what a match can find) and then
 * writes the full pages of its first prompt + output - 1 tokens (what a
 * run computes: the last output token is emitted, never appended).  A
 * page is named by the chained key of the tokens up to its end (the
 * library's fkv_page_key from the cache_salt's seed), so two pages meet
 * only when their whole prefix is equal.  A cache of K pages may keep any
 * page it has seen; a read of a kept page is a hit.
 *
 * Belady's MIN with bypass (keep the K pages whose next read is nearest;
 * a page never read again is not kept) maximises the number of hits over
 * unit-size pages, so no policy at that size finds more:
 *  - not the tiers' chunks (whole 64-token chunks, LRU below the device):
 *    a coarser unit finds at most what pages find;
 *  - not a prefix-closed run: any kept page of the prompt counts here, a
 *    prefix match stops at the first missing one;
 *  - not pages written early: a request's pages are here at its arrival,
 *    before any real run has computed them;
 *  - not the memory running requests hold: the whole size is for reuse.
 * Ties go to the page deeper in its prompt, so a prompt's tail leaves
 * before its head and the kept pages are prefix runs wherever the choice
 * is free.
 *
 * Two things a real run can do that this does not see, so that a row may
 * pass the bound: a request served out of arrival order reading pages of
 * one that arrived after it (only between requests of one namespace, so
 * within a tenant under the simulator's schedulers), and K/V kept at fewer
 * bits than 16 (fp8, int8, int4: more tokens in the same bytes).  The
 * callers size K from 16-bit K/V bytes. */
#ifndef FKV_SIM_MIN_BOUND_H
#define FKV_SIM_MIN_BOUND_H

#include <stddef.h>
#include <stdint.h>

#include "fairkv.h"
#include "sim/workload.h"

/* For each of the n cache sizes cap_pages[i] (pages of page_tokens), the
 * prompt tokens MIN finds (hit_tokens[i]); *prompt_tokens gets the
 * workload's prompt tokens, the denominator of the simulator's hit rates.
 * FKV_EINVAL: page_tokens 0; FKV_ENOMEM. */
fkv_status fkv_min_bound(const fkv_workload *w, uint32_t page_tokens, uint32_t block_tokens, const uint64_t *cap_pages,
                         size_t n, uint64_t *hit_tokens, uint64_t *prompt_tokens);

#endif
