/* The core's intrusive list (src/core/list.h): one chunk on two lists at
 * once through two link members, pushes at both ends, insertion after a
 * member, unlinks at the head, the tail and the middle, membership. */
#include <string.h>

#include "check.h"
#include "core/chunk.h"

/* The ids along the list through member `off`, head to tail, as a string
 * ("" when empty); also checks the back links and the tail. */
static const char *walk(const fkv__list *l, size_t off)
{
    static char buf[64];
    size_t n = 0;
    const fkv__chunk *prev = NULL;
    buf[0] = 0;
    for (const fkv__chunk *ch = l->head; ch && n < sizeof buf - 2; prev = ch, ch = fkv__link_of(ch, off)->next) {
        if (fkv__link_of(ch, off)->prev != prev) return "bad back link";
        buf[n++] = (char)('0' + ch->id);
    }
    buf[n] = 0;
    if (l->tail != prev) return "bad tail";
    return buf;
}

int main(void)
{
    fkv__chunk ch[6];
    memset(ch, 0, sizeof ch);
    for (int i = 0; i < 6; i++) ch[i].id = (uint64_t)i;
    fkv__list a = {0}, b = {0};
    size_t la = FKV__LINK(quant.lk), lb = FKV__LINK(all);
    CHECK(!strcmp(walk(&a, la), ""));
    fkv__list_push_back(&a, &ch[1], la);
    fkv__list_push_back(&a, &ch[2], la);
    fkv__list_push_front(&a, &ch[0], la);
    fkv__list_insert_after(&a, &ch[2], &ch[3], la); /* after the tail: the new tail */
    fkv__list_insert_after(&a, &ch[0], &ch[4], la); /* in the middle */
    CHECK(!strcmp(walk(&a, la), "04123"));
    /* the same chunks on a second list, in another order, through another member */
    for (int i = 4; i >= 0; i--) fkv__list_push_back(&b, &ch[i], lb);
    CHECK(!strcmp(walk(&b, lb), "43210"));
    CHECK(fkv__list_has(&a, &ch[0], la) && fkv__list_has(&a, &ch[3], la) && !fkv__list_has(&a, &ch[5], la));
    fkv__list_unlink(&a, &ch[0], la); /* head */
    fkv__list_unlink(&a, &ch[3], la); /* tail */
    fkv__list_unlink(&a, &ch[1], la); /* middle */
    CHECK(!strcmp(walk(&a, la), "42"));
    CHECK(!fkv__list_has(&a, &ch[0], la) && !ch[0].quant.lk.prev && !ch[0].quant.lk.next);
    CHECK(!strcmp(walk(&b, lb), "43210")); /* the other list is untouched */
    fkv__list_unlink(&a, &ch[4], la);
    fkv__list_unlink(&a, &ch[2], la);
    CHECK(!a.head && !a.tail && !strcmp(walk(&a, la), ""));
    /* a lone member is on its list by the head alone */
    fkv__list_push_front(&a, &ch[5], la);
    CHECK(fkv__list_has(&a, &ch[5], la) && a.head == &ch[5] && a.tail == &ch[5]);
    return check_done();
}
