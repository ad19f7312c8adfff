/*
 * The pthreads face across address spaces (run with STAMPEDE_SPACES=3): exit values,
 * cancellation, a reusable barrier, trylock, timed waits, and heap blocks made, grown and
 * freed in other spaces. Prints TAP; exits non-zero on a failure.
 */
#include <stampede/pthread.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int failed, tests;

static void check(int ok, const char *what) {
    tests++;
    if (!ok)
        failed++;
    printf("%s %d - %s\n", ok ? "ok" : "not ok", tests, what);
}

struct shared {
    pthread_mutex_t lock;
    pthread_cond_t never;
    pthread_barrier_t barrier;
    int serial[4];
    int arrived[4];
    char *grown;
    int cleaned;
    int once_serial;
};

static void *exits(void *arg) {
    (void)arg;
    pthread_exit((void *)42);
}

static void *spins(void *arg) {
    (void)arg;
    for (;;) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        pthread_testcancel();
    }
    return NULL;
}

static void *crosses(void *arg) {
    struct shared *s = arg;
    for (int round = 0; round < 4; round++) {
        pthread_mutex_lock(&s->lock);
        s->arrived[round]++;
        pthread_mutex_unlock(&s->lock);
        if (pthread_barrier_wait(&s->barrier) == PTHREAD_BARRIER_SERIAL_THREAD) {
            pthread_mutex_lock(&s->lock);
            s->serial[round]++;
            pthread_mutex_unlock(&s->lock);
        }
    }
    return NULL;
}

static void clean(void *arg) {
    struct shared *s = arg;
    s->cleaned = 1;
}

static void *spins_with_cleanup(void *arg) {
    pthread_cleanup_push(clean, arg);
    for (;;) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        pthread_testcancel();
    }
    pthread_cleanup_pop(0);
    return NULL;
}

static void *waits_once(void *arg) {
    struct shared *s = arg;
    if (pthread_barrier_wait(&s->barrier) == PTHREAD_BARRIER_SERIAL_THREAD) {
        pthread_mutex_lock(&s->lock);
        s->once_serial++;
        pthread_mutex_unlock(&s->lock);
    }
    return NULL;
}

static void *trylocks(void *arg) {
    struct shared *s = arg;
    int e = pthread_mutex_trylock(&s->lock);
    if (e == 0)
        pthread_mutex_unlock(&s->lock);
    return (void *)(long)e;
}

static void *holds(void *arg) {
    struct shared *s = arg;
    return (void *)(long)pthread_mutex_trylock(&s->lock);
}

static void *grows(void *arg) {
    struct shared *s = arg;
    char *p = realloc(s->grown, 100000);
    if (!p)
        return (void *)1;
    strcpy(p + 90000, "grown elsewhere");
    s->grown = p;
    return NULL;
}

int main(void) {
    struct shared *s = calloc(1, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->never, NULL);
    pthread_barrier_init(&s->barrier, NULL, 3);

    pthread_t t[3];
    void *ret = NULL;
    pthread_create(&t[0], NULL, exits, NULL);
    check(pthread_join(t[0], &ret) == 0 && ret == (void *)42, "pthread_exit's value reaches the joiner");
    check(pthread_join(t[0], &ret) == ESRCH, "a thread is joined once");

    pthread_create(&t[0], NULL, spins, NULL);
    check(pthread_cancel(t[0]) == 0, "a running thread is cancelled");
    check(pthread_join(t[0], &ret) == 0 && ret == PTHREAD_CANCELED, "a cancelled thread's joiner gets PTHREAD_CANCELED");

    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, crosses, s);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    int rounds_ok = 1;
    for (int r = 0; r < 4; r++)
        rounds_ok &= s->serial[r] == 1 && s->arrived[r] == 3;
    check(rounds_ok, "a barrier of three threads in three spaces is reused four times, one serial thread each");

    pthread_create(&t[0], NULL, spins_with_cleanup, s);
    pthread_cancel(t[0]);
    check(pthread_join(t[0], &ret) == 0 && ret == PTHREAD_CANCELED && s->cleaned == 1,
          "a cancelled thread runs its cleanup handlers, and their writes are seen by the joiner");

    for (int phase = 0; phase < 2; phase++) {
        for (int i = 0; i < 3; i++)
            pthread_create(&t[i], NULL, waits_once, s);
        for (int i = 0; i < 3; i++)
            pthread_join(t[i], NULL);
    }
    check(s->once_serial == 2, "new threads in every phase pass a barrier, one serial thread each");

    int free_ok = 1;
    for (int i = 0; i < 3; i++) { /* one at a time, in each space in turn */
        pthread_create(&t[0], NULL, trylocks, s);
        pthread_join(t[0], &ret);
        free_ok &= (long)ret == 0;
    }
    check(free_ok, "trylock of a free mutex succeeds from every space");

    pthread_mutex_lock(&s->lock);
    pthread_create(&t[0], NULL, holds, s);
    pthread_join(t[0], &ret);
    check((long)ret == EBUSY, "trylock of a mutex held in another space is EBUSY");
    struct timespec at;
    clock_gettime(CLOCK_REALTIME, &at);
    at.tv_nsec += 50 * 1000000;
    if (at.tv_nsec >= 1000000000) {
        at.tv_sec++;
        at.tv_nsec -= 1000000000;
    }
    check(pthread_cond_timedwait(&s->never, &s->lock, &at) == ETIMEDOUT, "a timed wait nobody signals times out");
    check(pthread_mutex_unlock(&s->lock) == 0, "the mutex is held again after the timed wait");
    check(pthread_mutex_unlock(&s->lock) == EPERM, "unlocking a mutex not held is EPERM");

    s->grown = malloc(16);
    strcpy(s->grown, "made here");
    pthread_create(&t[0], NULL, grows, s);
    pthread_join(t[0], &ret);
    check(ret == NULL && strcmp(s->grown, "made here") == 0 && strcmp(s->grown + 90000, "grown elsewhere") == 0,
          "a block made here is grown in another space, keeping its bytes");
    free(s->grown);

    static pthread_mutex_t mine = PTHREAD_MUTEX_INITIALIZER;
    check(pthread_mutex_lock(&mine) == 0 && pthread_mutex_unlock(&mine) == 0, "a static mutex works in its own space");
    check(pthread_create(&t[0], NULL, (void *(*)(void *))(void (*)(void))strlen, NULL) == EINVAL,
          "a start routine outside the program is refused");

    pthread_barrier_destroy(&s->barrier);
    pthread_cond_destroy(&s->never);
    pthread_mutex_destroy(&s->lock);
    free(s);
    printf("1..%d\n", tests);
    return failed ? 1 : 0;
}
