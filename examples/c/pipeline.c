/*
 * A two-stage pipeline on the embedded runtime: a paced camera thread puts 8x8 grey frames
 * on a bounded channel; a detector thread gets them in order, computes each frame's mean,
 * and consumes it. The runtime reclaims consumed frames, so memory stays bounded.
 *
 *   pipeline [frames] [fps]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "stampede.h"

#define SIDE 8

struct stage {
    stp_runtime *rt;
    stp_channel *frames;
    int64_t count;
    double fps;
    int failed;
};

#define TRY(call)                                                                            \
    do {                                                                                     \
        stp_status st_ = (call);                                                             \
        if (st_ != STP_OK) {                                                                 \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, stp_status_name(st_),     \
                    stp_last_error());                                                       \
            s->failed = 1;                                                                   \
            goto done;                                                                       \
        }                                                                                    \
    } while (0)

static void *camera(void *arg) {
    struct stage *s = arg;
    stp_task *task = NULL;
    stp_channel_out *out = NULL;
    stp_pacer *pacer = NULL;
    uint64_t period_us = (uint64_t)(1e6 / s->fps);
    TRY(stp_task_new(s->rt, 0, "camera", &task));
    TRY(stp_channel_attach_output(task, s->frames, &out));
    TRY(stp_pacer_new(period_us, period_us, STP_LATE_CONTINUE, &pacer));
    for (int64_t t = 0; t < s->count; t++) {
        stp_tick tick;
        TRY(stp_pacer_sync(pacer, t, &tick, NULL));
        uint8_t px[SIDE * SIDE];
        for (int i = 0; i < SIDE * SIDE; i++) px[i] = (uint8_t)(t + i);
        size_t shape[2] = {SIDE, SIDE};
        stp_item *frame = NULL;
        TRY(stp_item_array(STP_U8, 2, shape, px, sizeof px, &frame));
        stp_status st = stp_channel_put(out, t, frame, 0, STP_FOREVER);
        stp_item_free(frame);
        TRY(st);
        /* Virtual time follows the frames: nothing below t + 1 will come from this task. */
        TRY(stp_task_set_virtual_time(task, t + 1));
    }
done:
    stp_pacer_free(pacer);
    stp_channel_out_free(out);
    stp_task_free(task);
    return NULL;
}

static void *detector(void *arg) {
    struct stage *s = arg;
    stp_task *task = NULL;
    stp_channel_in *in = NULL;
    TRY(stp_task_new(s->rt, 0, "detector", &task));
    TRY(stp_channel_attach_input(task, s->frames, &in));
    for (int64_t n = 0; n < s->count; n++) {
        int64_t ts;
        stp_item *frame = NULL;
        TRY(stp_channel_get(in, STP_NEXT_UNSEEN, 0, 5000, &ts, &frame));
        size_t len = 0;
        const uint8_t *px = stp_item_data(frame, &len);
        unsigned sum = 0;
        for (size_t i = 0; i < len; i++) sum += px[i];
        if (ts % 10 == 0) printf("frame %lld: mean %.1f\n", (long long)ts, (double)sum / len);
        stp_item_free(frame);
        TRY(stp_channel_consume(in, ts));
        TRY(stp_task_set_virtual_time(task, ts + 1));
    }
done:
    stp_channel_in_free(in);
    stp_task_free(task);
    return NULL;
}

int main(int argc, char **argv) {
    struct stage stage = {.count = argc > 1 ? atoll(argv[1]) : 50,
                          .fps = argc > 2 ? atof(argv[2]) : 100};
    struct stage *s = &stage;
    if (s->count <= 0 || s->fps <= 0) {
        fprintf(stderr, "usage: %s [frames > 0] [fps > 0]\n", argv[0]);
        return 2;
    }
    printf("stampede %s\n", stp_version());
    TRY(stp_runtime_new(&s->rt));
    TRY(stp_channel_new(s->rt, "frames", 4, 0, &s->frames));
    pthread_t cam, det;
    pthread_create(&cam, NULL, camera, s);
    pthread_create(&det, NULL, detector, s);
    pthread_join(cam, NULL);
    pthread_join(det, NULL);
    if (!s->failed) printf("%lld frames through the pipeline\n", (long long)s->count);
done:
    stp_channel_free(s->frames);
    stp_runtime_free(s->rt);
    return s->failed;
}
