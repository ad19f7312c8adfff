/*
 * Stampede's pthreads face: include this instead of <pthread.h> and a pthreads program's
 * threads run across the address spaces of a cluster (CableS' single system image).
 *
 * - pthread_create places each thread round-robin over the address spaces (set
 *   STAMPEDE_SPACES=N to run N; STAMPEDE_PLACEMENT=round-robin|least-loaded|here); the
 *   other spaces are this program again, started before main, serving threads.
 * - malloc, calloc, realloc and free use the global heap: memory at the same address in
 *   every space, kept release-consistent by the mutexes, conditions, barriers, create and
 *   join (data written before an unlock is seen after the next lock).
 * - Mutexes, conditions and barriers in the global heap are cluster-wide; ones elsewhere
 *   (statics, the stack) belong to their address space. A mutex whose holder's space died
 *   is locked with EOWNERDEAD, as a robust mutex.
 * - Static variables are each space's own: share data through malloc'd memory.
 * - Thread-specific data (pthread_key_*) is the C library's: each thread runs in one space.
 * - Attributes are ignored; cancellation is deferred, taken at pthread_testcancel,
 *   condition waits and joins, and runs the handlers of pthread_cleanup_push.
 * - rwlocks, spinlocks, pthread_once and POSIX semaphores are not mapped: they act within
 *   one address space. Memory the C library allocates (strdup) is private, and free hands
 *   it back to the library; a library function that grows a buffer itself (getline) must
 *   not be given one from malloc. A system call's buffer in the heap must be written to
 *   first since the last lock (else the call fails with EFAULT).
 *
 * pthread_start() and pthread_end() are optional: the face starts before main and ends at
 * exit.
 */
#ifndef STAMPEDE_PTHREAD_H
#define STAMPEDE_PTHREAD_H

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <stampede.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Runs a start routine where pthread_exit and cancellation can leave it. */
static inline void *stp__trampoline(stp_pthread_start_fn start, void *arg) {
    jmp_buf jb;
    void *volatile ret = NULL;
    void *prev = stp_pthread_frame_enter(&jb);
    if (setjmp(jb) == 0)
        ret = start(arg);
    else
        ret = stp_pthread_exit_value();
    stp_pthread_frame_leave(prev);
    return ret;
}

__attribute__((constructor, used)) static void stp__pthread_init(void) {
    int e = stp_pthread_start(stp__trampoline);
    if (e != 0) {
        /* The program runs on, in this address space only: say why. */
        fprintf(stderr, "stampede: the pthreads face did not start (%d): %s\n", e,
                stp_last_error());
    }
}

static inline int pthread_start(void) { return stp_pthread_start(stp__trampoline); }
static inline void pthread_end(void) { stp_pthread_end(); }

/* A handler of pthread_cleanup_push, on the pushing thread's stack. */
struct stp__cleanup {
    void (*routine)(void *);
    void *arg;
    struct stp__cleanup *next;
};

__attribute__((noreturn)) static inline void stp__pthread_exit(void *value) {
    /* The cleanup handlers still pushed run first, innermost first. */
    struct stp__cleanup *c;
    while ((c = (struct stp__cleanup *)stp_pthread_cleanup_top()) != NULL) {
        stp_pthread_cleanup_set(c->next);
        c->routine(c->arg);
    }
    void *jb = stp_pthread_frame_exit(value);
    if (jb)
        longjmp(*(jmp_buf *)jb, 1);
    /* Not a thread the face started (main): the C library's exit of a thread. */
    pthread_exit(value);
}

static inline void stp__pthread_testcancel(void) {
    if (stp_pthread_cancelled())
        stp__pthread_exit(PTHREAD_CANCELED);
}

/* A cancellation point's result: a cancelled thread leaves here. */
static inline int stp__cancel_point(int e) {
    if (e == ECANCELED || stp_pthread_cancelled())
        stp__pthread_exit(PTHREAD_CANCELED);
    return e;
}

static inline int stp__pthread_join(stp_pthread_t t, void **ret) {
    return stp__cancel_point(stp_pthread_join(t, ret));
}

static inline int stp__pthread_cond_wait(stp_pthread_cond_t *c, stp_pthread_mutex_t *m) {
    return stp__cancel_point(stp_pthread_cond_wait(c, m, false, 0, 0));
}

static inline int stp__pthread_cond_timedwait(stp_pthread_cond_t *c, stp_pthread_mutex_t *m,
                                              const struct timespec *at) {
    return stp__cancel_point(stp_pthread_cond_wait(c, m, true, at->tv_sec, at->tv_nsec));
}


static inline int stp__pthread_equal(stp_pthread_t a, stp_pthread_t b) { return a == b; }

#define STP_PTHREAD_MUTEX_INITIALIZER {{0, 0, 0, 0, 0}}
#define STP_PTHREAD_COND_INITIALIZER {{0, 0, 0, 0, 0, 0}}

#undef PTHREAD_MUTEX_INITIALIZER
#undef PTHREAD_COND_INITIALIZER
#define PTHREAD_MUTEX_INITIALIZER STP_PTHREAD_MUTEX_INITIALIZER
#define PTHREAD_COND_INITIALIZER STP_PTHREAD_COND_INITIALIZER

#define pthread_t stp_pthread_t
#define pthread_mutex_t stp_pthread_mutex_t
#define pthread_cond_t stp_pthread_cond_t
#define pthread_barrier_t stp_pthread_barrier_t

#define pthread_create(t, attr, start, arg) \
    stp_pthread_create((t), (const void *)(attr), (start), (arg))
#define pthread_join stp__pthread_join
#define pthread_detach stp_pthread_detach
#define pthread_exit stp__pthread_exit
#define pthread_cancel stp_pthread_cancel
#define pthread_testcancel stp__pthread_testcancel
#define pthread_self stp_pthread_self
#define pthread_equal stp__pthread_equal

#define pthread_mutex_init(m, attr) stp_pthread_mutex_init((m), (const void *)(attr))
#define pthread_mutex_destroy stp_pthread_mutex_destroy
#define pthread_mutex_lock stp_pthread_mutex_lock
#define pthread_mutex_trylock stp_pthread_mutex_trylock
#define pthread_mutex_unlock stp_pthread_mutex_unlock

#define pthread_cond_init(c, attr) stp_pthread_cond_init((c), (const void *)(attr))
#define pthread_cond_destroy stp_pthread_cond_destroy
#define pthread_cond_wait stp__pthread_cond_wait
#define pthread_cond_timedwait stp__pthread_cond_timedwait
#define pthread_cond_signal stp_pthread_cond_signal
#define pthread_cond_broadcast stp_pthread_cond_broadcast

#define pthread_barrier_init(b, attr, n) \
    stp_pthread_barrier_init((b), (const void *)(attr), (n))
#define pthread_barrier_destroy stp_pthread_barrier_destroy
#define pthread_barrier_wait stp_pthread_barrier_wait

#undef pthread_cleanup_push
#undef pthread_cleanup_pop
#define pthread_cleanup_push(routine, arg)                                               \
    do {                                                                                 \
        struct stp__cleanup stp__cleanup_ = {(routine), (arg),                           \
                                             (struct stp__cleanup *)stp_pthread_cleanup_top()}; \
        stp_pthread_cleanup_set(&stp__cleanup_);
#define pthread_cleanup_pop(execute)                                                     \
        stp_pthread_cleanup_set(stp__cleanup_.next);                                     \
        if (execute)                                                                     \
            stp__cleanup_.routine(stp__cleanup_.arg);                                    \
    } while (0)

#define malloc stp_malloc
#define calloc stp_calloc
#define realloc stp_realloc
#define free stp_free

#ifdef __cplusplus
}
#endif

#endif /* STAMPEDE_PTHREAD_H */
