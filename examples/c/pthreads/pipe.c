/*
 * PIPE (CableS Table 5): a threaded pipeline. Each stage is a thread that takes a value
 * from its mailbox (a mutex, a condition and a full flag), computes, and puts the result
 * in the next stage's mailbox; the last stage stores the results. A plain pthreads
 * program: built with -DSTAMPEDE it includes Stampede's pthreads face instead, and the
 * stages run across address spaces (STAMPEDE_SPACES).
 *
 *   pipe [values] [stages]   exits 0 when every result matches sequential code
 */
#ifdef STAMPEDE
#include <stampede/pthread.h>
#else
#include <pthread.h>
#endif
#include <stdio.h>
#include <stdlib.h>

struct mailbox {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int full;
    long value;
};

struct stage {
    int k;
    long values;
    struct mailbox *in, *out;
    long *results;
};

static long calc(int k, long v) { return v * 3 + k; }

static void put(struct mailbox *m, long v) {
    pthread_mutex_lock(&m->lock);
    while (m->full)
        pthread_cond_wait(&m->changed, &m->lock);
    m->value = v;
    m->full = 1;
    pthread_cond_broadcast(&m->changed);
    pthread_mutex_unlock(&m->lock);
}

static long take(struct mailbox *m) {
    pthread_mutex_lock(&m->lock);
    while (!m->full)
        pthread_cond_wait(&m->changed, &m->lock);
    long v = m->value;
    m->full = 0;
    pthread_cond_broadcast(&m->changed);
    pthread_mutex_unlock(&m->lock);
    return v;
}

static void *run_stage(void *arg) {
    struct stage *s = arg;
    for (long i = 0; i < s->values; i++) {
        long v = calc(s->k, take(s->in));
        if (s->out)
            put(s->out, v);
        else
            s->results[i] = v;
    }
    return NULL;
}

int main(int argc, char **argv) {
    long values = argc > 1 ? atol(argv[1]) : 40;
    int stages = argc > 2 ? atoi(argv[2]) : 3;
    if (stages < 1 || values < 1)
        return 2;
    struct mailbox *box = calloc(stages, sizeof *box);
    struct stage *st = calloc(stages, sizeof *st);
    long *results = calloc(values, sizeof *results);
    pthread_t *t = calloc(stages, sizeof *t);
    if (!box || !st || !results || !t)
        return 2;
    for (int k = 0; k < stages; k++) {
        pthread_mutex_init(&box[k].lock, NULL);
        pthread_cond_init(&box[k].changed, NULL);
    }
    for (int k = 0; k < stages; k++) {
        st[k] = (struct stage){k + 1, values, &box[k], k + 1 < stages ? &box[k + 1] : NULL,
                               results};
        if (pthread_create(&t[k], NULL, run_stage, &st[k]) != 0) {
            fprintf(stderr, "pipe: pthread_create failed\n");
            return 1;
        }
    }
    for (long i = 0; i < values; i++)
        put(&box[0], i);
    for (int k = 0; k < stages; k++)
        pthread_join(t[k], NULL);
    long wrong = 0;
    for (long i = 0; i < values; i++) {
        long v = i;
        for (int k = 1; k <= stages; k++)
            v = calc(k, v);
        wrong += results[i] != v;
    }
    printf("PIPE: %ld values through %d stages, %ld wrong\n", values, stages, wrong);
    for (int k = 0; k < stages; k++) {
        pthread_cond_destroy(&box[k].changed);
        pthread_mutex_destroy(&box[k].lock);
    }
    free(t);
    free(results);
    free(st);
    free(box);
    return wrong == 0 ? 0 : 1;
}
