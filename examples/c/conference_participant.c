/*
 * A video-conference participant in C (docs/conference.md).
 *
 * Joins the conference application as a client of the mixer's address space and runs two
 * threads: a camera that puts synthetic frames on its own channel conf/cam/<id>, paced to a
 * target rate, and a display that gets composites from conf/mix, checks every tile, and
 * counts the frame rate. Prints a JSON line per report interval and a summary at exit.
 *
 *   conference_participant --connect tcp/127.0.0.1:7447 --id 3 [--fps 15] [--size-kb 74]
 *                          [--width 176] [--duration 10] [--report-ms 500] [--app conference]
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stampede.h"

#define MAX_MEMBERS 64
#define SLICE_MS 200

struct options {
    const char *connect;
    const char *app;
    uint32_t id;
    double fps;
    double size_kb;
    size_t width;
    double duration;
    long report_ms;
};

struct display_stats {
    pthread_mutex_t lock;
    uint64_t composites;
    uint64_t bad;
    int64_t last_ts;
    uint32_t members[MAX_MEMBERS];
    size_t n_members;
    double first_at;
    double last_at;
};

struct shared {
    struct options opt;
    stp_runtime *rt;
    size_t height;
    atomic_bool stop;
    atomic_uint_fast64_t frames_put;
    atomic_uint_fast64_t put_timeouts;
    atomic_int failed;
    struct display_stats display;
};

static volatile sig_atomic_t signalled = 0;

static void on_signal(int sig) {
    (void)sig;
    signalled = 1;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void fail(struct shared *s, const char *what, stp_status st) {
    fprintf(stderr, "participant %u: %s: %s: %s\n", s->opt.id, what, stp_status_name(st),
            stp_last_error());
    atomic_store(&s->failed, 1);
    atomic_store(&s->stop, true);
}

static uint8_t fill_byte(uint32_t id, int64_t ts) {
    return (uint8_t)((id * 37u + (uint64_t)ts) & 0xffu);
}

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Reads the mixer's clock: the next slot it will compose. */
static stp_status read_clock(struct shared *s, stp_task *task, int64_t *clock) {
    stp_register *reg = NULL;
    stp_register_in *in = NULL;
    stp_item *item = NULL;
    uint64_t seq = 0;
    stp_status st = stp_register_lookup(s->rt, "conf/clock", 10000, &reg);
    if (st == STP_OK) st = stp_register_attach_input(task, reg, &in);
    if (st == STP_OK) st = stp_register_read(in, 5000, &seq, &item);
    if (st == STP_OK) {
        size_t len = 0;
        const uint8_t *data = stp_item_data(item, &len);
        if (len != 8) {
            fprintf(stderr, "conf/clock holds %zu bytes, not 8\n", len);
            st = STP_WRONG_TYPE;
        } else {
            *clock = (int64_t)get_u64(data);
        }
    }
    stp_item_free(item);
    stp_register_in_free(in);
    stp_register_free(reg);
    return st;
}

static void *camera(void *arg) {
    struct shared *s = arg;
    const struct options *o = &s->opt;
    char name[64];
    snprintf(name, sizeof name, "conf/cam/%u", o->id);
    stp_channel *ch = NULL;
    stp_task *task = NULL;
    stp_channel_out *out = NULL;
    stp_pacer *pacer = NULL;
    size_t shape[3] = {s->height, o->width, 3};
    size_t len = shape[0] * shape[1] * shape[2];
    uint8_t *frame = malloc(len);
    int64_t clock = 0;
    stp_status st;

    if (frame == NULL) {
        fail(s, "allocating a frame", STP_INTERNAL);
        return NULL;
    }
    if ((st = stp_channel_new(s->rt, name, 4, 0, &ch)) != STP_OK) {
        fail(s, "creating the camera channel", st);
        goto done;
    }
    if ((st = stp_task_new(s->rt, STP_AT_FLOOR, "camera", &task)) != STP_OK ||
        (st = stp_channel_attach_output(task, ch, &out)) != STP_OK) {
        fail(s, "attaching the camera", st);
        goto done;
    }
    if ((st = read_clock(s, task, &clock)) != STP_OK) {
        fail(s, "reading conf/clock", st);
        goto done;
    }
    /* Start far enough ahead that the mixer reaches our first slot after it finds us. */
    int64_t lead = o->fps > 0 ? (int64_t)ceil(o->fps * 0.5) : 2;
    if (lead < 2) lead = 2;
    int64_t t = clock + lead;
    if ((st = stp_task_set_virtual_time(task, t)) != STP_OK) {
        fail(s, "setting the camera's virtual time", st);
        goto done;
    }
    if (o->fps > 0) {
        uint64_t period = (uint64_t)(1e6 / o->fps);
        if ((st = stp_pacer_new(period, period, STP_LATE_CONTINUE, &pacer)) != STP_OK) {
            fail(s, "creating the pacer", st);
            goto done;
        }
    }
    while (!atomic_load(&s->stop)) {
        if (pacer != NULL) {
            stp_tick tick;
            if ((st = stp_pacer_sync(pacer, t, &tick, NULL)) != STP_OK) {
                fail(s, "pacing", st);
                break;
            }
        }
        memset(frame, fill_byte(o->id, t), len);
        put_u32(frame, o->id);
        put_u64(frame + 4, (uint64_t)t);
        stp_item *item = NULL;
        if ((st = stp_item_array(STP_U8, 3, shape, frame, len, &item)) != STP_OK) {
            fail(s, "making a frame", st);
            break;
        }
        /* A full channel means the mixer is behind: wait in slices so a stop is noticed. */
        do {
            st = stp_channel_put(out, t, item, 0, SLICE_MS);
            if (st == STP_FULL) atomic_fetch_add(&s->put_timeouts, 1);
        } while (st == STP_FULL && !atomic_load(&s->stop));
        stp_item_free(item);
        if (st == STP_FULL) break;
        if (st != STP_OK) {
            fail(s, "putting a frame", st);
            break;
        }
        atomic_fetch_add(&s->frames_put, 1);
        t++;
        if ((st = stp_task_set_virtual_time(task, t)) != STP_OK) {
            fail(s, "advancing the camera", st);
            break;
        }
    }
done:
    stp_pacer_free(pacer);
    stp_channel_out_free(out);
    stp_task_free(task);
    stp_channel_free(ch);
    free(frame);
    return NULL;
}

/* Checks every tile of a composite; returns the number of bad tiles and lists the members. */
static uint64_t check_composite(const struct shared *s, const stp_item *item, int64_t ts,
                                uint32_t *members, size_t *n_members) {
    size_t ndim = 0;
    const size_t *shape = NULL;
    stp_dtype dtype;
    *n_members = 0;
    if (stp_item_dtype(item, &dtype) != STP_OK || dtype != STP_U8 ||
        stp_item_shape(item, &ndim, &shape) != STP_OK || ndim != 3 || shape[2] != 3) {
        return 1;
    }
    size_t h = s->height, w = s->opt.width;
    if (shape[0] % h != 0 || shape[1] % w != 0) return 1;
    size_t rows = shape[0] / h, cols = shape[1] / w, stride = shape[1] * 3;
    size_t len = 0;
    const uint8_t *px = stp_item_data(item, &len);
    uint64_t bad = 0;
    for (size_t r = 0; r < rows; r++) {
        for (size_t c = 0; c < cols; c++) {
            const uint8_t *tile = px + r * h * stride + c * w * 3;
            uint32_t id = get_u32(tile);
            if (id == 0) continue;
            const uint8_t *last = tile + (h - 1) * stride + (w - 1) * 3 + 2;
            if ((int64_t)get_u64(tile + 4) != ts || *last != fill_byte(id, ts)) bad++;
            if (*n_members < MAX_MEMBERS) members[(*n_members)++] = id;
        }
    }
    return bad;
}

static void *display(void *arg) {
    struct shared *s = arg;
    struct display_stats *d = &s->display;
    stp_channel *mix = NULL;
    stp_task *task = NULL;
    stp_channel_in *in = NULL;
    stp_status st;
    if ((st = stp_channel_lookup(s->rt, "conf/mix", 10000, &mix)) != STP_OK) {
        fail(s, "looking up conf/mix", st);
        goto done;
    }
    if ((st = stp_task_new(s->rt, STP_AT_FLOOR, "display", &task)) != STP_OK ||
        (st = stp_channel_attach_input(task, mix, &in)) != STP_OK) {
        fail(s, "attaching the display", st);
        goto done;
    }
    while (!atomic_load(&s->stop)) {
        int64_t ts = 0;
        stp_item *item = NULL;
        st = stp_channel_get(in, STP_NEWEST_UNSEEN, 0, SLICE_MS, &ts, &item);
        if (st == STP_TIMEOUT) continue;
        if (st != STP_OK) {
            fail(s, "getting a composite", st);
            break;
        }
        uint32_t members[MAX_MEMBERS];
        size_t n = 0;
        uint64_t bad = check_composite(s, item, ts, members, &n);
        stp_item_free(item);
        double at = now_s();
        pthread_mutex_lock(&d->lock);
        if (d->composites == 0) d->first_at = at;
        d->composites++;
        d->bad += bad;
        d->last_ts = ts;
        d->last_at = at;
        memcpy(d->members, members, n * sizeof members[0]);
        d->n_members = n;
        pthread_mutex_unlock(&d->lock);
        /* Release this composite and everything older, and let the watermark pass them. */
        if ((st = stp_channel_consume_until(in, ts)) != STP_OK ||
            (st = stp_task_set_virtual_time(task, ts + 1)) != STP_OK) {
            fail(s, "consuming a composite", st);
            break;
        }
    }
done:
    stp_channel_in_free(in);
    stp_task_free(task);
    stp_channel_free(mix);
    return NULL;
}

static void report(struct shared *s, const char *event, double fps) {
    struct display_stats *d = &s->display;
    pthread_mutex_lock(&d->lock);
    printf("{\"event\":\"%s\",\"id\":%u,\"composites\":%llu,\"ts\":%lld,\"members\":[", event,
           s->opt.id, (unsigned long long)d->composites, (long long)d->last_ts);
    for (size_t i = 0; i < d->n_members; i++) printf(i ? ",%u" : "%u", d->members[i]);
    printf("],\"fps\":%.2f,\"bad\":%llu,\"frames_put\":%llu,\"put_timeouts\":%llu}\n", fps,
           (unsigned long long)d->bad, (unsigned long long)atomic_load(&s->frames_put),
           (unsigned long long)atomic_load(&s->put_timeouts));
    pthread_mutex_unlock(&d->lock);
    fflush(stdout);
}

static int parse(int argc, char **argv, struct options *o) {
    static const struct option longs[] = {
        {"connect", required_argument, 0, 'c'}, {"app", required_argument, 0, 'a'},
        {"id", required_argument, 0, 'i'},      {"fps", required_argument, 0, 'f'},
        {"size-kb", required_argument, 0, 's'}, {"width", required_argument, 0, 'w'},
        {"duration", required_argument, 0, 'd'}, {"report-ms", required_argument, 0, 'r'},
        {0, 0, 0, 0}};
    *o = (struct options){.app = "conference", .fps = 15, .size_kb = 74, .width = 176,
                          .report_ms = 500};
    int c;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 'c': o->connect = optarg; break;
        case 'a': o->app = optarg; break;
        case 'i': o->id = (uint32_t)strtoul(optarg, NULL, 10); break;
        case 'f': o->fps = strtod(optarg, NULL); break;
        case 's': o->size_kb = strtod(optarg, NULL); break;
        case 'w': o->width = (size_t)strtoul(optarg, NULL, 10); break;
        case 'd': o->duration = strtod(optarg, NULL); break;
        case 'r': o->report_ms = strtol(optarg, NULL, 10); break;
        default: return -1;
        }
    }
    if (o->connect == NULL || o->id == 0 || o->width == 0 || o->size_kb <= 0 ||
        o->report_ms <= 0 || o->fps < 0) {
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    struct shared s;
    memset(&s, 0, sizeof s);
    if (parse(argc, argv, &s.opt) != 0) {
        fprintf(stderr, "usage: %s --connect ENDPOINT --id N (N >= 1) [--fps F] [--size-kb S] "
                        "[--width W] [--duration SECS] [--report-ms MS] [--app NAME]\n",
                argv[0]);
        return 2;
    }
    s.height = (size_t)lround(s.opt.size_kb * 1000.0 / (double)(s.opt.width * 3));
    if (s.height == 0) s.height = 1;
    pthread_mutex_init(&s.display.lock, NULL);
    s.display.last_ts = -1;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);

    stp_config *cfg = stp_config_new(STP_CLIENT);
    stp_status st = cfg ? stp_config_connect(cfg, s.opt.connect) : STP_INTERNAL;
    if (st == STP_OK) st = stp_config_timeouts(cfg, 5000, 5000, 10000);
    if (st == STP_OK) st = stp_runtime_join(s.opt.app, cfg, &s.rt);
    stp_config_free(cfg);
    if (st != STP_OK) {
        fprintf(stderr, "participant %u: joining: %s: %s\n", s.opt.id, stp_status_name(st),
                stp_last_error());
        return 1;
    }

    pthread_t cam, disp;
    pthread_create(&cam, NULL, camera, &s);
    pthread_create(&disp, NULL, display, &s);
    double start = now_s(), next_report = start + (double)s.opt.report_ms / 1000.0;
    uint64_t reported = 0;
    double reported_at = start;
    while (!signalled && !atomic_load(&s.stop) &&
           (s.opt.duration <= 0 || now_s() - start < s.opt.duration)) {
        struct timespec nap = {0, 20 * 1000 * 1000};
        nanosleep(&nap, NULL);
        double now = now_s();
        if (now >= next_report) {
            pthread_mutex_lock(&s.display.lock);
            uint64_t n = s.display.composites;
            pthread_mutex_unlock(&s.display.lock);
            report(&s, "display", (double)(n - reported) / (now - reported_at));
            reported = n;
            reported_at = now;
            next_report = now + (double)s.opt.report_ms / 1000.0;
        }
    }
    atomic_store(&s.stop, true);
    pthread_join(cam, NULL);
    pthread_join(disp, NULL);

    struct display_stats *d = &s.display;
    double span = d->last_at - d->first_at;
    report(&s, "summary", d->composites > 1 && span > 0 ? (double)(d->composites - 1) / span : 0);
    stp_runtime_free(s.rt);
    pthread_mutex_destroy(&d->lock);
    return atomic_load(&s.failed) ? 1 : 0;
}
