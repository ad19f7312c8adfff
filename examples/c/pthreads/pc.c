/*
 * PC (CableS Table 5): a producer and a consumer thread over a bounded buffer with a mutex
 * and two conditions (not full, not empty). A plain pthreads program: built with
 * -DSTAMPEDE it includes Stampede's pthreads face instead, and the two threads run in
 * different address spaces (STAMPEDE_SPACES).
 *
 *   pc [items]   exits 0 when the consumer got every item, in order
 */
#ifdef STAMPEDE
#include <stampede/pthread.h>
#else
#include <pthread.h>
#endif
#include <stdio.h>
#include <stdlib.h>

#define SLOTS 8

struct buffer {
    pthread_mutex_t lock;
    pthread_cond_t not_full, not_empty;
    long slot[SLOTS];
    int head, count;
    long items;
    long sum;
    int in_order;
};

static void *producer(void *arg) {
    struct buffer *b = arg;
    for (long i = 1; i <= b->items; i++) {
        pthread_mutex_lock(&b->lock);
        while (b->count == SLOTS)
            pthread_cond_wait(&b->not_full, &b->lock);
        b->slot[(b->head + b->count) % SLOTS] = i;
        b->count++;
        pthread_cond_signal(&b->not_empty);
        pthread_mutex_unlock(&b->lock);
    }
    return NULL;
}

static void *consumer(void *arg) {
    struct buffer *b = arg;
    long expect = 1;
    for (long i = 0; i < b->items; i++) {
        pthread_mutex_lock(&b->lock);
        while (b->count == 0)
            pthread_cond_wait(&b->not_empty, &b->lock);
        long v = b->slot[b->head];
        b->head = (b->head + 1) % SLOTS;
        b->count--;
        pthread_cond_signal(&b->not_full);
        pthread_mutex_unlock(&b->lock);
        if (v != expect++)
            b->in_order = 0;
        b->sum += v;
    }
    return NULL;
}

int main(int argc, char **argv) {
    long items = argc > 1 ? atol(argv[1]) : 200;
    struct buffer *b = calloc(1, sizeof *b);
    if (!b)
        return 2;
    pthread_mutex_init(&b->lock, NULL);
    pthread_cond_init(&b->not_full, NULL);
    pthread_cond_init(&b->not_empty, NULL);
    b->items = items;
    b->in_order = 1;
    pthread_t p, c;
    if (pthread_create(&c, NULL, consumer, b) != 0 || pthread_create(&p, NULL, producer, b) != 0) {
        fprintf(stderr, "pc: pthread_create failed\n");
        return 1;
    }
    pthread_join(p, NULL);
    pthread_join(c, NULL);
    long expect = items * (items + 1) / 2;
    printf("PC: consumed %ld items, sum %ld (expected %ld), %s\n", items, b->sum, expect,
           b->in_order ? "in order" : "OUT OF ORDER");
    int ok = b->sum == expect && b->in_order;
    pthread_cond_destroy(&b->not_full);
    pthread_cond_destroy(&b->not_empty);
    pthread_mutex_destroy(&b->lock);
    free(b);
    return ok ? 0 : 1;
}
