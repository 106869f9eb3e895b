/* The one intrusive doubly-linked list of the core: chunks linked through
 * an fkv__link member, named by its offset (FKV__LINK(member)), so that one
 * chunk can be on several lists at once (the young FIFO or a TTL list, the
 * cold FIFO, the host LRU and its tenant's, its parent's extensions, every
 * live chunk).  A list knows its head and tail; a chunk off every list of
 * a member has both links NULL.  Debug builds (no NDEBUG) check on every
 * unlink that the neighbours point back at the chunk. */
#ifndef FKV_CORE_LIST_H
#define FKV_CORE_LIST_H

#include <assert.h>
#include <stddef.h>

typedef struct fkv__chunk fkv__chunk;

typedef struct fkv__link {
    fkv__chunk *prev, *next;
} fkv__link;

typedef struct fkv__list {
    fkv__chunk *head, *tail;
} fkv__list;

/* The offset of a chunk's link member, e.g. FKV__LINK(quant.lk). */
#define FKV__LINK(member) offsetof(struct fkv__chunk, member)

static inline fkv__link *fkv__link_of(const fkv__chunk *ch, size_t off)
{
    return (fkv__link *)((char *)ch + off);
}

/* ch is on the list (its links, or the list's head, name it). */
static inline int fkv__list_has(const fkv__list *l, const fkv__chunk *ch, size_t off)
{
    const fkv__link *k = fkv__link_of(ch, off);
    return k->prev || k->next || l->head == ch;
}

static inline void fkv__list_push_back(fkv__list *l, fkv__chunk *ch, size_t off)
{
    fkv__link *k = fkv__link_of(ch, off);
    k->prev = l->tail;
    k->next = NULL;
    if (l->tail) fkv__link_of(l->tail, off)->next = ch;
    else l->head = ch;
    l->tail = ch;
}

static inline void fkv__list_push_front(fkv__list *l, fkv__chunk *ch, size_t off)
{
    fkv__link *k = fkv__link_of(ch, off);
    k->prev = NULL;
    k->next = l->head;
    if (l->head) fkv__link_of(l->head, off)->prev = ch;
    else l->tail = ch;
    l->head = ch;
}

/* Puts ch right after `at`, which is on the list. */
static inline void fkv__list_insert_after(fkv__list *l, fkv__chunk *at, fkv__chunk *ch, size_t off)
{
    fkv__link *a = fkv__link_of(at, off), *k = fkv__link_of(ch, off);
    k->prev = at;
    k->next = a->next;
    if (a->next) fkv__link_of(a->next, off)->prev = ch;
    else l->tail = ch;
    a->next = ch;
}

/* Takes ch off the list it is on (it must be on it). */
static inline void fkv__list_unlink(fkv__list *l, fkv__chunk *ch, size_t off)
{
    fkv__link *k = fkv__link_of(ch, off);
    assert(k->prev ? fkv__link_of(k->prev, off)->next == ch : l->head == ch);
    assert(k->next ? fkv__link_of(k->next, off)->prev == ch : l->tail == ch);
    if (k->prev) fkv__link_of(k->prev, off)->next = k->next;
    else l->head = k->next;
    if (k->next) fkv__link_of(k->next, off)->prev = k->prev;
    else l->tail = k->prev;
    k->prev = k->next = NULL;
}

#endif
