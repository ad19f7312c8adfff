/*
 * PN (CableS Table 5): counts the primes below a limit with worker threads that take the
 * next block of candidates from a shared counter under a mutex and add their count under
 * it. A plain pthreads program: built with -DSTAMPEDE it includes Stampede's pthreads face
 * instead, and its threads run across address spaces (STAMPEDE_SPACES).
 *
 *   pn [limit] [threads]   exits 0 when the count matches sequential code
 */
#ifdef STAMPEDE
#include <stampede/pthread.h>
#else
#include <pthread.h>
#endif
#include <stdio.h>
#include <stdlib.h>

#define BLOCK 500

struct shared {
    pthread_mutex_t lock;
    long next;
    long limit;
    long primes;
};

static int is_prime(long n) {
    if (n < 2)
        return 0;
    for (long d = 2; d * d <= n; d++)
        if (n % d == 0)
            return 0;
    return 1;
}

static void *worker(void *arg) {
    struct shared *s = arg;
    long found = 0;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        long from = s->next;
        s->next += BLOCK;
        pthread_mutex_unlock(&s->lock);
        if (from >= s->limit)
            break;
        for (long n = from; n < from + BLOCK && n < s->limit; n++)
            found += is_prime(n);
    }
    pthread_mutex_lock(&s->lock);
    s->primes += found;
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

int main(int argc, char **argv) {
    long limit = argc > 1 ? atol(argv[1]) : 200000;
    int n = argc > 2 ? atoi(argv[2]) : 6;
    struct shared *s = malloc(sizeof *s);
    pthread_t *t = malloc(n * sizeof *t);
    if (!s || !t || n < 1)
        return 2;
    pthread_mutex_init(&s->lock, NULL);
    s->next = 0;
    s->limit = limit;
    s->primes = 0;
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], NULL, worker, s) != 0) {
            fprintf(stderr, "pn: pthread_create failed\n");
            return 1;
        }
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    long expect = 0;
    for (long k = 0; k < limit; k++)
        expect += is_prime(k);
    printf("PN: %ld primes below %ld by %d threads (sequential: %ld)\n", s->primes, limit, n,
           expect);
    pthread_mutex_destroy(&s->lock);
    int ok = s->primes == expect;
    free(t);
    free(s);
    return ok ? 0 : 1;
}
