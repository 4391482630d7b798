/* prim.h: the thread front's accesses that depend on the architecture and
 * the C library, behind one small contract (mimalloc's prim/ idea). Two
 * forms, selected by the compiler's target:
 *   - x86-64 with glibc: inline assembly relative to %fs, written by hand
 *     where GCC 12 spends one more instruction each (a register move; an
 *     address computed apart from the access; the TLS base malloc would
 *     load), and a word of glibc's thread control block as the empty list;
 *   - the portable twin elsewhere, under ThreadSanitizer, and with
 *     -DHAK_PORTABLE=1 (`make PORTABLE=1`): plain access to _hak_thread_tls.
 * Included by hakmem_internal.h only, after struct hak_tls, _hak_thread_tls,
 * HAK_HOME_FIRST and the HAK_FAST / HAK_LIKELY macros.
 *
 * The contract (test_hakapi_prim checks it in the form it is built in):
 *   HAK_PRIM_TP              1: the x86-64 glibc form; 0: the portable twin
 *   hak_size_entry_t         a size-table entry: names one front slot's list
 *   hak_prim_entry(f)        the entry naming front slot f's list (never 0 for f > 0)
 *   hak_prim_front(e)        the front slot that entry e (written, not 0) names
 *   hak_prim_head(e)         the head of list e; e == 0 (an entry not written
 *                            yet) reads a word that must hold NULL
 *   hak_prim_unlink(e, next) after a pop of head(e): head = next, credit + 1
 *   hak_prim_home_push(t, b) pushes b on list t - HAK_HOME_FIRST when it has
 *                            credit, taking one (b's link = old head, through
 *                            hak_link_set); false when
 *                            it has none (credit left at -1)
 *   hak_prim_single_threaded() true only while the process has never had a
 *                            second thread (glibc 2.32 and later says so:
 *                            __libc_single_threaded); the twin: false
 * Entry 0 reads NULL in every thread is checked at initialization
 * (_hak_class_table_init: hak_prim_head(0)); where it does not, the whole
 * size table is written at once so that no entry is 0. */
#ifndef HAKMEM_PRIM_H
#define HAKMEM_PRIM_H

#ifndef HAK_PORTABLE
#define HAK_PORTABLE 0
#endif
#if defined(__x86_64__) && defined(__GLIBC__) && !defined(__SANITIZE_THREAD__) && !HAK_PORTABLE
#define HAK_PRIM_TP 1
#else
#define HAK_PRIM_TP 0
#endif

#if HAK_PRIM_TP
/* ---- x86-64, glibc --------------------------------------------------------
 * An entry is the %fs offset of the list's head less HAK_TCB_ZERO, so that
 * malloc needs no TLS base: %fs:HAK_TCB_ZERO(entry) is the head. Entry 0
 * reads %fs:HAK_TCB_ZERO, a word of glibc's thread control block that reads
 * 0 in every thread (tcbhead_t's __glibc_unused2, kept for its size and never
 * written). */
#define HAK_TCB_ZERO     0x80
typedef int32_t hak_size_entry_t;

HAK_FAST hak_size_entry_t hak_prim_entry(unsigned f) {
  uintptr_t tp;
  __asm__("movq %%fs:0, %0" : "=r"(tp));      /* the thread pointer: %fs:0 holds it */
  return (hak_size_entry_t)((uintptr_t)&_hak_thread_tls.head[f] - tp - HAK_TCB_ZERO);
}
HAK_FAST unsigned hak_prim_front(intptr_t e) {
  intptr_t tls;                               /* the %fs offset of _hak_thread_tls: one load, no thread pointer */
  __asm__("movq _hak_thread_tls@gottpoff(%%rip), %0" : "=r"(tls));
  return (unsigned)((uintptr_t)(e + HAK_TCB_ZERO - tls - (intptr_t)offsetof(struct hak_tls, head)) /
                    sizeof(void *));
}
HAK_FAST void **hak_prim_head(intptr_t e) {
  void **b;
  __asm__ volatile("movq %%fs:%c[z](%[e]), %[b]" : [b] "=a"(b) : [e] "r"(e), [z] "i"(HAK_TCB_ZERO) : "memory");
  return b;
}
HAK_FAST void hak_prim_unlink(intptr_t e, void *next) {
  __asm__ volatile("movq %[next], %%fs:%c[z](%[e])\n\t"
                   "addq $1, %%fs:%c[credit](%[e])"
                   :
                   : [e] "r"(e), [next] "r"(next), [z] "i"(HAK_TCB_ZERO),
                     [credit] "i"(HAK_TCB_ZERO + (long)offsetof(struct hak_tls, credit) -
                                  (long)offsetof(struct hak_tls, head))
                   : "cc", "memory");
}
HAK_FAST bool hak_prim_home_push(uintptr_t t, void **b) {
  void *tp, *old;
  __asm__ goto("movq _hak_thread_tls@gottpoff(%%rip), %[tp]\n\t"
               "subq $1, %%fs:%c[credit](%[tp],%[t],8)\n\t"
               "js %l[none]\n\t"
               "movq %%fs:%c[head](%[tp],%[t],8), %[old]\n\t"
               "movq %[b], %%fs:%c[head](%[tp],%[t],8)"
               : [tp] "=&r"(tp), [old] "=&r"(old)
               : [t] "r"(t), [b] "r"(b),
                 [credit] "i"((long)offsetof(struct hak_tls, credit) - 8L * HAK_HOME_FIRST),
                 [head] "i"((long)offsetof(struct hak_tls, head) - 8L * HAK_HOME_FIRST)
               : "cc", "memory" : none);
  (void)tp;
  hak_link_set(b, old);
  return true;
none:
  return false;
}

#else
/* ---- the portable twin ----------------------------------------------------
 * An entry is the front slot itself; entry 0 reads slot 0's list, which
 * holds no blocks, ever. */
typedef uint16_t hak_size_entry_t;      /* 2 bytes: the size table keeps whole OS pages to give back */
_Static_assert(HAK_NFRONT <= UINT16_MAX, "a front slot fits an entry");

HAK_FAST hak_size_entry_t hak_prim_entry(unsigned f) { return (hak_size_entry_t)f; }
HAK_FAST unsigned hak_prim_front(intptr_t e) { return (unsigned)e; }
HAK_FAST void **hak_prim_head(intptr_t e) { return (void **)_hak_thread_tls.head[e]; }
HAK_FAST void hak_prim_unlink(intptr_t e, void *next) {
  _hak_thread_tls.head[e] = next;
  _hak_thread_tls.credit[e]++;
}
HAK_FAST bool hak_prim_home_push(uintptr_t t, void **b) {
  uintptr_t f = t - HAK_HOME_FIRST;
  if (--_hak_thread_tls.credit[f] < 0) return false;
  hak_link_set(b, _hak_thread_tls.head[f]);
  _hak_thread_tls.head[f] = b;
  return true;
}
#endif

#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 32) && !HAK_PORTABLE
#pragma GCC visibility push(default)     /* glibc's symbol, not one of ours */
#include <sys/single_threaded.h>
#pragma GCC visibility pop
static inline bool hak_prim_single_threaded(void) { return __libc_single_threaded != 0; }
#else
static inline bool hak_prim_single_threaded(void) { return false; }
#endif

#endif
