/* A heap that adopts an ownerless slab takes one whose blocks its thread
 * holds before a newer one (struct hak_slab's xaffine, _hak_slab_acquire):
 *  - two heaps each detach a slab with a block out; each adopts its own
 *    back, though the other's is the newest on the shared list;
 *  - a heap that returns a block to another heap's ownerless slab (a spill
 *    of blocks it inherited) adopts that slab first, before a newer one;
 *  - with no slab of its own listed, a heap adopts the newest.
 * The heaps are stand-ins: a slab only records and compares them. */
#include "testing.h"
#include "hakmem_internal.h"

static struct hak_heap heap_a, heap_b;

/* A fresh slab of class c for h, with one block out (as if handed out). */
static struct hak_slab *fresh_with_block(struct hak_heap *h, unsigned c)
{
    bool adopted = true;
    struct hak_slab *s = _hak_slab_acquire(h, c, true, &adopted);
    CHECK(s != NULL && !adopted);
    if (s) s->carved = s->used = 1;
    return s;
}

static struct hak_slab *adopt(struct hak_heap *h, unsigned c)
{
    bool adopted = false;
    struct hak_slab *s = _hak_slab_acquire(h, c, false, &adopted);
    CHECK(s == NULL || adopted);
    return s;
}

int main(void)
{
    void *warm = hak_malloc(1);                /* initializes the classes and pools */
    CHECK(warm != NULL);
    unsigned c = _hak_class_of_size(1280);     /* a class nothing else here uses */
    CHECK(_hak_slab_pools[c].partial == NULL);

    struct hak_slab *sa = fresh_with_block(&heap_a, c), *sb = fresh_with_block(&heap_b, c);
    if (!sa || !sb) TEST_END();
    CHECK(sa != sb);

    /* Own slabs first: b's is the newest, a still adopts its own. */
    _hak_slab_detach(&heap_a, sa);
    _hak_slab_detach(&heap_b, sb);
    CHECK(_hak_slab_pools[c].partial == sb);
    CHECKF(adopt(&heap_a, c) == sa, "a adopted another heap's slab before its own");
    CHECK(adopt(&heap_b, c) == sb);

    /* A block b returns to one of a's ownerless slabs makes it b's first,
     * before a newer one of a's. */
    struct hak_slab *sc = fresh_with_block(&heap_a, c);
    if (!sc) TEST_END();
    _hak_slab_detach(&heap_a, sa);
    _hak_slab_detach(&heap_a, sc);
    CHECK(_hak_slab_pools[c].partial == sc);
    void **block = (void **)sa->start;         /* the block out of sa (never carved: */
    hak_track_mem_undefined(block, 2 * sizeof(void *));   /* the ASan build poisons it) */
    hak_link_set(block, NULL);
    _hak_slab_return(&heap_b, c, block, 1);
    CHECKF(adopt(&heap_b, c) == sa, "b did not adopt the slab it returned a block to");
    CHECK(adopt(&heap_a, c) == sc);
    CHECK(adopt(&heap_a, c) == NULL);

    /* Nothing of its own is listed: the newest. */
    _hak_slab_detach(&heap_a, sc);
    CHECK(adopt(&heap_b, c) == sc);

    hak_free(warm);
    TEST_END();
}
