/*
 * Test runner of the Stampede C API (crates/stampede-c/include/stampede.h).
 *
 * Output is TAP version 13; the last line is "# summary: passed=P failed=F total=N", which CI
 * reads. The exit status is 0 iff every selected test passed. argv[1], when given, selects
 * the tests whose names contain it.
 *
 * Every test frees all it creates, so the AddressSanitizer build (test_stampede_asan) can run
 * with leak detection. Blocking calls use finite timeouts wherever a bug could otherwise hang
 * the runner, and a watchdog ends the run (with the summary line) if one test takes too long.
 *
 * Only libc and pthreads: C11, -Wall -Wextra -Werror.
 */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_timedjoin_np */
#endif

#include <arpa/inet.h>
#include <dirent.h>
#include <malloc.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "stampede.h"

/* ------------------------------------------------------------------------------------------ */
/* Harness                                                                                    */
/* ------------------------------------------------------------------------------------------ */

/* Long enough never to expire in a passing run, short enough that a bug fails instead of
 * hanging. */
#define LONG_MS 10000
/* A test running longer than this ends the whole run. */
#ifndef WATCHDOG_S
#define WATCHDOG_S 120
#endif

static pthread_mutex_t g_diag_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_diag[32768];
static size_t g_diag_len;
static atomic_int g_failed_now; /* the current test has failed */

static char g_skip[256]; /* non-empty: the current test was skipped, and why */
static int g_skipped;

static int g_test_number;
static const char *g_test_name;
static atomic_llong g_test_started_ms;
static int g_passed, g_failed, g_total;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Records a failure of the current test: a diagnostic line "  # file:line: message". Safe
 * from any thread. */
static void fail_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail_at(const char *file, int line, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&g_diag_lock);
    /* Keep multi-line messages TAP-safe. */
    for (char *p = msg; *p; p++) {
        if (*p == '\n' || *p == '\r') *p = ' ';
    }
    int n = snprintf(g_diag + g_diag_len, sizeof g_diag - g_diag_len, "  # %s:%d: %s\n", file,
                     line, msg);
    if (n > 0) {
        g_diag_len += (size_t)n;
        if (g_diag_len >= sizeof g_diag) g_diag_len = sizeof g_diag - 1;
    }
    atomic_store(&g_failed_now, 1);
    pthread_mutex_unlock(&g_diag_lock);
}

/* Marks the current test skipped (reported "ok N - name # SKIP why"). */
static inline void skip_test(const char *why) { snprintf(g_skip, sizeof g_skip, "%s", why); }

#define FAIL(...)                                \
    do {                                         \
        fail_at(__FILE__, __LINE__, __VA_ARGS__); \
        goto done;                               \
    } while (0)

#define CHECK(cond)                                                 \
    do {                                                            \
        if (!(cond)) FAIL("CHECK(%s) failed", #cond);               \
    } while (0)

#define CHECK_MSG(cond, ...)                                        \
    do {                                                            \
        if (!(cond)) {                                              \
            char m_[1024];                                          \
            snprintf(m_, sizeof m_, __VA_ARGS__);                   \
            FAIL("CHECK(%s) failed: %s", #cond, m_);                \
        }                                                           \
    } while (0)

/* The call must return STP_OK. */
#define CHECK_OK(call)                                                                  \
    do {                                                                                \
        stp_status s_ = (call);                                                         \
        if (s_ != STP_OK)                                                               \
            FAIL("%s -> %s (%d), expected STP_OK; stp_last_error: \"%s\"", #call,       \
                 stp_status_name((int32_t)s_), (int)s_, stp_last_error());              \
    } while (0)

/* The call must return `want` (a failure must leave a non-empty message). */
#define CHECK_ST(call, want)                                                            \
    do {                                                                                \
        stp_status s_ = (call);                                                         \
        if (s_ != (want))                                                               \
            FAIL("%s -> %s (%d), expected %s; stp_last_error: \"%s\"", #call,           \
                 stp_status_name((int32_t)s_), (int)s_, stp_status_name((int32_t)(want)), \
                 stp_last_error());                                                     \
        if (s_ != STP_OK && stp_last_error()[0] == '\0')                                \
            FAIL("%s -> %s with an empty stp_last_error()", #call,                      \
                 stp_status_name((int32_t)s_));                                         \
    } while (0)

/* STP_INVALID_ARGUMENT with a message that mentions `sub`. */
#define CHECK_INVALID(call, sub)                                                        \
    do {                                                                                \
        CHECK_ST(call, STP_INVALID_ARGUMENT);                                           \
        if (strstr(stp_last_error(), (sub)) == NULL)                                    \
            FAIL("%s: stp_last_error \"%s\" does not mention \"%s\"", #call,            \
                 stp_last_error(), (sub));                                              \
    } while (0)

#define CHECK_EQ_I64(a, b)                                                              \
    do {                                                                                \
        long long a_ = (long long)(a), b_ = (long long)(b);                             \
        if (a_ != b_) FAIL("CHECK_EQ(%s, %s) failed: %lld != %lld", #a, #b, a_, b_);    \
    } while (0)

#define CHECK_EQ_U64(a, b)                                                              \
    do {                                                                                \
        unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b);  \
        if (a_ != b_) FAIL("CHECK_EQ(%s, %s) failed: %llu != %llu", #a, #b, a_, b_);    \
    } while (0)

#define CHECK_STR(a, b)                                                                 \
    do {                                                                                \
        const char *a_ = (a), *b_ = (b);                                                \
        if (a_ == NULL || strcmp(a_, b_) != 0)                                          \
            FAIL("CHECK_STR(%s, %s) failed: \"%s\" != \"%s\"", #a, #b, a_ ? a_ : "(null)", b_); \
    } while (0)

/* The neighbours of the last failed get on this thread. has_* as 0/1, values ignored when
 * absent. */
#define CHECK_NEIGHBORS(hb, b, ha, a)                                                   \
    do {                                                                                \
        stp_neighbors n_ = stp_last_neighbors();                                        \
        if (n_.has_below != (bool)(hb) || (n_.has_below && n_.below != (b)) ||          \
            n_.has_above != (bool)(ha) || (n_.has_above && n_.above != (a)))            \
            FAIL("neighbors: got below=%s%lld above=%s%lld, expected below=%s%lld "     \
                 "above=%s%lld",                                                        \
                 n_.has_below ? "" : "none/", (long long)n_.below,                      \
                 n_.has_above ? "" : "none/", (long long)n_.above, (hb) ? "" : "none/", \
                 (long long)(b), (ha) ? "" : "none/", (long long)(a));                  \
    } while (0)

/* ---- pthreads with a bounded join ---- */

/* Joins `t` within `ms`; false (thread still running) otherwise. */
static bool join_within(pthread_t t, int ms) {
    struct timespec abs;
    clock_gettime(CLOCK_REALTIME, &abs);
    abs.tv_sec += ms / 1000;
    abs.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (abs.tv_nsec >= 1000000000L) {
        abs.tv_sec++;
        abs.tv_nsec -= 1000000000L;
    }
    return pthread_timedjoin_np(t, NULL, &abs) == 0;
}

/* ---- items ---- */

static stp_item *text_item(const char *s) {
    stp_item *it = NULL;
    if (stp_item_text(s, &it) != STP_OK) return NULL;
    return it;
}

static stp_item *bytes_item(const void *data, size_t len) {
    stp_item *it = NULL;
    if (stp_item_bytes(data, len, &it) != STP_OK) return NULL;
    return it;
}

/* Whether `it` is a text item holding exactly `s`. */
static bool is_text(const stp_item *it, const char *s) {
    size_t len = 0;
    const void *d = stp_item_data(it, &len);
    return it != NULL && stp_item_kind_of(it) == STP_ITEM_TEXT && d != NULL &&
           len == strlen(s) && memcmp(d, s, len) == 0;
}

static char *describe_item(const stp_item *it, char *buf, size_t n) {
    size_t len = 0;
    const char *d = stp_item_data(it, &len);
    if (it == NULL) {
        snprintf(buf, n, "(no item)");
    } else if (stp_item_kind_of(it) == STP_ITEM_TEXT) {
        snprintf(buf, n, "text \"%.*s\"", (int)(len > 200 ? 200 : len), d ? d : "");
    } else {
        snprintf(buf, n, "kind %d, %zu bytes", (int)stp_item_kind_of(it), len);
    }
    return buf;
}

static stp_status put_text(const stp_channel_out *out, int64_t ts, const char *s,
                           uint32_t consumers, int64_t timeout_ms) {
    stp_item *it = NULL;
    stp_status st = stp_item_text(s, &it);
    if (st != STP_OK) return st;
    st = stp_channel_put(out, ts, it, consumers, timeout_ms);
    stp_item_free(it);
    return st;
}

/* A get that must return the item at `want_ts` holding text `want` (NULL: any content). */
static bool expect_get(const char *file, int line, const stp_channel_in *in, int32_t sel,
                       int64_t ts, int64_t timeout_ms, int64_t want_ts, const char *want) {
    int64_t got = INT64_MIN;
    stp_item *it = NULL;
    char buf[256];
    bool ok = false;
    stp_status st = stp_channel_get(in, sel, ts, timeout_ms, &got, &it);
    if (st != STP_OK) {
        fail_at(file, line, "get(sel %d, ts %lld) -> %s, expected the item at %lld; "
                "stp_last_error: \"%s\"", (int)sel, (long long)ts,
                stp_status_name((int32_t)st), (long long)want_ts, stp_last_error());
    } else if (got != want_ts) {
        fail_at(file, line, "get(sel %d, ts %lld) returned timestamp %lld (%s), expected %lld",
                (int)sel, (long long)ts, (long long)got, describe_item(it, buf, sizeof buf),
                (long long)want_ts);
    } else if (want != NULL && !is_text(it, want)) {
        fail_at(file, line, "get(sel %d, ts %lld) returned %s, expected text \"%s\"", (int)sel,
                (long long)ts, describe_item(it, buf, sizeof buf), want);
    } else {
        ok = true;
    }
    stp_item_free(it);
    return ok;
}

/* A get that must fail with `want`; the out-pointers must stay untouched. */
static bool expect_get_fails(const char *file, int line, const stp_channel_in *in, int32_t sel,
                             int64_t ts, int64_t timeout_ms, stp_status want) {
    int64_t got = -12345;
    stp_item *it = NULL;
    char buf[256];
    stp_status st = stp_channel_get(in, sel, ts, timeout_ms, &got, &it);
    if (st != want) {
        fail_at(file, line, "get(sel %d, ts %lld) -> %s (timestamp %lld, %s), expected %s; "
                "stp_last_error: \"%s\"", (int)sel, (long long)ts,
                stp_status_name((int32_t)st), (long long)got,
                describe_item(it, buf, sizeof buf), stp_status_name((int32_t)want),
                stp_last_error());
        stp_item_free(it);
        return false;
    }
    if (stp_last_error()[0] == '\0') {
        fail_at(file, line, "get(sel %d, ts %lld) -> %s with an empty stp_last_error()",
                (int)sel, (long long)ts, stp_status_name((int32_t)st));
        return false;
    }
    if (it != NULL || got != -12345) {
        fail_at(file, line, "a failed get wrote its out-pointers");
        stp_item_free(it);
        return false;
    }
    return true;
}

#define GET(in, sel, ts, timeout, want_ts, want)                                        \
    do {                                                                                \
        if (!expect_get(__FILE__, __LINE__, in, sel, ts, timeout, want_ts, want)) goto done; \
    } while (0)

#define GET_FAILS(in, sel, ts, timeout, want)                                           \
    do {                                                                                \
        if (!expect_get_fails(__FILE__, __LINE__, in, sel, ts, timeout, want)) goto done; \
    } while (0)

#define PUT(out, ts, text) CHECK_OK(put_text(out, ts, text, 0, 0))

/* ---- an embedded channel with a producer (vt 0) and a consumer (vt INFINITY) ---- */

typedef struct {
    stp_runtime *rt;
    stp_channel *ch;
    stp_task *prod, *cons;
    stp_channel_out *out;
    stp_channel_in *in;
} chan_fix;

static bool chan_setup(chan_fix *f, size_t capacity) {
    memset(f, 0, sizeof *f);
    CHECK_OK(stp_runtime_new(&f->rt));
    CHECK_OK(stp_channel_new(f->rt, NULL, capacity, 0, &f->ch));
    CHECK_OK(stp_task_new(f->rt, 0, "producer", &f->prod));
    CHECK_OK(stp_task_new(f->rt, STP_INFINITY, "consumer", &f->cons));
    CHECK_OK(stp_channel_attach_output(f->prod, f->ch, &f->out));
    CHECK_OK(stp_channel_attach_input(f->cons, f->ch, &f->in));
    return true;
done:
    return false;
}

static void chan_teardown(chan_fix *f) {
    stp_channel_in_free(f->in);
    stp_channel_out_free(f->out);
    stp_task_free(f->cons);
    stp_task_free(f->prod);
    stp_channel_free(f->ch);
    stp_runtime_free(f->rt);
    memset(f, 0, sizeof *f);
}

#define CHAN_SETUP(f, cap)                 \
    do {                                   \
        if (!chan_setup(&(f), (cap))) goto done; \
    } while (0)

/* ---- a get on another thread ---- */

typedef struct {
    const stp_channel_in *in;
    int32_t sel;
    int64_t ts;
    int64_t timeout_ms;
    stp_status st;
    int64_t got_ts;
    stp_item *item;
    char error[512];
    double elapsed_ms;
    atomic_int started, finished;
} getter;

static void *getter_main(void *p) {
    getter *g = p;
    double t0 = now_ms(); /* before `started`: the elapsed time covers the caller's wait */
    atomic_store(&g->started, 1);
    g->st = stp_channel_get(g->in, g->sel, g->ts, g->timeout_ms, &g->got_ts, &g->item);
    g->elapsed_ms = now_ms() - t0;
    snprintf(g->error, sizeof g->error, "%s", g->st == STP_OK ? "" : stp_last_error());
    atomic_store(&g->finished, 1);
    return NULL;
}

static void wait_started(atomic_int *flag) {
    double t0 = now_ms();
    while (!atomic_load(flag) && now_ms() - t0 < LONG_MS) sleep_ms(1);
}

/* ---- a stop flag set from another thread, as a binding does when its caller is interrupted */

typedef struct {
    int32_t *flag; /* a plain int32_t, written atomically: what the *_interruptible calls take */
    int after_ms;
} stopper;

static void *stopper_main(void *p) {
    stopper *s = p;
    sleep_ms(s->after_ms);
    __atomic_store_n(s->flag, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Starts a thread that sets `*flag` after `after_ms`; it always ends, so a plain join is safe. */
static bool start_stopper(pthread_t *th, stopper *s, int32_t *flag, int after_ms) {
    s->flag = flag;
    s->after_ms = after_ms;
    return pthread_create(th, NULL, stopper_main, s) == 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Status codes, version, invalid arguments                                                   */
/* ------------------------------------------------------------------------------------------ */

static void test_status_names(void) {
    static const struct {
        int32_t code;
        const char *name;
    } all[] = {
        {STP_OK, "STP_OK"},
        {STP_INVALID_ARGUMENT, "STP_INVALID_ARGUMENT"},
        {STP_FULL, "STP_FULL"},
        {STP_TIMEOUT, "STP_TIMEOUT"},
        {STP_UNAVAILABLE, "STP_UNAVAILABLE"},
        {STP_GONE, "STP_GONE"},
        {STP_CLOSED, "STP_CLOSED"},
        {STP_DETACHED, "STP_DETACHED"},
        {STP_DUPLICATE, "STP_DUPLICATE"},
        {STP_BELOW_VISIBILITY, "STP_BELOW_VISIBILITY"},
        {STP_UNREACHABLE, "STP_UNREACHABLE"},
        {STP_NAME_TAKEN, "STP_NAME_TAKEN"},
        {STP_NOT_FOUND, "STP_NOT_FOUND"},
        {STP_WRONG_KIND, "STP_WRONG_KIND"},
        {STP_INVALID_NAME, "STP_INVALID_NAME"},
        {STP_CONFIG, "STP_CONFIG"},
        {STP_CONNECT, "STP_CONNECT"},
        {STP_AUTH_REJECTED, "STP_AUTH_REJECTED"},
        {STP_PROTOCOL, "STP_PROTOCOL"},
        {STP_WRONG_TYPE, "STP_WRONG_TYPE"},
        {STP_TASK_EXITED, "STP_TASK_EXITED"},
        {STP_ZONE_MISMATCH, "STP_ZONE_MISMATCH"},
        {STP_TOO_MANY_CONNECTIONS, "STP_TOO_MANY_CONNECTIONS"},
        {STP_UNKNOWN_TICKET, "STP_UNKNOWN_TICKET"},
        {STP_INTERRUPTED, "STP_INTERRUPTED"},
        {STP_UNSUPPORTED, "STP_UNSUPPORTED"},
        {STP_TASK_FAILED, "STP_TASK_FAILED"},
        {STP_CANCELLED, "STP_CANCELLED"},
        {STP_DENIED, "STP_DENIED"},
        {STP_TOO_LARGE, "STP_TOO_LARGE"},
        {STP_INTERNAL, "STP_INTERNAL"},
    };
    /* The codes are the documented values. */
    CHECK_EQ_I64(STP_OK, 0);
    CHECK_EQ_I64(STP_UNKNOWN_TICKET, 23);
    CHECK_EQ_I64(STP_INTERRUPTED, 26);
    CHECK_EQ_I64(STP_UNSUPPORTED, 27);
    CHECK_EQ_I64(STP_TASK_FAILED, 28);
    CHECK_EQ_I64(STP_CANCELLED, 29);
    CHECK_EQ_I64(STP_DENIED, 30);
    CHECK_EQ_I64(STP_TOO_LARGE, 31);
    CHECK_EQ_I64(STP_INTERNAL, 99);
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        CHECK_STR(stp_status_name(all[i].code), all[i].name);
    }
    static const int32_t unknown[] = {-1, 24, 25, 32, 98, 100, 1000, INT32_MIN, INT32_MAX};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        CHECK_STR(stp_status_name(unknown[i]), "STP_UNKNOWN");
    }
done:;
}

static void test_version(void) {
    const char *v = stp_version();
    int major = -1, minor = -1, patch = -1;
    CHECK(v != NULL);
    CHECK_MSG(sscanf(v, "%d.%d.%d", &major, &minor, &patch) == 3, "version \"%s\"", v);
    CHECK(major >= 0 && minor >= 0 && patch >= 0);
    CHECK(stp_version() == v); /* static */
done:;
}

static void test_invalid_null_arguments(void) {
    stp_runtime *rt = NULL, *rt2 = (stp_runtime *)&rt; /* sentinel: must stay untouched */
    stp_channel *ch = NULL, *ch2 = NULL;
    stp_queue *q = NULL, *q2 = NULL;
    stp_register *reg = NULL, *reg2 = NULL;
    stp_task *t = NULL, *t2 = NULL;
    stp_channel_in *in = NULL, *in2 = NULL;
    stp_channel_out *out = NULL;
    stp_queue_in *qin = NULL;
    stp_queue_out *qout = NULL;
    stp_register_in *rin = NULL;
    stp_register_out *rout = NULL;
    stp_item *it = NULL, *it2 = NULL;
    stp_config *cfg = NULL;
    stp_pacer *p = NULL;
    int64_t ts = 0;
    uint64_t ticket = 0, seq = 0;
    stp_dtype dt;
    size_t ndim = 0;
    const size_t *shape = NULL;
    stp_tick tick;
    stp_pacer_stats stats;
    int32_t stop[2] = {0, 0};
    /* Misaligned for an int32_t (made through an integer: no misaligned pointer arithmetic). */
    const int32_t *odd_stop = (const int32_t *)((uintptr_t)stop + 1);

    CHECK_OK(stp_runtime_new(&rt));
    CHECK_OK(stp_channel_new(rt, NULL, 0, 0, &ch));
    CHECK_OK(stp_queue_new(rt, NULL, 0, 0, &q));
    CHECK_OK(stp_register_new(rt, NULL, 0, 0, &reg));
    CHECK_OK(stp_task_new(rt, 0, NULL, &t));
    CHECK_OK(stp_channel_attach_input(t, ch, &in));
    CHECK_OK(stp_channel_attach_output(t, ch, &out));
    CHECK_OK(stp_queue_attach_input(t, q, &qin));
    CHECK_OK(stp_queue_attach_output(t, q, &qout));
    CHECK_OK(stp_register_attach_input(t, reg, &rin));
    CHECK_OK(stp_register_attach_output(t, reg, &rout));
    it = text_item("x");
    CHECK(it != NULL);

    /* Runtimes. */
    /* stp_runtime_new(NULL) and the other constructors' NULL `out`: null_out_does_not_leak. */
    CHECK_INVALID(stp_runtime_wait_for(NULL, "x", 0), "NULL");
    CHECK_INVALID(stp_runtime_wait_for(rt, NULL, 0), "NULL");
    CHECK_STR(stp_runtime_id(NULL), "");
    CHECK_STR(stp_runtime_id(rt), "");

    /* Containers. */
    CHECK_INVALID(stp_channel_new(NULL, NULL, 0, 0, &ch2), "NULL");
    CHECK(ch2 == NULL);
    CHECK_INVALID(stp_channel_new(rt, NULL, 0, 0, NULL), "NULL");
    CHECK_INVALID(stp_channel_new(rt, "\xff\xfe", 0, 0, &ch2), "UTF-8");
    CHECK(ch2 == NULL);
    CHECK_INVALID(stp_queue_new(NULL, NULL, 0, 0, &q2), "NULL");
    CHECK_INVALID(stp_queue_new(rt, NULL, 0, 0, NULL), "NULL");
    CHECK(q2 == NULL);
    CHECK_INVALID(stp_register_new(NULL, NULL, 0, 0, &reg2), "NULL");
    CHECK_INVALID(stp_register_new(rt, NULL, 0, 0, NULL), "NULL");
    CHECK(reg2 == NULL);
    CHECK_INVALID(stp_channel_lookup(NULL, "x", 0, &ch2), "NULL");
    CHECK_INVALID(stp_channel_lookup(rt, NULL, 0, &ch2), "NULL");
    CHECK_INVALID(stp_channel_lookup(rt, "x", 0, NULL), "NULL");
    CHECK_INVALID(stp_queue_lookup(rt, NULL, 0, &q2), "NULL");
    CHECK_INVALID(stp_register_lookup(rt, NULL, 0, &reg2), "NULL");
    CHECK(ch2 == NULL && q2 == NULL && reg2 == NULL);
    CHECK_INVALID(stp_channel_close(NULL), "NULL");
    CHECK_INVALID(stp_queue_close(NULL), "NULL");
    CHECK_INVALID(stp_register_close(NULL), "NULL");

    /* Tasks. */
    CHECK_INVALID(stp_task_new(NULL, 0, NULL, &t2), "NULL");
    CHECK_INVALID(stp_task_new(rt, 0, NULL, NULL), "NULL");
    CHECK_INVALID(stp_task_new(rt, 0, "\xc3\x28", &t2), "UTF-8");
    CHECK_INVALID(stp_task_child(NULL, 0, &t2), "NULL");
    CHECK_INVALID(stp_task_child(t, 0, NULL), "NULL");
    CHECK(t2 == NULL);
    CHECK_INVALID(stp_task_set_virtual_time(NULL, 5), "NULL");
    CHECK_EQ_I64(stp_task_virtual_time(NULL), STP_INFINITY);
    CHECK_EQ_I64(stp_task_visibility(NULL), STP_INFINITY);

    /* Connections. */
    CHECK_INVALID(stp_channel_attach_input(NULL, ch, &in2), "NULL");
    CHECK_INVALID(stp_channel_attach_input(t, NULL, &in2), "NULL");
    CHECK_INVALID(stp_channel_attach_input(t, ch, NULL), "NULL");
    CHECK(in2 == NULL);
    CHECK_INVALID(stp_channel_attach_output(NULL, ch, &out), "NULL");
    CHECK_INVALID(stp_channel_attach_output(t, NULL, &out), "NULL");
    CHECK_INVALID(stp_queue_attach_input(NULL, q, &qin), "NULL");
    CHECK_INVALID(stp_queue_attach_output(t, NULL, &qout), "NULL");
    CHECK_INVALID(stp_register_attach_input(t, NULL, &rin), "NULL");
    CHECK_INVALID(stp_register_attach_output(NULL, reg, &rout), "NULL");
    CHECK_INVALID(stp_register_attach_output(t, reg, NULL), "NULL");

    /* Channel operations. */
    CHECK_INVALID(stp_channel_put(NULL, 1, it, 0, 0), "NULL");
    CHECK_INVALID(stp_channel_put(out, 1, NULL, 0, 0), "NULL");
    CHECK_INVALID(stp_channel_get(NULL, STP_OLDEST, 0, 0, &ts, &it2), "NULL");
    CHECK_INVALID(stp_channel_put_interruptible(NULL, 1, it, 0, 0, stop), "NULL");
    CHECK_INVALID(stp_channel_put_interruptible(out, 1, NULL, 0, 0, stop), "NULL");
    CHECK_INVALID(stp_channel_put_interruptible(out, 1, it, 0, 0, odd_stop), "aligned");
    CHECK_OK(stp_channel_put(out, 1, it, 0, 0));
    /* The out-pointers are checked before the get, so no item is lost. */
    CHECK_INVALID(stp_channel_get(in, STP_OLDEST, 0, 0, NULL, &it2), "out_ts");
    CHECK_INVALID(stp_channel_get(in, STP_OLDEST, 0, 0, &ts, NULL), "out_item");
    CHECK(it2 == NULL);
    CHECK_INVALID(stp_channel_consume(NULL, 1), "NULL");
    CHECK_INVALID(stp_channel_consume_until(NULL, 1), "NULL");
    /* The item is still there, unopened: OLDEST and NEXT_UNSEEN both find it. */
    GET(in, STP_NEXT_UNSEEN, 0, 0, 1, "x");

    /* Queue operations. */
    CHECK_INVALID(stp_queue_put(NULL, 1, it, 0, &ticket), "NULL");
    CHECK_INVALID(stp_queue_put(qout, 1, NULL, 0, &ticket), "NULL");
    CHECK_INVALID(stp_queue_put_interruptible(NULL, 1, it, 0, stop, &ticket), "NULL");
    CHECK_INVALID(stp_queue_put_interruptible(qout, 1, NULL, 0, stop, &ticket), "NULL");
    CHECK_INVALID(stp_queue_put_interruptible(qout, 1, it, 0, odd_stop, &ticket), "aligned");
    CHECK_OK(stp_queue_put(qout, 1, it, 0, NULL)); /* out_ticket may be NULL */
    CHECK_INVALID(stp_queue_get(NULL, 0, &ts, &ticket, &it2), "NULL");
    CHECK_INVALID(stp_queue_get(qin, 0, NULL, &ticket, &it2), "out_ts");
    CHECK_INVALID(stp_queue_get(qin, 0, &ts, NULL, &it2), "out_ticket");
    CHECK_INVALID(stp_queue_get(qin, 0, &ts, &ticket, NULL), "out_item");
    CHECK(it2 == NULL);
    CHECK_INVALID(stp_queue_consume(NULL, 1), "NULL");
    /* The item was not taken by the failed gets. */
    CHECK_OK(stp_queue_get(qin, 0, &ts, &ticket, &it2));
    CHECK(is_text(it2, "x"));
    CHECK_OK(stp_queue_consume(qin, ticket));
    stp_item_free(it2);
    it2 = NULL;

    /* Register operations. */
    CHECK_INVALID(stp_register_write(NULL, it, &seq), "NULL");
    CHECK_INVALID(stp_register_write(rout, NULL, &seq), "NULL");
    CHECK_OK(stp_register_write(rout, it, NULL)); /* out_seq may be NULL */
    CHECK_INVALID(stp_register_read(NULL, 0, &seq, &it2), "NULL");
    CHECK_INVALID(stp_register_read(rin, 0, NULL, &it2), "out_seq");
    CHECK_INVALID(stp_register_read(rin, 0, &seq, NULL), "out_item");
    CHECK(it2 == NULL);
    CHECK_OK(stp_register_read(rin, 0, &seq, &it2));
    CHECK_EQ_U64(seq, 1);

    /* Items. */
    CHECK_INVALID(stp_item_bytes(NULL, 3, &it2), "NULL");
    CHECK_INVALID(stp_item_text(NULL, &it2), "NULL");
    CHECK_INVALID(stp_item_text("bad \xff utf-8", &it2), "UTF-8");
    {
        size_t sh[2] = {2, 2};
        uint8_t d[4] = {0};
        CHECK_INVALID(stp_item_array(STP_U8, 2, NULL, d, 4, &it2), "NULL");
        CHECK_INVALID(stp_item_array(STP_U8, 2, sh, NULL, 4, &it2), "NULL");
    }
    CHECK_INVALID(stp_item_dtype(NULL, &dt), "NULL");
    CHECK_INVALID(stp_item_shape(NULL, &ndim, &shape), "NULL");
    CHECK(stp_item_clone(NULL) == NULL);
    CHECK(stp_item_kind_of(NULL) == STP_ITEM_OTHER);
    CHECK(stp_item_tag(NULL) == 0);
    {
        size_t len = 77;
        CHECK(stp_item_data(NULL, &len) == NULL);
    }

    /* Pacers. */
    CHECK_INVALID(stp_pacer_new(0, 0, STP_LATE_CONTINUE, &p), "period");
    CHECK_INVALID(stp_pacer_new(1000, 0, 3, &p), "stp_late_action");
    CHECK_INVALID(stp_pacer_new(1000, 0, -1, &p), "stp_late_action");
    CHECK(p == NULL);
    CHECK_OK(stp_pacer_new(1000, 0, STP_LATE_CONTINUE, &p));
    CHECK_INVALID(stp_pacer_sync(NULL, 0, &tick, NULL), "NULL");
    CHECK_INVALID(stp_pacer_sync(p, 0, NULL, NULL), "NULL");
    CHECK_INVALID(stp_pacer_sync_interruptible(NULL, 0, stop, &tick, NULL), "NULL");
    CHECK_INVALID(stp_pacer_sync_interruptible(p, 0, stop, NULL, NULL), "NULL");
    CHECK_INVALID(stp_pacer_sync_interruptible(p, 0, odd_stop, &tick, NULL), "aligned");
    CHECK_INVALID(stp_pacer_get_stats(NULL, &stats), "NULL");
    CHECK_INVALID(stp_pacer_get_stats(p, NULL), "NULL");

    /* Configs. */
    CHECK(stp_config_new(3) == NULL);
    CHECK(stp_config_new(-1) == NULL);
    CHECK(stp_config_new(INT32_MAX) == NULL);
    cfg = stp_config_new(STP_PEER);
    CHECK(cfg != NULL);
    CHECK_INVALID(stp_config_listen(NULL, "tcp/127.0.0.1:1"), "NULL");
    CHECK_INVALID(stp_config_listen(cfg, NULL), "NULL");
    CHECK_INVALID(stp_config_connect(NULL, "tcp/127.0.0.1:1"), "NULL");
    CHECK_INVALID(stp_config_connect(cfg, NULL), "NULL");
    CHECK_INVALID(stp_config_credentials(NULL, "u", "p"), "NULL");
    CHECK_INVALID(stp_config_credentials(cfg, NULL, "p"), "NULL");
    CHECK_INVALID(stp_config_credentials(cfg, "u", NULL), "NULL");
    CHECK_INVALID(stp_config_tls(NULL, NULL, NULL, NULL), "NULL");
    CHECK_INVALID(stp_config_timeouts(NULL, 1000, 1000, 1000), "NULL");
    CHECK_INVALID(stp_config_timeouts(cfg, 0, 1000, 1000), "positive");
    CHECK_INVALID(stp_config_timeouts(cfg, 1000, 0, 1000), "positive");
    CHECK_INVALID(stp_config_timeouts(cfg, 1000, 1000, 0), "positive");
    CHECK_INVALID(stp_config_shm_pool(NULL, 1 << 20), "NULL");
    CHECK_INVALID(stp_config_multicast_scouting(NULL, false), "NULL");
    CHECK_INVALID(stp_config_queue_prefetch(NULL, 4), "NULL");
    CHECK_INVALID(stp_config_spin_rounds(NULL, -1), "NULL");
    CHECK_INVALID(stp_config_zenoh(NULL, "scouting/multicast/enabled", "false"), "NULL");
    CHECK_INVALID(stp_config_zenoh(cfg, NULL, "false"), "path");
    CHECK_INVALID(stp_config_zenoh(cfg, "scouting/multicast/enabled", NULL), "json5_value");
    CHECK_INVALID(stp_runtime_join(NULL, cfg, &rt2), "NULL");
    CHECK_INVALID(stp_runtime_join("app", NULL, &rt2), "NULL");
    CHECK_INVALID(stp_runtime_join("app", cfg, NULL), "NULL");
    CHECK(rt2 == (stp_runtime *)&rt);

    /* NULL is no container here. */
    CHECK(!stp_channel_is_local(NULL));
    CHECK(!stp_queue_is_local(NULL));
    CHECK(!stp_register_is_local(NULL));

    /* Every free accepts NULL. */
    stp_item_free(NULL);
    stp_pacer_free(NULL);
    stp_config_free(NULL);
    stp_channel_free(NULL);
    stp_queue_free(NULL);
    stp_register_free(NULL);
    stp_task_free(NULL);
    stp_channel_in_free(NULL);
    stp_channel_out_free(NULL);
    stp_queue_in_free(NULL);
    stp_queue_out_free(NULL);
    stp_register_in_free(NULL);
    stp_register_out_free(NULL);
    stp_runtime_free(NULL);
done:
    stp_item_free(it);
    stp_item_free(it2);
    stp_config_free(cfg);
    stp_pacer_free(p);
    stp_register_in_free(rin);
    stp_register_out_free(rout);
    stp_queue_in_free(qin);
    stp_queue_out_free(qout);
    stp_channel_in_free(in);
    stp_channel_out_free(out);
    stp_task_free(t);
    stp_register_free(reg);
    stp_queue_free(q);
    stp_channel_free(ch);
    stp_runtime_free(rt);
}

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

static size_t heap_in_use(void) {
    struct mallinfo2 m = mallinfo2();
    return m.uordblks;
}

static int thread_count(void) {
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;
    if (d == NULL) return -1;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static const stp_runtime *g_leak_rt;
static stp_status nul_item_bytes(void) { return stp_item_bytes("abc", 3, NULL); }
static stp_status nul_item_text(void) { return stp_item_text("abc", NULL); }
static stp_status nul_item_array(void) {
    static const size_t sh[1] = {4};
    static const uint8_t d[4] = {1, 2, 3, 4};
    return stp_item_array(STP_U8, 1, sh, d, sizeof d, NULL);
}
static stp_status nul_pacer_new(void) { return stp_pacer_new(1000, 0, STP_LATE_CONTINUE, NULL); }
static stp_status nul_channel_new(void) { return stp_channel_new(g_leak_rt, NULL, 0, 0, NULL); }
static stp_status nul_task_new(void) { return stp_task_new(g_leak_rt, 0, NULL, NULL); }

/* A call that fails with STP_INVALID_ARGUMENT because its `out` is NULL must not leave
 * anything behind. Measured with the C library's heap counters (2000 calls each) and, for
 * runtimes, by the threads left running. The AddressSanitizer build skips it: the calls that
 * leak would only repeat the failure as a leak report at exit. */
static void test_null_out_does_not_leak(void) {
    static const struct {
        const char *call;
        stp_status (*fn)(void);
    } calls[] = {
        {"stp_channel_new(rt, NULL, 0, 0, NULL)", nul_channel_new}, /* controls: no leak */
        {"stp_task_new(rt, 0, NULL, NULL)", nul_task_new},
        {"stp_item_bytes(\"abc\", 3, NULL)", nul_item_bytes},
        {"stp_item_text(\"abc\", NULL)", nul_item_text},
        {"stp_item_array(STP_U8, 1, {4}, data, 4, NULL)", nul_item_array},
        {"stp_pacer_new(1000, 0, STP_LATE_CONTINUE, NULL)", nul_pacer_new},
    };
    enum { N = 2000 };
    stp_runtime *rt = NULL;
    int before, after;
#ifdef UNDER_ASAN
    skip_test("measured by the build without AddressSanitizer");
    return;
#endif
    CHECK_OK(stp_runtime_new(&rt));
    g_leak_rt = rt;
    for (size_t c = 0; c < sizeof calls / sizeof calls[0]; c++) {
        stp_status st = calls[c].fn(); /* warm up lazily allocated state */
        CHECK_MSG(st == STP_INVALID_ARGUMENT, "%s -> %s", calls[c].call,
                  stp_status_name((int32_t)st));
        CHECK_MSG(strstr(stp_last_error(), "NULL") != NULL, "%s: stp_last_error \"%s\"",
                  calls[c].call, stp_last_error());
        size_t h0 = heap_in_use();
        for (int i = 0; i < N; i++) calls[c].fn();
        size_t h1 = heap_in_use();
        if (h1 > h0 && h1 - h0 >= (size_t)N * 16)
            fail_at(__FILE__, __LINE__,
                    "%s -> STP_INVALID_ARGUMENT but leaks: the heap grew by %zu bytes over %d "
                    "calls (%zu per call)", calls[c].call, h1 - h0, N, (h1 - h0) / N);
    }
    /* The control: a runtime made and freed leaves no thread behind. */
    stp_runtime_free(rt);
    rt = NULL;
    g_leak_rt = NULL;
    sleep_ms(50);
    before = thread_count();
    CHECK_OK(stp_runtime_new(&rt));
    stp_runtime_free(rt);
    rt = NULL;
    sleep_ms(50);
    after = thread_count();
    CHECK_MSG(before > 0 && after == before,
              "threads %d before stp_runtime_new + stp_runtime_free, %d after", before, after);
    /* stp_runtime_new(NULL) must not start a runtime (and its collector thread) it cannot
     * hand out. */
    CHECK_ST(stp_runtime_new(NULL), STP_INVALID_ARGUMENT);
    sleep_ms(50);
    after = thread_count();
    CHECK_MSG(after == before,
              "stp_runtime_new(NULL) -> STP_INVALID_ARGUMENT but left a runtime behind with its "
              "collector thread running: %d threads before, %d after", before, after);
done:
    g_leak_rt = NULL;
    stp_runtime_free(rt);
}

/* stp_last_error() and stp_last_neighbors() belong to the calling thread, and successful
 * calls leave them alone. */
typedef struct {
    const stp_channel_in *in;
    stp_status st1, st2;
    char msg[512];
    stp_neighbors nb;
} other_thread;

static void *other_thread_main(void *p) {
    other_thread *o = p;
    int64_t ts;
    stp_item *it = NULL;
    o->st1 = stp_channel_consume(NULL, 1);
    o->st2 = stp_channel_get(o->in, STP_EXACT, 100, 0, &ts, &it);
    snprintf(o->msg, sizeof o->msg, "%s", stp_last_error());
    o->nb = stp_last_neighbors();
    stp_item_free(it);
    return NULL;
}

static void test_last_error_per_thread(void) {
    chan_fix f;
    char mine[512];
    pthread_t th;
    other_thread o;
    stp_neighbors nb;
    memset(&o, 0, sizeof o);
    CHAN_SETUP(f, 0);
    PUT(f.out, 5, "5");
    PUT(f.out, 9, "9");
    GET_FAILS(f.in, STP_EXACT, 6, 0, STP_UNAVAILABLE);
    snprintf(mine, sizeof mine, "%s", stp_last_error());
    CHECK(mine[0] != '\0');
    o.in = f.in;
    CHECK(pthread_create(&th, NULL, other_thread_main, &o) == 0);
    CHECK(join_within(th, LONG_MS));
    CHECK_EQ_I64(o.st1, STP_INVALID_ARGUMENT);
    CHECK_EQ_I64(o.st2, STP_UNAVAILABLE);
    CHECK(o.nb.has_below && o.nb.below == 9 && !o.nb.has_above);
    CHECK_MSG(strcmp(o.msg, mine) != 0, "both threads report \"%s\"", mine);
    /* This thread's report is unchanged by the other's failures and by successes here. */
    CHECK_STR(stp_last_error(), mine);
    GET(f.in, STP_EXACT, 9, 0, 9, "9");
    CHECK_OK(stp_channel_consume(f.in, 9));
    CHECK_STR(stp_last_error(), mine);
    nb = stp_last_neighbors();
    CHECK(nb.has_below && nb.below == 5 && nb.has_above && nb.above == 9);
    /* A failure that is not a get reports no neighbours. */
    CHECK_ST(stp_channel_consume(NULL, 0), STP_INVALID_ARGUMENT);
    nb = stp_last_neighbors();
    CHECK(!nb.has_below && !nb.has_above);
done:
    chan_teardown(&f);
}

static void test_zone_mismatch(void) {
    stp_runtime *rt = NULL;
    stp_channel *ch = NULL;
    stp_task *t = NULL;
    stp_channel_out *out = NULL;
    stp_channel_in *in = NULL;
    CHECK_OK(stp_runtime_new(&rt));
    CHECK_OK(stp_channel_new(rt, "zone1", 0, 1, &ch));
    CHECK_OK(stp_task_new(rt, 0, NULL, &t));
    /* Tasks of the C API live in zone 0: they may read a zone-1 channel, not put into it. */
    CHECK_ST(stp_channel_attach_output(t, ch, &out), STP_ZONE_MISMATCH);
    CHECK(out == NULL);
    CHECK_OK(stp_channel_attach_input(t, ch, &in));
done:
    stp_channel_in_free(in);
    stp_channel_out_free(out);
    stp_task_free(t);
    stp_channel_free(ch);
    stp_runtime_free(rt);
}

static void test_too_many_connections(void) {
    stp_runtime *rt = NULL;
    stp_channel *ch = NULL;
    stp_task *t = NULL;
    stp_channel_in *ins[65] = {0};
    CHECK_OK(stp_runtime_new(&rt));
    CHECK_OK(stp_channel_new(rt, NULL, 0, 0, &ch));
    CHECK_OK(stp_task_new(rt, 0, NULL, &t));
    for (int i = 0; i < 64; i++) CHECK_OK(stp_channel_attach_input(t, ch, &ins[i]));
    CHECK_ST(stp_channel_attach_input(t, ch, &ins[64]), STP_TOO_MANY_CONNECTIONS);
    CHECK(ins[64] == NULL);
    /* A freed connection frees its place. */
    stp_channel_in_free(ins[5]);
    ins[5] = NULL;
    CHECK_OK(stp_channel_attach_input(t, ch, &ins[64]));
done:
    for (int i = 0; i < 65; i++) stp_channel_in_free(ins[i]);
    stp_task_free(t);
    stp_channel_free(ch);
    stp_runtime_free(rt);
}

static void test_invalid_selector(void) {
    chan_fix f;
    int64_t ts = -7;
    stp_item *it = NULL;
    CHAN_SETUP(f, 0);
    PUT(f.out, 1, "one");
    CHECK_INVALID(stp_channel_get(f.in, 5, 0, 0, &ts, &it), "stp_selector");
    CHECK_INVALID(stp_channel_get(f.in, -1, 0, 0, &ts, &it), "stp_selector");
    CHECK_INVALID(stp_channel_get(f.in, 1000, 0, LONG_MS, &ts, &it), "stp_selector");
    CHECK(it == NULL && ts == -7);
    /* The bad gets opened nothing: NEXT_UNSEEN still starts at the beginning. */
    GET(f.in, STP_NEXT_UNSEEN, 0, 0, 1, "one");
done:
    stp_item_free(it);
    chan_teardown(&f);
}

/* ------------------------------------------------------------------------------------------ */
/* Channels on the embedded runtime                                                           */
/* ------------------------------------------------------------------------------------------ */

static void test_channel_exact_oldest_newest(void) {
    chan_fix f;
    stp_channel_in *other = NULL;
    CHAN_SETUP(f, 0);
    CHECK_OK(stp_channel_attach_input(f.cons, f.ch, &other));
    /* Puts in any order. */
    static const int64_t order[] = {3, 1, 5, 2, 4};
    for (int i = 0; i < 5; i++) {
        char s[32];
        snprintf(s, sizeof s, "item-%lld", (long long)order[i]);
        PUT(f.out, order[i], s);
    }
    GET(f.in, STP_EXACT, 3, LONG_MS, 3, "item-3");
    /* Open but not consumed: still there. */
    GET(f.in, STP_EXACT, 3, 0, 3, "item-3");
    GET(f.in, STP_OLDEST, 0, 0, 1, "item-1");
    GET(f.in, STP_NEWEST, 0, 0, 5, "item-5");
    /* `ts` is ignored by the other selectors. */
    GET(f.in, STP_OLDEST, 4, 0, 1, "item-1");
    CHECK_OK(stp_channel_consume(f.in, 1));
    CHECK_OK(stp_channel_consume(f.in, 5));
    GET(f.in, STP_OLDEST, 0, 0, 2, "item-2");
    GET(f.in, STP_NEWEST, 0, 0, 4, "item-4");
    GET(f.in, STP_NEWEST, 0, 0, 4, "item-4"); /* whether open or not */
    /* Consumption is per connection. */
    GET(other, STP_OLDEST, 0, 0, 1, "item-1");
    GET(other, STP_NEWEST, 0, 0, 5, "item-5");
done:
    stp_channel_in_free(other);
    chan_teardown(&f);
}

static void test_channel_newest_unseen(void) {
    chan_fix f;
    CHAN_SETUP(f, 0);
    for (int64_t ts = 1; ts <= 5; ts++) {
        char s[16];
        snprintf(s, sizeof s, "n%lld", (long long)ts);
        PUT(f.out, ts, s);
    }
    GET(f.in, STP_NEWEST_UNSEEN, 0, 0, 5, "n5");
    /* 5 is open now, so the newest never gotten is 4. */
    GET(f.in, STP_NEWEST_UNSEEN, 0, 0, 4, "n4");
    PUT(f.out, 6, "n6");
    GET(f.in, STP_NEWEST_UNSEEN, 0, 0, 6, "n6");
    GET(f.in, STP_NEWEST_UNSEEN, 0, 0, 3, "n3");
    GET(f.in, STP_NEWEST_UNSEEN, 0, 0, 2, "n2");
    GET(f.in, STP_NEWEST_UNSEEN, 0, LONG_MS, 1, "n1");
    /* Everything was gotten: nothing unseen; the nearest available below is reported. */
    GET_FAILS(f.in, STP_NEWEST_UNSEEN, 0, 0, STP_UNAVAILABLE);
    CHECK_NEIGHBORS(1, 6, 0, 0);
    /* A consumed item is not available, an unconsumed one is even when open. */
    CHECK_OK(stp_channel_consume(f.in, 6));
    GET(f.in, STP_NEWEST, 0, 0, 5, "n5");
    PUT(f.out, 7, "n7");
    GET(f.in, STP_NEWEST_UNSEEN, 0, 0, 7, "n7");
done:
    chan_teardown(&f);
}

static void test_channel_next_unseen(void) {
    chan_fix f;
    CHAN_SETUP(f, 0);
    PUT(f.out, 2, "2");
    PUT(f.out, 0, "0");
    PUT(f.out, 1, "1");
    GET(f.in, STP_NEXT_UNSEEN, 0, 0, 0, "0");
    GET(f.in, STP_NEXT_UNSEEN, 0, 0, 1, "1");
    GET(f.in, STP_NEXT_UNSEEN, 0, LONG_MS, 2, "2");
    GET_FAILS(f.in, STP_NEXT_UNSEEN, 0, 0, STP_UNAVAILABLE);
    CHECK_NEIGHBORS(1, 1, 0, 0); /* around the last get (2): 1 is the nearest below */
    PUT(f.out, 10, "10");
    GET(f.in, STP_NEXT_UNSEEN, 0, 0, 10, "10");
    /* An older item arriving later is not "next", but still there. */
    PUT(f.out, 5, "5");
    GET_FAILS(f.in, STP_NEXT_UNSEEN, 0, 0, STP_UNAVAILABLE);
    CHECK_NEIGHBORS(1, 5, 0, 0);
    GET(f.in, STP_EXACT, 5, 0, 5, "5");
    /* NEXT_UNSEEN continues after the last get of any selector (now 5). */
    GET(f.in, STP_NEXT_UNSEEN, 0, 0, 10, "10");
    GET(f.in, STP_OLDEST, 0, 0, 0, "0");
    GET(f.in, STP_NEXT_UNSEEN, 0, 0, 1, "1");
done:
    chan_teardown(&f);
}

static void test_channel_try_get_neighbors(void) {
    chan_fix f;
    CHAN_SETUP(f, 0);
    GET_FAILS(f.in, STP_EXACT, 6, 0, STP_UNAVAILABLE);
    CHECK_NEIGHBORS(0, 0, 0, 0);
    GET_FAILS(f.in, STP_OLDEST, 0, 0, STP_UNAVAILABLE);
    CHECK_NEIGHBORS(0, 0, 0, 0);
    GET_FAILS(f.in, STP_NEWEST, 0, 0, STP_UNAVAILABLE);
    PUT(f.out, 9, "9");
    PUT(f.out, 2, "2");
    PUT(f.out, 5, "5");
    GET_FAILS(f.in, STP_EXACT, 6, 0, STP_UNAVAILABLE);
    CHECK_NEIGHBORS(1, 5, 1, 9);
    GET_FAILS(f.in, STP_EXACT, 1, 0, STP_UNAVAILABLE);
    CHECK_NEIGHBORS(0, 0, 1, 2);
    GET_FAILS(f.in, STP_EXACT, 10, 0, STP_UNAVAILABLE);
    CHECK_NEIGHBORS(1, 9, 0, 0);
    /* Consumed items are no neighbours on this connection. */
    CHECK_OK(stp_channel_consume(f.in, 5));
    GET_FAILS(f.in, STP_EXACT, 6, 0, STP_UNAVAILABLE);
    CHECK_NEIGHBORS(1, 2, 1, 9);
    /* A successful get in between does not disturb the next failure's report. */
    GET(f.in, STP_EXACT, 9, 0, 9, "9");
    GET_FAILS(f.in, STP_EXACT, 3, 0, STP_UNAVAILABLE);
    CHECK_NEIGHBORS(1, 2, 1, 9);
done:
    chan_teardown(&f);
}

static void test_channel_get_timeout(void) {
    chan_fix f;
    double t0, el;
    CHAN_SETUP(f, 0);
    PUT(f.out, 5, "5");
    PUT(f.out, 9, "9");
    t0 = now_ms();
    GET_FAILS(f.in, STP_EXACT, 6, 40, STP_TIMEOUT);
    el = now_ms() - t0;
    CHECK_NEIGHBORS(1, 5, 1, 9);
    CHECK_MSG(el >= 40.0, "returned after %.2f ms, timeout 40 ms", el);
    CHECK_MSG(el < 40.0 + 3000, "returned after %.2f ms, timeout 40 ms", el);
    /* NEXT_UNSEEN after the newest item, and OLDEST on an empty channel. */
    GET(f.in, STP_NEXT_UNSEEN, 0, 0, 5, "5");
    GET(f.in, STP_NEXT_UNSEEN, 0, 0, 9, "9");
    t0 = now_ms();
    GET_FAILS(f.in, STP_NEXT_UNSEEN, 0, 25, STP_TIMEOUT);
    el = now_ms() - t0;
    CHECK_MSG(el >= 25.0, "returned after %.2f ms, timeout 25 ms", el);
    CHECK_NEIGHBORS(1, 5, 0, 0);
    /* A timeout of 0 never waits: STP_UNAVAILABLE, not STP_TIMEOUT. */
    t0 = now_ms();
    GET_FAILS(f.in, STP_EXACT, 6, 0, STP_UNAVAILABLE);
    el = now_ms() - t0;
    CHECK_MSG(el < 200.0, "a non-blocking get took %.2f ms", el);
done:
    chan_teardown(&f);
}

static void test_channel_blocking_get_released_by_put(void) {
    chan_fix f;
    pthread_t th;
    bool running = false;
    getter g;
    memset(&g, 0, sizeof g);
    CHAN_SETUP(f, 0);
    g.in = f.in;
    g.sel = STP_EXACT;
    g.ts = 7;
    g.timeout_ms = STP_FOREVER;
    CHECK(pthread_create(&th, NULL, getter_main, &g) == 0);
    running = true;
    wait_started(&g.started);
    sleep_ms(50);
    CHECK_MSG(!atomic_load(&g.finished), "the get returned %s before the put",
              stp_status_name((int32_t)g.st));
    PUT(f.out, 3, "not this one");
    sleep_ms(10);
    CHECK_MSG(!atomic_load(&g.finished), "the get returned %s on another timestamp's put",
              stp_status_name((int32_t)g.st));
    PUT(f.out, 7, "seven");
    CHECK_MSG(join_within(th, LONG_MS), "the get stayed blocked after the put");
    running = false;
    CHECK_MSG(g.st == STP_OK, "get -> %s: %s", stp_status_name((int32_t)g.st), g.error);
    CHECK_EQ_I64(g.got_ts, 7);
    CHECK(is_text(g.item, "seven"));
    CHECK_MSG(g.elapsed_ms >= 50.0, "blocked only %.2f ms", g.elapsed_ms);
done:
    if (running) {
        /* Release the thread: closing makes the get fail. */
        stp_channel_close(f.ch);
        if (join_within(th, LONG_MS)) running = false;
    }
    stp_item_free(g.item);
    if (!running) chan_teardown(&f);
}

static void test_channel_duplicate_timestamp(void) {
    chan_fix f;
    CHAN_SETUP(f, 0);
    PUT(f.out, 3, "first");
    CHECK_ST(put_text(f.out, 3, "second", 0, 0), STP_DUPLICATE);
    CHECK_ST(put_text(f.out, 3, "second", 0, 100), STP_DUPLICATE);
    GET(f.in, STP_EXACT, 3, 0, 3, "first");
    /* Consumed but not reclaimed: still a duplicate. */
    CHECK_OK(stp_channel_consume(f.in, 3));
    CHECK_ST(put_text(f.out, 3, "third", 0, 0), STP_DUPLICATE);
    /* Reclaimed by its reference count: its timestamp cannot be reused either. */
    CHECK_OK(put_text(f.out, 4, "once", 1, 0));
    GET(f.in, STP_EXACT, 4, 0, 4, "once");
    CHECK_OK(stp_channel_consume(f.in, 4));
    CHECK_ST(put_text(f.out, 4, "again", 0, 0), STP_DUPLICATE);
    /* INFINITY is never a timestamp. */
    CHECK_ST(put_text(f.out, STP_INFINITY, "inf", 0, 0), STP_INVALID_ARGUMENT);
    GET_FAILS(f.in, STP_EXACT, STP_INFINITY, 0, STP_GONE);
done:
    chan_teardown(&f);
}

static void test_channel_bounded_full(void) {
    chan_fix f;
    double t0, el;
    CHAN_SETUP(f, 2);
    PUT(f.out, 0, "0");
    PUT(f.out, 1, "1");
    CHECK_ST(put_text(f.out, 2, "2", 0, 0), STP_FULL);
    CHECK(strstr(stp_last_error(), "full") != NULL);
    /* A timed put waits for the timeout, then fails. */
    CHECK_OK(stp_task_set_virtual_time(f.prod, 1));
    t0 = now_ms();
    CHECK_ST(put_text(f.out, 5, "5", 0, 50), STP_FULL);
    el = now_ms() - t0;
    CHECK_MSG(el >= 50.0, "the timed put gave up after %.2f ms, timeout 50 ms", el);
    CHECK_MSG(el < 50.0 + 3000, "the timed put gave up after %.2f ms, timeout 50 ms", el);
    /* The abandoned put no longer holds the producer's visibility. */
    CHECK_EQ_I64(stp_task_visibility(f.prod), 1);
    /* Nothing of the failed puts was stored. */
    GET(f.in, STP_OLDEST, 0, 0, 0, "0");
    GET(f.in, STP_NEWEST, 0, 0, 1, "1");
    GET_FAILS(f.in, STP_EXACT, 2, 0, STP_UNAVAILABLE);
    GET_FAILS(f.in, STP_EXACT, 5, 0, STP_UNAVAILABLE);
done:
    chan_teardown(&f);
}

typedef struct {
    const stp_channel_out *out;
    int64_t ts;
    uint32_t consumers;
    int64_t timeout_ms;
    stp_status st;
    char error[512];
    atomic_int started, finished;
} putter;

static void *putter_main(void *p) {
    putter *u = p;
    atomic_store(&u->started, 1);
    u->st = put_text(u->out, u->ts, "blocked put", u->consumers, u->timeout_ms);
    snprintf(u->error, sizeof u->error, "%s", u->st == STP_OK ? "" : stp_last_error());
    atomic_store(&u->finished, 1);
    return NULL;
}

static void test_channel_blocked_put_released_by_gc(void) {
    chan_fix f;
    pthread_t th;
    bool running = false;
    putter u;
    memset(&u, 0, sizeof u);
    CHAN_SETUP(f, 2);
    PUT(f.out, 0, "0");
    PUT(f.out, 1, "1");
    CHECK_OK(stp_task_set_virtual_time(f.prod, 2));
    GET(f.in, STP_OLDEST, 0, 0, 0, "0");
    u.out = f.out;
    u.ts = 2;
    u.timeout_ms = STP_FOREVER;
    CHECK(pthread_create(&th, NULL, putter_main, &u) == 0);
    running = true;
    wait_started(&u.started);
    sleep_ms(60);
    CHECK_MSG(!atomic_load(&u.finished), "the put into a full channel returned %s: %s",
              stp_status_name((int32_t)u.st), u.error);
    /* The pending put holds the producer's visibility at its timestamp. */
    CHECK_EQ_I64(stp_task_visibility(f.prod), 2);
    /* The consumer lets 0 go: the watermark rises to 1, 0 is reclaimed, the put goes in. */
    CHECK_OK(stp_channel_consume(f.in, 0));
    CHECK_MSG(join_within(th, LONG_MS), "the blocked put was not released by the consume");
    running = false;
    CHECK_MSG(u.st == STP_OK, "put -> %s: %s", stp_status_name((int32_t)u.st), u.error);
    GET_FAILS(f.in, STP_EXACT, 0, 0, STP_GONE);
    GET(f.in, STP_OLDEST, 0, 0, 1, "1");
    GET(f.in, STP_EXACT, 2, 0, 2, "blocked put");
    /* Full again: 1 and 2 are stored, neither reclaimable. */
    CHECK_ST(put_text(f.out, 3, "3", 0, 0), STP_FULL);
done:
    if (running) {
        stp_channel_close(f.ch);
        if (join_within(th, LONG_MS)) running = false;
    }
    if (!running) chan_teardown(&f);
}

static void test_channel_blocked_put_released_by_refcount(void) {
    chan_fix f;
    pthread_t th;
    bool running = false;
    putter u;
    memset(&u, 0, sizeof u);
    CHAN_SETUP(f, 1);
    /* The producer stays at 0, so only the reference count can free the slot. */
    CHECK_OK(put_text(f.out, 0, "0", 1, 0));
    u.out = f.out;
    u.ts = 1;
    u.timeout_ms = LONG_MS;
    CHECK(pthread_create(&th, NULL, putter_main, &u) == 0);
    running = true;
    wait_started(&u.started);
    sleep_ms(30);
    CHECK(!atomic_load(&u.finished));
    GET(f.in, STP_EXACT, 0, 0, 0, "0");
    CHECK_OK(stp_channel_consume(f.in, 0));
    CHECK_MSG(join_within(th, LONG_MS), "the blocked put was not released");
    running = false;
    CHECK_MSG(u.st == STP_OK, "put -> %s: %s", stp_status_name((int32_t)u.st), u.error);
    GET_FAILS(f.in, STP_EXACT, 0, 0, STP_GONE);
    GET(f.in, STP_NEXT_UNSEEN, 0, 0, 1, "blocked put");
done:
    if (running) {
        stp_channel_close(f.ch);
        if (join_within(th, LONG_MS)) running = false;
    }
    if (!running) chan_teardown(&f);
}

/* A put blocked on a full channel gives up when its stop flag is set, storing nothing. */
static void test_channel_put_interruptible(void) {
    chan_fix f;
    pthread_t th;
    bool running = false;
    stopper s;
    int32_t stop = 0;
    stp_item *it = NULL;
    stp_channel_stats cs;
    double t0, el;
    CHAN_SETUP(f, 1);
    PUT(f.out, 0, "0"); /* full now, and the producer's virtual time 0 keeps it */
    it = text_item("1");
    CHECK(it != NULL);
    /* Without a flag it is stp_channel_put; with one not set, a timed put still times out. */
    CHECK_ST(stp_channel_put_interruptible(f.out, 1, it, 0, 0, NULL), STP_FULL);
    CHECK_ST(stp_channel_put_interruptible(f.out, 1, it, 0, 30, &stop), STP_FULL);
    CHECK(start_stopper(&th, &s, &stop, 100));
    running = true;
    t0 = now_ms();
    CHECK_ST(stp_channel_put_interruptible(f.out, 1, it, 0, STP_FOREVER, &stop), STP_INTERRUPTED);
    el = now_ms() - t0;
    CHECK_MSG(el >= 80.0 && el < 100.0 + 3000, "the put gave up after %.2f ms, flag set at 100",
              el);
    CHECK_MSG(strstr(stp_last_error(), "interrupted") != NULL, "\"%s\"", stp_last_error());
    pthread_join(th, NULL);
    running = false;
    /* Nothing of the abandoned put was stored. */
    CHECK_OK(stp_channel_get_stats(f.ch, &cs));
    CHECK_EQ_U64(cs.items, 1);
    CHECK_EQ_U64(cs.puts, 1);
    GET(f.in, STP_NEWEST, 0, 0, 0, "0");
    GET_FAILS(f.in, STP_EXACT, 1, 0, STP_UNAVAILABLE);
    /* With the flag cleared and room made, the same call puts. */
    stop = 0;
    CHECK_OK(stp_task_set_virtual_time(f.prod, 1));
    CHECK_OK(stp_channel_consume(f.in, 0));
    CHECK_OK(stp_channel_put_interruptible(f.out, 1, it, 0, LONG_MS, &stop));
    GET(f.in, STP_EXACT, 1, 0, 1, "1");
done:
    if (running) pthread_join(th, NULL);
    stp_item_free(it);
    chan_teardown(&f);
}

static void test_channel_consume_gone(void) {
    chan_fix f;
    stp_channel_in *other = NULL;
    double t0, el;
    CHAN_SETUP(f, 0);
    CHECK_OK(stp_channel_attach_input(f.cons, f.ch, &other));
    PUT(f.out, 1, "1");
    GET(f.in, STP_EXACT, 1, LONG_MS, 1, "1");
    CHECK_OK(stp_channel_consume(f.in, 1));
    GET_FAILS(f.in, STP_EXACT, 1, 0, STP_GONE);
    /* A blocking get fails at once instead of waiting. */
    t0 = now_ms();
    GET_FAILS(f.in, STP_EXACT, 1, LONG_MS, STP_GONE);
    el = now_ms() - t0;
    CHECK_MSG(el < 1000.0, "a get of a consumed item took %.2f ms", el);
    /* Only on that connection. */
    GET(other, STP_EXACT, 1, 0, 1, "1");
    /* Never put and not consumed: merely unavailable. */
    GET_FAILS(f.in, STP_EXACT, 2, 0, STP_UNAVAILABLE);
    /* Consumes before arrival: consume(7) and consume_until(5) cover later items. */
    CHECK_OK(stp_channel_consume(f.in, 7));
    CHECK_OK(stp_channel_consume_until(f.in, 5));
    PUT(f.out, 3, "3");
    PUT(f.out, 5, "5");
    PUT(f.out, 6, "6");
    PUT(f.out, 7, "7");
    GET_FAILS(f.in, STP_EXACT, 3, 0, STP_GONE);
    GET_FAILS(f.in, STP_EXACT, 5, 0, STP_GONE);
    GET_FAILS(f.in, STP_EXACT, 7, 0, STP_GONE);
    GET(f.in, STP_OLDEST, 0, 0, 6, "6");
    GET(f.in, STP_NEWEST, 0, 0, 6, "6");
    GET(other, STP_NEWEST, 0, 0, 7, "7");
    /* consume_until after gets, and idempotence. */
    CHECK_OK(stp_channel_consume_until(other, 6));
    CHECK_OK(stp_channel_consume_until(other, 2));
    CHECK_OK(stp_channel_consume(f.in, 7));
    GET_FAILS(other, STP_EXACT, 6, 0, STP_GONE);
    GET_FAILS(other, STP_EXACT, 1, 0, STP_GONE);
    GET(other, STP_OLDEST, 0, 0, 7, "7");
done:
    stp_channel_in_free(other);
    chan_teardown(&f);
}

/* A task joining late starts at the floor: 0 is refused once the floor has passed it. */
static void test_task_at_floor(void) {
    stp_runtime *rt = NULL;
    stp_channel *ch = NULL;
    stp_task *p = NULL, *late = NULL, *zero = NULL;
    stp_channel_out *out = NULL;
    CHECK_OK(stp_runtime_new(&rt));
    CHECK(stp_runtime_floor(rt, 0) <= 0);
    CHECK_OK(stp_task_new(rt, STP_AT_FLOOR, "first", &zero));
    CHECK_EQ_I64(stp_task_virtual_time(zero), 0);
    stp_task_free(zero);
    zero = NULL;
    CHECK_OK(stp_channel_new(rt, NULL, 0, 0, &ch));
    CHECK_OK(stp_task_new(rt, 0, "p", &p));
    CHECK_OK(stp_channel_attach_output(p, ch, &out));
    CHECK_OK(put_text(out, 0, "zero", 0, 0));
    CHECK_OK(stp_task_set_virtual_time(p, 50));
    {
        double end = now_ms() + LONG_MS;
        while (stp_runtime_floor(rt, 0) <= 0 && now_ms() < end) sleep_ms(5);
    }
    CHECK(stp_runtime_floor(rt, 0) > 0);
    CHECK_ST(stp_task_new(rt, 0, "zero", &zero), STP_BELOW_VISIBILITY);
    CHECK(zero == NULL);
    CHECK_OK(stp_task_new(rt, STP_AT_FLOOR, "late", &late));
    CHECK(stp_task_virtual_time(late) > 0);
    CHECK_EQ_I64(stp_task_virtual_time(late), stp_runtime_floor(rt, 0));
    CHECK_EQ_I64(stp_runtime_floor(NULL, 0), STP_INFINITY);
done:
    stp_channel_out_free(out);
    stp_task_free(late);
    stp_task_free(zero);
    stp_task_free(p);
    stp_channel_free(ch);
    stp_runtime_free(rt);
}

static void test_virtual_time_rules(void) {
    stp_runtime *rt = NULL;
    stp_channel *ch = NULL;
    stp_task *p = NULL, *c = NULL, *child = NULL, *bad = NULL;
    stp_channel_out *out = NULL, *cout = NULL;
    stp_channel_in *in = NULL;
    CHECK_OK(stp_runtime_new(&rt));
    CHECK_OK(stp_channel_new(rt, NULL, 0, 0, &ch));
    CHECK_OK(stp_task_new(rt, 10, "p", &p));
    CHECK_EQ_I64(stp_task_virtual_time(p), 10);
    CHECK_EQ_I64(stp_task_visibility(p), 10);
    CHECK_OK(stp_channel_attach_output(p, ch, &out));
    /* Rule 1: puts at or above visibility. */
    CHECK_ST(put_text(out, 5, "early", 0, 0), STP_BELOW_VISIBILITY);
    CHECK_ST(put_text(out, 9, "early", 0, LONG_MS), STP_BELOW_VISIBILITY);
    CHECK_OK(put_text(out, 10, "ten", 0, 0));
    CHECK_OK(put_text(out, 30, "thirty", 0, 0));
    /* Rule 4: virtual time at or above visibility. */
    CHECK_ST(stp_task_set_virtual_time(p, 9), STP_BELOW_VISIBILITY);
    CHECK_EQ_I64(stp_task_virtual_time(p), 10);
    CHECK_OK(stp_task_set_virtual_time(p, 20));
    CHECK_EQ_I64(stp_task_virtual_time(p), 20);
    CHECK_ST(stp_task_set_virtual_time(p, 15), STP_BELOW_VISIBILITY);
    CHECK_ST(put_text(out, 15, "fifteen", 0, 0), STP_BELOW_VISIBILITY);
    /* An open item holds its getter's visibility. */
    CHECK_OK(stp_task_new(rt, 0, "c", &c));
    CHECK_OK(stp_channel_attach_input(c, ch, &in));
    CHECK_OK(stp_task_set_virtual_time(c, 100));
    GET(in, STP_EXACT, 10, 0, 10, "ten");
    CHECK_EQ_I64(stp_task_virtual_time(c), 100);
    CHECK_EQ_I64(stp_task_visibility(c), 10);
    CHECK_ST(stp_task_set_virtual_time(c, 5), STP_BELOW_VISIBILITY);
    CHECK_OK(stp_task_set_virtual_time(c, 12)); /* down to visibility is allowed */
    CHECK_OK(stp_channel_attach_output(c, ch, &cout));
    CHECK_ST(put_text(cout, 9, "below", 0, 0), STP_BELOW_VISIBILITY);
    CHECK_OK(put_text(cout, 11, "eleven", 0, 0)); /* vt 12 but visibility 10 */
    /* Rule 2: a child starts at or above its parent's visibility. */
    CHECK_ST(stp_task_child(c, 9, &bad), STP_BELOW_VISIBILITY);
    CHECK(bad == NULL);
    CHECK_OK(stp_task_child(c, 10, &child));
    CHECK_EQ_I64(stp_task_virtual_time(child), 10);
    CHECK_EQ_I64(stp_task_visibility(child), 10);
    /* Rule 3: a new input connection starts with the items below visibility consumed. */
    {
        stp_task *late = NULL;
        stp_channel_in *lin = NULL;
        bool ok = stp_task_new(rt, 25, "late", &late) == STP_OK &&
                  stp_channel_attach_input(late, ch, &lin) == STP_OK &&
                  expect_get_fails(__FILE__, __LINE__, lin, STP_EXACT, 10, 0, STP_GONE) &&
                  expect_get_fails(__FILE__, __LINE__, lin, STP_EXACT, 11, 0, STP_GONE) &&
                  expect_get(__FILE__, __LINE__, lin, STP_OLDEST, 0, 0, 30, "thirty");
        stp_channel_in_free(lin);
        stp_task_free(late);
        CHECK_MSG(ok, "rule 3: %s", stp_last_error());
    }
    /* Consuming the open item releases the visibility to the virtual time. */
    CHECK_OK(stp_channel_consume(in, 10));
    CHECK_EQ_I64(stp_task_visibility(c), 12);
    CHECK_ST(stp_task_set_virtual_time(c, 11), STP_BELOW_VISIBILITY);
    /* STP_INFINITY: holds nothing back, and every put is below it. */
    CHECK_OK(stp_task_set_virtual_time(p, STP_INFINITY));
    CHECK_EQ_I64(stp_task_visibility(p), STP_INFINITY);
    CHECK_ST(put_text(out, 1000, "late", 0, 0), STP_BELOW_VISIBILITY);
    /* A message names the visibility. */
    CHECK(strstr(stp_last_error(), "visibility") != NULL);
done:
    stp_channel_in_free(in);
    stp_channel_out_free(out);
    stp_channel_out_free(cout);
    stp_task_free(child);
    stp_task_free(bad);
    stp_task_free(c);
    stp_task_free(p);
    stp_channel_free(ch);
    stp_runtime_free(rt);
}

static void test_task_free_detaches(void) {
    stp_runtime *rt = NULL;
    stp_channel *ch = NULL;
    stp_task *p = NULL, *c = NULL;
    stp_channel_out *out = NULL;
    stp_channel_in *in = NULL;
    CHECK_OK(stp_runtime_new(&rt));
    CHECK_OK(stp_channel_new(rt, NULL, 0, 0, &ch));
    CHECK_OK(stp_task_new(rt, 0, NULL, &p));
    CHECK_OK(stp_task_new(rt, STP_INFINITY, NULL, &c));
    CHECK_OK(stp_channel_attach_output(p, ch, &out));
    CHECK_OK(stp_channel_attach_input(c, ch, &in));
    PUT(out, 0, "0");
    /* Ending the tasks detaches their connections (which stay valid handles). */
    stp_task_free(c);
    c = NULL;
    stp_task_free(p);
    p = NULL;
    GET_FAILS(in, STP_OLDEST, 0, 0, STP_DETACHED);
    CHECK_ST(stp_channel_consume(in, 0), STP_DETACHED);
    CHECK_ST(put_text(out, 1, "1", 0, 0), STP_DETACHED);
done:
    stp_channel_in_free(in);
    stp_channel_out_free(out);
    stp_task_free(c);
    stp_task_free(p);
    stp_channel_free(ch);
    stp_runtime_free(rt);
}

static void test_channel_closed(void) {
    chan_fix f;
    pthread_t th;
    bool running = false;
    getter g;
    double t0, el;
    stp_channel_in *idle = NULL;
    memset(&g, 0, sizeof g);
    CHAN_SETUP(f, 0);
    CHECK_OK(stp_channel_attach_input(f.cons, f.ch, &idle));
    PUT(f.out, 1, "1");
    PUT(f.out, 2, "2");
    /* A getter parked on the channel is woken by the close. */
    g.in = idle;
    g.sel = STP_EXACT;
    g.ts = 9;
    g.timeout_ms = LONG_MS;
    CHECK(pthread_create(&th, NULL, getter_main, &g) == 0);
    running = true;
    wait_started(&g.started);
    sleep_ms(20);
    CHECK_OK(stp_channel_close(f.ch));
    CHECK_MSG(join_within(th, LONG_MS), "close did not wake the blocked get");
    running = false;
    CHECK_MSG(g.st == STP_CLOSED, "get -> %s: %s", stp_status_name((int32_t)g.st), g.error);
    CHECK_MSG(g.elapsed_ms < LONG_MS / 2, "the get returned after %.0f ms", g.elapsed_ms);
    /* Puts fail. */
    CHECK_ST(put_text(f.out, 3, "3", 0, 0), STP_CLOSED);
    CHECK_ST(put_text(f.out, 4, "4", 0, LONG_MS), STP_CLOSED);
    /* Gets drain what is left, then report the close without waiting. */
    GET(f.in, STP_NEXT_UNSEEN, 0, LONG_MS, 1, "1");
    GET(f.in, STP_NEXT_UNSEEN, 0, LONG_MS, 2, "2");
    t0 = now_ms();
    GET_FAILS(f.in, STP_NEXT_UNSEEN, 0, LONG_MS, STP_CLOSED);
    el = now_ms() - t0;
    CHECK_MSG(el < 1000.0, "a get on a closed channel took %.2f ms", el);
    GET_FAILS(f.in, STP_EXACT, 9, 0, STP_CLOSED);
    GET(f.in, STP_EXACT, 1, 0, 1, "1");
    CHECK_OK(stp_channel_close(f.ch)); /* twice is harmless */
done:
    if (running) {
        if (join_within(th, LONG_MS)) running = false;
    }
    stp_item_free(g.item);
    stp_channel_in_free(idle);
    if (!running) chan_teardown(&f);
}

typedef struct {
    const stp_runtime *rt;
    int delay_ms;
    stp_status st;
    stp_channel *ch;
} creator;

static void *creator_main(void *p) {
    creator *c = p;
    sleep_ms(c->delay_ms);
    c->st = stp_channel_new(c->rt, "late/arrival", 0, 0, &c->ch);
    return NULL;
}

static void test_channel_named_lookup(void) {
    stp_runtime *rt = NULL;
    stp_channel *ch = NULL, *found = NULL, *again = NULL, *late = NULL, *dup = NULL;
    stp_queue *q = NULL, *qdup = NULL;
    stp_register *rdup = NULL;
    stp_task *t = NULL;
    stp_channel_out *out = NULL;
    stp_channel_in *in = NULL;
    pthread_t th;
    bool running = false;
    creator cr = {0};
    double t0, el;
    CHECK_OK(stp_runtime_new(&rt));
    CHECK_OK(stp_channel_new(rt, "video/frames", 3, 0, &ch));
    CHECK_OK(stp_channel_lookup(rt, "video/frames", 0, &found));
    CHECK(found != NULL);
    CHECK_OK(stp_runtime_wait_for(rt, "video/frames", 0));
    /* The looked-up handle is the same channel. */
    CHECK_OK(stp_task_new(rt, 0, NULL, &t));
    CHECK_OK(stp_channel_attach_output(t, found, &out));
    CHECK_OK(stp_channel_attach_input(t, ch, &in));
    PUT(out, 1, "via the looked-up handle");
    GET(in, STP_EXACT, 1, 0, 1, "via the looked-up handle");
    /* The capacity carries over: 3 items fill it. */
    PUT(out, 2, "2");
    PUT(out, 3, "3");
    CHECK_ST(put_text(out, 4, "4", 0, 0), STP_FULL);
    /* Names are unique across container kinds. */
    CHECK_ST(stp_channel_new(rt, "video/frames", 0, 0, &dup), STP_NAME_TAKEN);
    CHECK(strstr(stp_last_error(), "video/frames") != NULL);
    CHECK_ST(stp_queue_new(rt, "video/frames", 0, 0, &qdup), STP_NAME_TAKEN);
    CHECK_ST(stp_register_new(rt, "video/frames", 0, 0, &rdup), STP_NAME_TAKEN);
    CHECK(dup == NULL && qdup == NULL && rdup == NULL);
    CHECK_OK(stp_queue_new(rt, "jobs", 0, 0, &q));
    CHECK_ST(stp_channel_new(rt, "jobs", 0, 0, &dup), STP_NAME_TAKEN);
    /* A missing name: STP_NOT_FOUND after the timeout. */
    t0 = now_ms();
    CHECK_ST(stp_channel_lookup(rt, "nothing", 30, &again), STP_NOT_FOUND);
    el = now_ms() - t0;
    CHECK(again == NULL);
    CHECK_MSG(el >= 30.0 && el < 3000.0, "the lookup gave up after %.2f ms, timeout 30", el);
    CHECK_ST(stp_channel_lookup(rt, "nothing", 0, &again), STP_NOT_FOUND);
    CHECK_ST(stp_runtime_wait_for(rt, "nothing", 20), STP_NOT_FOUND);
    /* A lookup waits for a name registered later by another thread. */
    cr.rt = rt;
    cr.delay_ms = 50;
    CHECK(pthread_create(&th, NULL, creator_main, &cr) == 0);
    running = true;
    t0 = now_ms();
    CHECK_OK(stp_channel_lookup(rt, "late/arrival", LONG_MS, &late));
    el = now_ms() - t0;
    CHECK_MSG(el >= 40.0, "the lookup returned after %.2f ms, before the name existed", el);
    CHECK(join_within(th, LONG_MS));
    running = false;
    CHECK_OK(cr.st);
done:
    if (running && join_within(th, LONG_MS)) running = false;
    stp_channel_in_free(in);
    stp_channel_out_free(out);
    stp_task_free(t);
    stp_channel_free(cr.ch);
    stp_channel_free(late);
    stp_channel_free(again);
    stp_channel_free(dup);
    stp_queue_free(qdup);
    stp_register_free(rdup);
    stp_queue_free(q);
    stp_channel_free(found);
    stp_channel_free(ch);
    if (!running) stp_runtime_free(rt);
}

/* The header documents STP_WRONG_KIND for "the name belongs to a container of another kind";
 * on the embedded runtime a lookup of the wrong kind should say so at once rather than wait
 * out its timeout and report STP_NOT_FOUND. */
static void test_lookup_wrong_kind_embedded(void) {
    stp_runtime *rt = NULL;
    stp_channel *ch = NULL;
    stp_queue *q = NULL;
    stp_register *r = NULL;
    double t0, el;
    CHECK_OK(stp_runtime_new(&rt));
    CHECK_OK(stp_channel_new(rt, "a-channel", 0, 0, &ch));
    t0 = now_ms();
    CHECK_ST(stp_queue_lookup(rt, "a-channel", 300, &q), STP_WRONG_KIND);
    el = now_ms() - t0;
    CHECK_MSG(el < 250.0, "the lookup of the wrong kind took %.0f ms", el);
    CHECK_ST(stp_register_lookup(rt, "a-channel", 0, &r), STP_WRONG_KIND);
done:
    stp_queue_free(q);
    stp_register_free(r);
    stp_channel_free(ch);
    stp_runtime_free(rt);
}

/* ------------------------------------------------------------------------------------------ */
/* Queues                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* Containers of an embedded runtime, made or found by name, live here. */
static void test_containers_are_local(void) {
    stp_runtime *rt = NULL;
    stp_channel *ch = NULL, *found = NULL;
    stp_queue *q = NULL;
    stp_register *reg = NULL;
    CHECK_OK(stp_runtime_new(&rt));
    CHECK_OK(stp_channel_new(rt, "local/ch", 0, 0, &ch));
    CHECK_OK(stp_queue_new(rt, NULL, 0, 0, &q));
    CHECK_OK(stp_register_new(rt, NULL, 0, 0, &reg));
    CHECK_OK(stp_channel_lookup(rt, "local/ch", 1000, &found));
    CHECK(stp_channel_is_local(ch));
    CHECK(stp_channel_is_local(found));
    CHECK(stp_queue_is_local(q));
    CHECK(stp_register_is_local(reg));
    CHECK(!stp_channel_is_local(NULL));
    CHECK(!stp_queue_is_local(NULL));
    CHECK(!stp_register_is_local(NULL));
done:
    stp_register_free(reg);
    stp_queue_free(q);
    stp_channel_free(found);
    stp_channel_free(ch);
    stp_runtime_free(rt);
}

static void test_queue_fifo_tickets(void) {
    stp_runtime *rt = NULL;
    stp_queue *q = NULL;
    stp_task *p = NULL, *w = NULL, *w2 = NULL;
    stp_queue_out *out = NULL;
    stp_queue_in *in = NULL, *other = NULL;
    stp_item *it = NULL;
    static const int64_t ts_of[] = {5, 3, 9, 3, 0};
    static const char *val_of[] = {"a", "b", "c", "d", "e"};
    uint64_t tickets[5] = {0};
    int64_t ts = 0;
    uint64_t ticket = 0, held = 0, waiting = 0;
    double t0, el;
    CHECK_OK(stp_runtime_new(&rt));
    CHECK_OK(stp_queue_new(rt, NULL, 0, 0, &q));
    CHECK_OK(stp_task_new(rt, 0, NULL, &p));
    CHECK_OK(stp_task_new(rt, STP_INFINITY, NULL, &w));
    CHECK_OK(stp_task_new(rt, STP_INFINITY, NULL, &w2));
    CHECK_OK(stp_queue_attach_output(p, q, &out));
    CHECK_OK(stp_queue_attach_input(w, q, &in));
    CHECK_OK(stp_queue_attach_input(w2, q, &other));
    for (int i = 0; i < 5; i++) {
        it = text_item(val_of[i]);
        CHECK(it != NULL);
        CHECK_OK(stp_queue_put(out, ts_of[i], it, 0, &tickets[i]));
        stp_item_free(it);
        it = NULL;
        for (int j = 0; j < i; j++) CHECK_MSG(tickets[j] != tickets[i], "ticket %d reused", i);
    }
    /* FIFO regardless of timestamp; the tickets are those the puts returned. */
    for (int i = 0; i < 5; i++) {
        CHECK_OK(stp_queue_get(in, 0, &ts, &ticket, &it));
        CHECK_EQ_I64(ts, ts_of[i]);
        CHECK_EQ_U64(ticket, tickets[i]);
        CHECK_MSG(is_text(it, val_of[i]), "item %d is not \"%s\"", i, val_of[i]);
        stp_item_free(it);
        it = NULL;
        /* Held by `in`: nobody else may consume it. */
        CHECK_ST(stp_queue_consume(other, ticket), STP_UNKNOWN_TICKET);
        CHECK_OK(stp_queue_consume(in, ticket));
        /* Twice: refused. */
        CHECK_ST(stp_queue_consume(in, ticket), STP_UNKNOWN_TICKET);
    }
    CHECK_ST(stp_queue_get(in, 0, &ts, &ticket, &it), STP_UNAVAILABLE);
    CHECK(it == NULL);
    CHECK_ST(stp_queue_consume(in, 999999), STP_UNKNOWN_TICKET);
    CHECK(strstr(stp_last_error(), "999999") != NULL);
    /* Not gotten by anybody yet: unknown too. */
    it = text_item("held");
    CHECK(it != NULL);
    CHECK_OK(stp_queue_put(out, 1, it, 0, &held));
    CHECK_OK(stp_queue_put(out, 2, it, 0, &waiting));
    stp_item_free(it);
    it = NULL;
    CHECK_OK(stp_queue_get(in, LONG_MS, &ts, &ticket, &it));
    CHECK_EQ_U64(ticket, held);
    stp_item_free(it);
    it = NULL;
    CHECK_ST(stp_queue_consume(in, waiting), STP_UNKNOWN_TICKET);
    /* Each item goes to one getter: the other connection gets the second. */
    CHECK_OK(stp_queue_get(other, 0, &ts, &ticket, &it));
    CHECK_EQ_U64(ticket, waiting);
    CHECK_EQ_I64(ts, 2);
    stp_item_free(it);
    it = NULL;
    CHECK_ST(stp_queue_get(in, 0, &ts, &ticket, &it), STP_UNAVAILABLE);
    CHECK_OK(stp_queue_consume(other, waiting));
    CHECK_OK(stp_queue_consume(in, held));
    /* A timed get on an empty queue. */
    t0 = now_ms();
    CHECK_ST(stp_queue_get(in, 30, &ts, &ticket, &it), STP_TIMEOUT);
    el = now_ms() - t0;
    CHECK_MSG(el >= 30.0 && el < 3000.0, "the get gave up after %.2f ms, timeout 30", el);
    /* Closing fails puts and gets. */
    CHECK_OK(stp_queue_close(q));
    it = text_item("late");
    CHECK(it != NULL);
    CHECK_ST(stp_queue_put(out, 3, it, 0, NULL), STP_CLOSED);
    stp_item_free(it);
    it = NULL;
    CHECK_ST(stp_queue_get(in, LONG_MS, &ts, &ticket, &it), STP_CLOSED);
done:
    stp_item_free(it);
    stp_queue_in_free(in);
    stp_queue_in_free(other);
    stp_queue_out_free(out);
    stp_task_free(w2);
    stp_task_free(w);
    stp_task_free(p);
    stp_queue_free(q);
    stp_runtime_free(rt);
}

static void test_queue_full(void) {
    stp_runtime *rt = NULL;
    stp_queue *q = NULL;
    stp_task *p = NULL, *w = NULL;
    stp_queue_out *out = NULL;
    stp_queue_in *in = NULL;
    stp_item *it = NULL, *got = NULL;
    int64_t ts;
    uint64_t ticket;
    double t0, el;
    CHECK_OK(stp_runtime_new(&rt));
    CHECK_OK(stp_queue_new(rt, NULL, 2, 0, &q));
    CHECK_OK(stp_task_new(rt, 0, NULL, &p));
    CHECK_OK(stp_task_new(rt, STP_INFINITY, NULL, &w));
    CHECK_OK(stp_queue_attach_output(p, q, &out));
    CHECK_OK(stp_queue_attach_input(w, q, &in));
    it = text_item("x");
    CHECK(it != NULL);
    CHECK_OK(stp_queue_put(out, 0, it, 0, NULL));
    CHECK_OK(stp_queue_put(out, 0, it, 0, NULL));
    CHECK_ST(stp_queue_put(out, 0, it, 0, NULL), STP_FULL);
    t0 = now_ms();
    CHECK_ST(stp_queue_put(out, 0, it, 40, NULL), STP_FULL);
    el = now_ms() - t0;
    CHECK_MSG(el >= 40.0 && el < 3000.0, "the put gave up after %.2f ms, timeout 40", el);
    /* A get moves an item from waiting to held, which makes room. */
    CHECK_OK(stp_queue_get(in, 0, &ts, &ticket, &got));
    CHECK_OK(stp_queue_put(out, 0, it, 0, NULL));
    CHECK_OK(stp_queue_consume(in, ticket));
done:
    stp_item_free(it);
    stp_item_free(got);
    stp_queue_in_free(in);
    stp_queue_out_free(out);
    stp_task_free(w);
    stp_task_free(p);
    stp_queue_free(q);
    stp_runtime_free(rt);
}

/* A put blocked on a full queue gives up when its stop flag is set, storing nothing. */
static void test_queue_put_interruptible(void) {
    stp_runtime *rt = NULL;
    stp_queue *q = NULL;
    stp_task *p = NULL, *w = NULL;
    stp_queue_out *out = NULL;
    stp_queue_in *in = NULL;
    stp_item *it = NULL, *got = NULL, *none = NULL;
    stp_queue_stats qs;
    pthread_t th;
    bool running = false;
    stopper s;
    int32_t stop = 0;
    int64_t ts;
    uint64_t first = 0, ticket = 77777, t2 = 0;
    double t0, el;
    CHECK_OK(stp_runtime_new(&rt));
    CHECK_OK(stp_queue_new(rt, NULL, 1, 0, &q));
    CHECK_OK(stp_task_new(rt, 0, NULL, &p));
    CHECK_OK(stp_task_new(rt, STP_INFINITY, NULL, &w));
    CHECK_OK(stp_queue_attach_output(p, q, &out));
    CHECK_OK(stp_queue_attach_input(w, q, &in));
    it = text_item("x");
    CHECK(it != NULL);
    CHECK_OK(stp_queue_put_interruptible(out, 0, it, 0, &stop, &first));
    CHECK_ST(stp_queue_put_interruptible(out, 1, it, 0, NULL, &ticket), STP_FULL);
    CHECK(start_stopper(&th, &s, &stop, 100));
    running = true;
    t0 = now_ms();
    CHECK_ST(stp_queue_put_interruptible(out, 1, it, STP_FOREVER, &stop, &ticket),
             STP_INTERRUPTED);
    el = now_ms() - t0;
    CHECK_MSG(el >= 80.0 && el < 100.0 + 3000, "the put gave up after %.2f ms, flag set at 100",
              el);
    pthread_join(th, NULL);
    running = false;
    CHECK_EQ_U64(ticket, 77777); /* untouched */
    CHECK_OK(stp_queue_get_stats(q, &qs));
    CHECK_EQ_U64(qs.waiting, 1);
    CHECK_EQ_U64(qs.puts, 1);
    /* Only the first item is there. */
    CHECK_OK(stp_queue_get(in, 0, &ts, &ticket, &got));
    CHECK_EQ_I64(ts, 0);
    CHECK_EQ_U64(ticket, first);
    CHECK_ST(stp_queue_get(in, 0, &ts, &t2, &none), STP_UNAVAILABLE);
    /* The get made room: with the flag cleared the same call puts (out_ticket may be NULL). */
    stop = 0;
    CHECK_OK(stp_queue_put_interruptible(out, 1, it, LONG_MS, &stop, NULL));
    CHECK_OK(stp_queue_consume(in, ticket));
done:
    if (running) pthread_join(th, NULL);
    stp_item_free(it);
    stp_item_free(got);
    stp_item_free(none);
    stp_queue_in_free(in);
    stp_queue_out_free(out);
    stp_task_free(w);
    stp_task_free(p);
    stp_queue_free(q);
    stp_runtime_free(rt);
}

#define QP 3   /* producers */
#define QC 3   /* consumers */
#define QN 300 /* items per producer */

typedef struct {
    int32_t producer, seq;
} job;

typedef struct queue_shared queue_shared;

typedef struct {
    queue_shared *s;
    int id;
    stp_queue_out *out;
    stp_queue_in *in;
    int got;
} queue_worker;

struct queue_shared {
    uint64_t put_ticket[QP * QN];
    uint64_t got_ticket[QP * QN];
    atomic_int seen[QP * QN];
    atomic_int taken;
    atomic_int stop; /* set when the test fails before the producers run */
    double deadline;
};

static void *queue_producer(void *p) {
    queue_worker *w = p;
    stp_item *it = NULL;
    for (int32_t seq = 0; seq < QN; seq++) {
        job j = {w->id, seq};
        it = bytes_item(&j, sizeof j);
        CHECK(it != NULL);
        CHECK_OK(stp_queue_put(w->out, seq, it, LONG_MS, &w->s->put_ticket[w->id * QN + seq]));
        stp_item_free(it);
        it = NULL;
    }
done:
    stp_item_free(it);
    return NULL;
}

static void *queue_consumer(void *p) {
    queue_worker *w = p;
    queue_shared *s = w->s;
    stp_item *it = NULL;
    int32_t last[QP];
    for (int i = 0; i < QP; i++) last[i] = -1;
    while (atomic_load(&s->taken) < QP * QN && !atomic_load(&s->stop)) {
        int64_t ts = -1;
        uint64_t ticket = 0;
        size_t len = 0;
        job j;
        CHECK_MSG(now_ms() < s->deadline, "consumer %d: out of time after %d items", w->id,
                  w->got);
        stp_status st = stp_queue_get(w->in, 20, &ts, &ticket, &it);
        if (st == STP_TIMEOUT) continue;
        CHECK_OK(st);
        const void *d = stp_item_data(it, &len);
        CHECK(stp_item_kind_of(it) == STP_ITEM_BYTES);
        CHECK_EQ_U64(len, sizeof j);
        memcpy(&j, d, sizeof j);
        CHECK(j.producer >= 0 && j.producer < QP && j.seq >= 0 && j.seq < QN);
        CHECK_EQ_I64(ts, j.seq);
        /* FIFO: one producer's items reach each consumer in order. */
        CHECK_MSG(j.seq > last[j.producer], "consumer %d got %d/%d after %d", w->id,
                  j.producer, j.seq, last[j.producer]);
        last[j.producer] = j.seq;
        s->got_ticket[j.producer * QN + j.seq] = ticket;
        atomic_fetch_add(&s->seen[j.producer * QN + j.seq], 1);
        CHECK_OK(stp_queue_consume(w->in, ticket));
        stp_item_free(it);
        it = NULL;
        w->got++;
        atomic_fetch_add(&s->taken, 1);
    }
done:
    stp_item_free(it);
    return NULL;
}

static void test_queue_producers_consumers(void) {
    stp_runtime *rt = NULL;
    stp_queue *q = NULL;
    stp_task *tasks[QP + QC] = {0};
    queue_worker prod[QP], cons[QC];
    pthread_t threads[QP + QC];
    int started = 0;
    queue_shared *s = calloc(1, sizeof *s);
    stp_queue_in *probe = NULL;
    stp_item *it = NULL;
    int64_t ts;
    uint64_t ticket;
    memset(prod, 0, sizeof prod);
    memset(cons, 0, sizeof cons);
    CHECK(s != NULL);
    s->deadline = now_ms() + 30000;
    CHECK_OK(stp_runtime_new(&rt));
    CHECK_OK(stp_queue_new(rt, "work", 16, 0, &q));
    for (int i = 0; i < QP; i++) {
        CHECK_OK(stp_task_new(rt, 0, "producer", &tasks[i]));
        prod[i].s = s;
        prod[i].id = i;
        CHECK_OK(stp_queue_attach_output(tasks[i], q, &prod[i].out));
    }
    for (int i = 0; i < QC; i++) {
        CHECK_OK(stp_task_new(rt, STP_INFINITY, "consumer", &tasks[QP + i]));
        cons[i].s = s;
        cons[i].id = i;
        CHECK_OK(stp_queue_attach_input(tasks[QP + i], q, &cons[i].in));
    }
    for (int i = 0; i < QC; i++) {
        CHECK(pthread_create(&threads[started], NULL, queue_consumer, &cons[i]) == 0);
        started++;
    }
    for (int i = 0; i < QP; i++) {
        CHECK(pthread_create(&threads[started], NULL, queue_producer, &prod[i]) == 0);
        started++;
    }
done:
    if (s != NULL && atomic_load(&g_failed_now)) atomic_store(&s->stop, 1);
    for (int i = 0; i < started; i++) {
        if (!join_within(threads[i], 40000)) {
            fail_at(__FILE__, __LINE__, "a worker thread did not finish; closing the queue");
            stp_queue_close(q);
            if (!join_within(threads[i], LONG_MS)) {
                fail_at(__FILE__, __LINE__, "a worker thread is stuck; leaking the runtime");
                return;
            }
        }
    }
    if (s != NULL && !atomic_load(&g_failed_now)) {
        int total = 0;
        for (int i = 0; i < QP * QN; i++) {
            int n = atomic_load(&s->seen[i]);
            if (n != 1) {
                fail_at(__FILE__, __LINE__, "item %d/%d taken %d times", i / QN, i % QN, n);
                break;
            }
            if (s->got_ticket[i] != s->put_ticket[i]) {
                fail_at(__FILE__, __LINE__, "item %d/%d: ticket %llu at the get, %llu at the put",
                        i / QN, i % QN, (unsigned long long)s->got_ticket[i],
                        (unsigned long long)s->put_ticket[i]);
                break;
            }
        }
        for (int i = 0; i < QP * QN && !atomic_load(&g_failed_now); i++) {
            for (int j = 0; j < i; j++) {
                if (s->put_ticket[j] == s->put_ticket[i]) {
                    fail_at(__FILE__, __LINE__, "tickets of items %d and %d are equal", j, i);
                    break;
                }
            }
        }
        for (int i = 0; i < QC; i++) total += cons[i].got;
        if (total != QP * QN) fail_at(__FILE__, __LINE__, "%d items taken, %d put", total, QP * QN);
        /* Nothing left. */
        if (stp_queue_attach_input(tasks[QP], q, &probe) != STP_OK ||
            stp_queue_get(probe, 0, &ts, &ticket, &it) != STP_UNAVAILABLE)
            fail_at(__FILE__, __LINE__, "the queue is not empty after the run: %s",
                    stp_last_error());
    }
    stp_item_free(it);
    stp_queue_in_free(probe);
    for (int i = 0; i < QP; i++) stp_queue_out_free(prod[i].out);
    for (int i = 0; i < QC; i++) stp_queue_in_free(cons[i].in);
    for (int i = 0; i < QP + QC; i++) stp_task_free(tasks[i]);
    stp_queue_free(q);
    stp_runtime_free(rt);
    free(s);
}

/* Items sharing one timestamp keep FIFO order and get distinct tickets. */
static void test_queue_tickets_unique(void) {
    stp_runtime *rt = NULL;
    stp_queue *q = NULL;
    stp_task *t = NULL;
    stp_queue_out *out = NULL;
    stp_queue_in *in = NULL;
    stp_item *it = NULL, *got = NULL;
    enum { N = 200 };
    uint64_t tk[N];
    CHECK_OK(stp_runtime_new(&rt));
    CHECK_OK(stp_queue_new(rt, NULL, 0, 0, &q));
    CHECK_OK(stp_task_new(rt, 0, NULL, &t));
    CHECK_OK(stp_queue_attach_output(t, q, &out));
    CHECK_OK(stp_queue_attach_input(t, q, &in));
    it = text_item("same timestamp");
    CHECK(it != NULL);
    for (int i = 0; i < N; i++) CHECK_OK(stp_queue_put(out, 7, it, 0, &tk[i]));
    for (int i = 0; i < N; i++)
        for (int j = 0; j < i; j++) CHECK_MSG(tk[i] != tk[j], "tickets %d and %d equal", i, j);
    for (int i = 0; i < N; i++) {
        int64_t ts;
        uint64_t ticket;
        CHECK_OK(stp_queue_get(in, 0, &ts, &ticket, &got));
        CHECK_EQ_I64(ts, 7);
        CHECK_EQ_U64(ticket, tk[i]);
        stp_item_free(got);
        got = NULL;
        CHECK_OK(stp_queue_consume(in, ticket));
    }
done:
    stp_item_free(it);
    stp_item_free(got);
    stp_queue_in_free(in);
    stp_queue_out_free(out);
    stp_task_free(t);
    stp_queue_free(q);
    stp_runtime_free(rt);
}

/* ------------------------------------------------------------------------------------------ */
/* Registers                                                                                  */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    const stp_register_in *in;
    int64_t timeout_ms;
    stp_status st;
    uint64_t seq;
    stp_item *item;
    char error[512];
    atomic_int started, finished;
} reader;

static void *reader_main(void *p) {
    reader *r = p;
    atomic_store(&r->started, 1);
    r->st = stp_register_read(r->in, r->timeout_ms, &r->seq, &r->item);
    snprintf(r->error, sizeof r->error, "%s", r->st == STP_OK ? "" : stp_last_error());
    atomic_store(&r->finished, 1);
    return NULL;
}

static bool write_text(const stp_register_out *out, const char *s, uint64_t *seq) {
    stp_item *it = text_item(s);
    bool ok = it != NULL && stp_register_write(out, it, seq) == STP_OK;
    stp_item_free(it);
    return ok;
}

static void test_register_sequence(void) {
    stp_runtime *rt = NULL;
    stp_register *reg = NULL;
    stp_task *t = NULL;
    stp_register_out *w = NULL;
    stp_register_in *r = NULL, *r2 = NULL;
    stp_item *it = NULL;
    uint64_t seq = 0;
    pthread_t th;
    bool running = false;
    reader rd;
    double t0, el;
    memset(&rd, 0, sizeof rd);
    CHECK_OK(stp_runtime_new(&rt));
    CHECK_OK(stp_register_new(rt, "mode", 0, 0, &reg));
    CHECK_OK(stp_task_new(rt, 0, NULL, &t));
    CHECK_OK(stp_register_attach_output(t, reg, &w));
    CHECK_OK(stp_register_attach_input(t, reg, &r));
    CHECK_OK(stp_register_attach_input(t, reg, &r2));
    /* An empty register is not readable. */
    CHECK_ST(stp_register_read(r, 0, &seq, &it), STP_UNAVAILABLE);
    t0 = now_ms();
    CHECK_ST(stp_register_read(r, 40, &seq, &it), STP_TIMEOUT);
    el = now_ms() - t0;
    CHECK_MSG(el >= 40.0 && el < 3000.0, "the read gave up after %.2f ms, timeout 40", el);
    CHECK(it == NULL);
    /* Writes overwrite; sequence numbers count from 1. */
    CHECK(write_text(w, "a", &seq));
    CHECK_EQ_U64(seq, 1);
    CHECK(write_text(w, "b", &seq));
    CHECK_EQ_U64(seq, 2);
    CHECK(write_text(w, "c", &seq));
    CHECK_EQ_U64(seq, 3);
    seq = 0;
    CHECK_OK(stp_register_read(r, LONG_MS, &seq, &it));
    CHECK_EQ_U64(seq, 3);
    CHECK(is_text(it, "c"));
    stp_item_free(it);
    it = NULL;
    /* Nothing newer than the last read on this connection. */
    CHECK_ST(stp_register_read(r, 0, &seq, &it), STP_UNAVAILABLE);
    t0 = now_ms();
    CHECK_ST(stp_register_read(r, 30, &seq, &it), STP_TIMEOUT);
    el = now_ms() - t0;
    CHECK_MSG(el >= 30.0, "the read gave up after %.2f ms, timeout 30", el);
    /* The last read is per connection. */
    CHECK_OK(stp_register_read(r2, 0, &seq, &it));
    CHECK_EQ_U64(seq, 3);
    stp_item_free(it);
    it = NULL;
    /* A read blocks until a newer write. */
    rd.in = r;
    rd.timeout_ms = LONG_MS;
    CHECK(pthread_create(&th, NULL, reader_main, &rd) == 0);
    running = true;
    wait_started(&rd.started);
    sleep_ms(50);
    CHECK_MSG(!atomic_load(&rd.finished), "the read returned %s without a new write",
              stp_status_name((int32_t)rd.st));
    CHECK(write_text(w, "new", &seq));
    CHECK_EQ_U64(seq, 4);
    CHECK_MSG(join_within(th, LONG_MS), "the read stayed blocked after the write");
    running = false;
    CHECK_MSG(rd.st == STP_OK, "read -> %s: %s", stp_status_name((int32_t)rd.st), rd.error);
    CHECK_EQ_U64(rd.seq, 4);
    CHECK(is_text(rd.item, "new"));
    /* A reader that missed writes sees only the latest. */
    CHECK(write_text(w, "x", &seq));
    CHECK(write_text(w, "y", &seq));
    CHECK_OK(stp_register_read(r2, 0, &seq, &it));
    CHECK_EQ_U64(seq, 6);
    CHECK(is_text(it, "y"));
done:
    if (running) {
        stp_register_close(reg);
        if (join_within(th, LONG_MS)) running = false;
    }
    stp_item_free(rd.item);
    stp_item_free(it);
    if (running) return;
    stp_register_in_free(r);
    stp_register_in_free(r2);
    stp_register_out_free(w);
    stp_task_free(t);
    stp_register_free(reg);
    stp_runtime_free(rt);
}

/* ------------------------------------------------------------------------------------------ */
/* Items                                                                                      */
/* ------------------------------------------------------------------------------------------ */

/* Puts `it` at `ts` and gets it back through the channel. */
static stp_item *round_trip(chan_fix *f, int64_t ts, const stp_item *it) {
    stp_item *got = NULL;
    int64_t got_ts = -1;
    if (stp_channel_put(f->out, ts, it, 0, 0) != STP_OK) return NULL;
    if (stp_channel_get(f->in, STP_EXACT, ts, 0, &got_ts, &got) != STP_OK) return NULL;
    if (got_ts != ts) {
        stp_item_free(got);
        return NULL;
    }
    return got;
}

static void test_items_bytes_text(void) {
    chan_fix f;
    stp_item *b = NULL, *b2 = NULL, *e = NULL, *t = NULL, *t2 = NULL, *c = NULL, *got = NULL;
    static const unsigned char raw[] = {0, 1, 2, 0xff, 0, 'x', 0x80, 0};
    const char *utf8 = "h\xc3\xa9llo w\xc3\xb6rld \xe2\x82\xac";
    size_t len = 99;
    const void *d;
    CHAN_SETUP(f, 0);
    /* Bytes with embedded zeros: copied in, returned whole. */
    CHECK_OK(stp_item_bytes(raw, sizeof raw, &b));
    CHECK(stp_item_kind_of(b) == STP_ITEM_BYTES);
    d = stp_item_data(b, &len);
    CHECK_EQ_U64(len, sizeof raw);
    CHECK(d != NULL && memcmp(d, raw, sizeof raw) == 0);
    CHECK(d != (const void *)raw); /* a copy */
    CHECK(stp_item_data(b, NULL) == d);
    got = round_trip(&f, 1, b);
    CHECK_MSG(got != NULL, "round trip failed: %s", stp_last_error());
    CHECK(stp_item_kind_of(got) == STP_ITEM_BYTES);
    d = stp_item_data(got, &len);
    CHECK_EQ_U64(len, sizeof raw);
    CHECK(memcmp(d, raw, sizeof raw) == 0);
    CHECK_EQ_U64(stp_item_tag(got), stp_item_tag(b));
    stp_item_free(got);
    got = NULL;
    /* Empty bytes, from NULL. */
    CHECK_OK(stp_item_bytes(NULL, 0, &e));
    CHECK(stp_item_kind_of(e) == STP_ITEM_BYTES);
    len = 99;
    stp_item_data(e, &len);
    CHECK_EQ_U64(len, 0);
    got = round_trip(&f, 2, e);
    CHECK(got != NULL);
    len = 99;
    stp_item_data(got, &len);
    CHECK_EQ_U64(len, 0);
    stp_item_free(got);
    got = NULL;
    /* UTF-8 text: the bytes without a NUL. */
    CHECK_OK(stp_item_text(utf8, &t));
    CHECK(stp_item_kind_of(t) == STP_ITEM_TEXT);
    CHECK(is_text(t, utf8));
    got = round_trip(&f, 3, t);
    CHECK(got != NULL);
    CHECK(is_text(got, utf8));
    stp_item_free(got);
    got = NULL;
    CHECK_OK(stp_item_text("", &t2));
    CHECK(is_text(t2, ""));
    /* Tags: one per type, the same for every item of it. */
    CHECK_OK(stp_item_bytes("zz", 2, &b2));
    CHECK(stp_item_tag(b) != 0);
    CHECK_EQ_U64(stp_item_tag(b), stp_item_tag(b2));
    CHECK_EQ_U64(stp_item_tag(b), stp_item_tag(e));
    CHECK_EQ_U64(stp_item_tag(t), stp_item_tag(t2));
    CHECK(stp_item_tag(t) != stp_item_tag(b));
    /* A clone is another handle to the same immutable item, valid after the original goes. */
    c = stp_item_clone(t);
    CHECK(c != NULL && c != t);
    CHECK(stp_item_kind_of(c) == STP_ITEM_TEXT);
    CHECK_EQ_U64(stp_item_tag(c), stp_item_tag(t));
    CHECK(stp_item_data(c, NULL) == stp_item_data(t, NULL)); /* shared, not copied */
    stp_item_free(t);
    t = NULL;
    CHECK(is_text(c, utf8));
    /* The put item stays owned by the caller and unchanged. */
    CHECK(stp_channel_put(f.out, 4, c, 0, 0) == STP_OK);
    CHECK(is_text(c, utf8));
done:
    stp_item_free(b);
    stp_item_free(b2);
    stp_item_free(e);
    stp_item_free(t);
    stp_item_free(t2);
    stp_item_free(c);
    stp_item_free(got);
    chan_teardown(&f);
}

typedef struct {
    int32_t dtype;
    size_t size;
    size_t ndim;
    size_t shape[4];
} array_case;

static void test_items_arrays(void) {
    chan_fix f;
    stp_item *a = NULL, *got = NULL, *first = NULL, *bad = NULL;
    static const array_case cases[] = {
        {STP_BOOL, 1, 1, {3}},
        {STP_U8, 1, 1, {4}},
        {STP_I8, 1, 2, {2, 2}},
        {STP_U16, 2, 1, {5}},
        {STP_I16, 2, 2, {2, 3}},
        {STP_U32, 4, 3, {2, 1, 2}},
        {STP_I32, 4, 3, {2, 2, 2}},
        {STP_U64, 8, 1, {3}},
        {STP_I64, 8, 2, {1, 4}},
        {STP_F16, 2, 2, {2, 2}},
        {STP_F32, 4, 2, {2, 3}},
        {STP_F64, 8, 4, {1, 2, 1, 3}},
        {STP_F64, 8, 0, {0}},    /* a scalar: no dimensions, one element */
        {STP_I32, 4, 2, {0, 3}}, /* empty */
    };
    unsigned char data[256];
    size_t ncases = sizeof cases / sizeof cases[0];
    CHAN_SETUP(f, 0);
    for (size_t i = 0; i < ncases; i++) {
        const array_case *c = &cases[i];
        size_t n = 1, len, got_len = 0, got_ndim = 99;
        const size_t *got_shape = NULL;
        stp_dtype dt = (stp_dtype)-1;
        for (size_t k = 0; k < c->ndim; k++) n *= c->shape[k];
        len = n * c->size;
        for (size_t k = 0; k < len; k++)
            data[k] = c->dtype == STP_BOOL ? (unsigned char)(k % 2) : (unsigned char)(k * 7 + i);
        CHECK_OK(stp_item_array(c->dtype, c->ndim, c->shape, data, len, &a));
        CHECK(stp_item_kind_of(a) == STP_ITEM_ARRAY);
        /* Accessors on the item as made, then on the one gotten back. */
        for (int pass = 0; pass < 2; pass++) {
            const stp_item *x = pass == 0 ? a : got;
            CHECK_OK(stp_item_dtype(x, &dt));
            CHECK_MSG((int32_t)dt == c->dtype, "case %zu: dtype %d, expected %d", i, (int)dt,
                      (int)c->dtype);
            CHECK_OK(stp_item_shape(x, &got_ndim, &got_shape));
            CHECK_MSG(got_ndim == c->ndim, "case %zu: ndim %zu, expected %zu", i, got_ndim,
                      c->ndim);
            for (size_t k = 0; k < c->ndim; k++)
                CHECK_MSG(got_shape[k] == c->shape[k], "case %zu: dim %zu is %zu, expected %zu",
                          i, k, got_shape[k], c->shape[k]);
            const void *d = stp_item_data(x, &got_len);
            CHECK_MSG(got_len == len, "case %zu: %zu data bytes, expected %zu", i, got_len, len);
            CHECK_MSG(len == 0 || memcmp(d, data, len) == 0, "case %zu: data differs", i);
            if (pass == 0) {
                got = round_trip(&f, (int64_t)i, a);
                CHECK_MSG(got != NULL, "case %zu: round trip failed: %s", i, stp_last_error());
                CHECK(stp_item_kind_of(got) == STP_ITEM_ARRAY);
            }
        }
        /* One tag for every array, whatever its dtype or shape. */
        if (first == NULL) {
            first = a;
            a = NULL;
        } else {
            CHECK_EQ_U64(stp_item_tag(a), stp_item_tag(first));
            stp_item_free(a);
            a = NULL;
        }
        stp_item_free(got);
        got = NULL;
    }
    /* A length that does not match the shape. */
    {
        size_t sh[2] = {2, 3};
        CHECK_INVALID(stp_item_array(STP_I32, 2, sh, data, 20, &bad), "array");
        CHECK_INVALID(stp_item_array(STP_I32, 2, sh, data, 28, &bad), "array");
        CHECK_INVALID(stp_item_array(STP_F64, 0, NULL, data, 4, &bad), "array");
        CHECK(bad == NULL);
        /* Unknown dtype codes. */
        CHECK_INVALID(stp_item_array(12, 2, sh, data, 6, &bad), "stp_dtype");
        CHECK_INVALID(stp_item_array(-1, 2, sh, data, 6, &bad), "stp_dtype");
        CHECK_INVALID(stp_item_array(256 + STP_U8, 2, sh, data, 6, &bad), "stp_dtype");
        CHECK(bad == NULL);
        /* Overflowing shapes fail cleanly. */
        size_t huge[2] = {SIZE_MAX / 2, 4};
        CHECK_INVALID(stp_item_array(STP_U8, 2, huge, data, 6, &bad), "array");
        CHECK(bad == NULL);
    }
done:
    stp_item_free(a);
    stp_item_free(got);
    stp_item_free(first);
    stp_item_free(bad);
    chan_teardown(&f);
}

static void test_items_array_accessors_wrong_type(void) {
    stp_item *b = NULL, *t = NULL;
    stp_dtype dt = STP_F64;
    size_t ndim = 42;
    const size_t *shape = (const size_t *)&ndim;
    CHECK_OK(stp_item_bytes("abc", 3, &b));
    CHECK_OK(stp_item_text("abc", &t));
    CHECK_ST(stp_item_dtype(b, &dt), STP_WRONG_TYPE);
    CHECK_ST(stp_item_shape(b, &ndim, &shape), STP_WRONG_TYPE);
    CHECK(strstr(stp_last_error(), "not an array") != NULL);
    CHECK_ST(stp_item_dtype(t, &dt), STP_WRONG_TYPE);
    CHECK_ST(stp_item_shape(t, &ndim, &shape), STP_WRONG_TYPE);
    CHECK(dt == STP_F64 && ndim == 42 && shape == (const size_t *)&ndim);
    /* Out-pointers of an array accessor. */
    {
        stp_item *a = NULL;
        uint8_t d[2] = {1, 2};
        size_t sh[1] = {2};
        CHECK_OK(stp_item_array(STP_U8, 1, sh, d, 2, &a));
        stp_status s1 = stp_item_dtype(a, NULL);
        stp_status s2 = stp_item_shape(a, NULL, &shape);
        stp_status s3 = stp_item_shape(a, &ndim, NULL);
        stp_item_free(a);
        CHECK_EQ_I64(s1, STP_INVALID_ARGUMENT);
        CHECK_EQ_I64(s2, STP_INVALID_ARGUMENT);
        CHECK_EQ_I64(s3, STP_INVALID_ARGUMENT);
    }
done:
    stp_item_free(b);
    stp_item_free(t);
}

/* ------------------------------------------------------------------------------------------ */
/* Pacing                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* ---- observing: counters, the watermark and what holds it ---- */

static bool has_hold(const stp_hold *h, size_t n, int64_t ts, stp_hold_cause cause) {
    for (size_t i = 0; i < n; i++)
        if (h[i].ts == ts && h[i].cause == cause) return true;
    return false;
}

static void test_observe_stats_and_explain(void) {
    chan_fix f;
    stp_item *it = NULL;
    stp_channel_stats cs;
    stp_gc_stats gs;
    stp_watermark w;
    stp_hold holds[8];
    stp_space_stats ss;
    char *text = NULL;
    char *metrics = NULL;
    int64_t ts = 0;
    CHAN_SETUP(f, 0);
    for (int64_t t = 1; t <= 3; t++) {
        it = text_item("x");
        CHECK(it != NULL);
        CHECK_OK(stp_channel_put(f.out, t, it, 0, 0));
        stp_item_free(it);
        it = NULL;
    }
    CHECK_OK(stp_channel_get(f.in, STP_OLDEST, 0, 0, &ts, &it));
    CHECK_EQ_I64(ts, 1);
    CHECK_OK(stp_channel_consume(f.in, 1));
    CHECK_OK(stp_task_set_virtual_time(f.prod, STP_INFINITY));
    CHECK_OK(stp_runtime_collect(f.rt));
    CHECK_OK(stp_channel_get_stats(f.ch, &cs));
    CHECK_EQ_U64(cs.puts, 3);
    CHECK_EQ_U64(cs.gets, 1);
    CHECK_EQ_U64(cs.items, 2);
    CHECK_EQ_U64(cs.reclaimed, 1);
    CHECK_EQ_U64(cs.connections, 1);
    CHECK_OK(stp_runtime_gc_stats(f.rt, 0, &gs));
    CHECK(gs.passes > 0);
    CHECK_EQ_U64(gs.reclaimed, 1);
    CHECK_EQ_I64(gs.floor, 2);
    /* Counting the terms first, then reading them with the report. */
    CHECK_OK(stp_runtime_explain(f.rt, 0, &w, NULL, 0, NULL));
    CHECK_EQ_I64(w.watermark, 2);
    CHECK_EQ_I64(w.floor, 2);
    CHECK(w.holds >= 1 && w.holds <= 8);
    CHECK_OK(stp_runtime_explain(f.rt, 0, &w, holds, 8, &text));
    CHECK(has_hold(holds, w.holds, 2, STP_HOLD_UNCONSUMED));
    CHECK_MSG(text != NULL && strstr(text, "consumer") != NULL, "report: %s", text);
    CHECK_INVALID(stp_runtime_explain(f.rt, 0, &w, NULL, 3, NULL), "holds");
    CHECK_INVALID(stp_runtime_explain(f.rt, 0, NULL, NULL, 0, NULL), "out");
    /* The same figures as metrics (OpenMetrics text). */
    CHECK_OK(stp_runtime_metrics(f.rt, &metrics));
    CHECK_MSG(metrics != NULL && strstr(metrics, "stampede_zone_watermark{zone=\"0\"} 2.0") != NULL,
              "metrics: %s", metrics);
    CHECK_MSG(strstr(metrics, "stampede_zone_reclaimed_total{zone=\"0\"} 1\n") != NULL,
              "metrics: %s", metrics);
    CHECK_INVALID(stp_runtime_metrics(f.rt, NULL), "text");
    /* An embedded runtime has no address-space counters. */
    CHECK_ST(stp_runtime_space_stats(f.rt, &ss), STP_UNSUPPORTED);
    CHECK_INVALID(stp_channel_get_stats(NULL, &cs), "NULL");
    CHECK_INVALID(stp_channel_get_stats(f.ch, NULL), "NULL");
    CHECK_INVALID(stp_runtime_gc_stats(NULL, 0, &gs), "NULL");
done:
    stp_string_free(text);
    stp_string_free(metrics);
    stp_item_free(it);
    chan_teardown(&f);
}

/* ---- arrival callbacks and garbage handlers ---- */

typedef struct {
    atomic_int calls;
    atomic_llong last_ts;
    char text[64];
} seen_events;

static void on_arrival(void *ctx, int64_t ts) {
    seen_events *s = ctx;
    atomic_store(&s->last_ts, (long long)ts);
    atomic_fetch_add(&s->calls, 1);
}

static void on_garbage(void *ctx, int64_t ts, const stp_item *item) {
    seen_events *s = ctx;
    size_t len = 0;
    const void *d = stp_item_data(item, &len);
    if (d != NULL && len < sizeof s->text) {
        memcpy(s->text, d, len);
        s->text[len] = '\0';
    }
    atomic_store(&s->last_ts, (long long)ts);
    atomic_fetch_add(&s->calls, 1);
}

static void test_events_arrival_and_garbage(void) {
    chan_fix f;
    stp_item *it = NULL;
    stp_subscription *sub = NULL;
    stp_queue *q = NULL;
    stp_queue_out *qout = NULL;
    stp_queue_in *qin = NULL;
    stp_subscription *qsub = NULL;
    stp_task *qt = NULL;
    static seen_events arrived, collected, qarrived, qcollected;
    int64_t ts = 0;
    uint64_t ticket = 0;
    memset(&arrived, 0, sizeof arrived);
    memset(&collected, 0, sizeof collected);
    memset(&qarrived, 0, sizeof qarrived);
    memset(&qcollected, 0, sizeof qcollected);
    CHAN_SETUP(f, 0);
    CHECK_OK(stp_channel_on_arrival(f.ch, on_arrival, &arrived, &sub));
    CHECK_OK(stp_channel_on_garbage(f.ch, on_garbage, &collected));
    it = text_item("first");
    CHECK(it != NULL);
    CHECK_OK(stp_channel_put(f.out, 4, it, 0, 0));
    stp_item_free(it);
    it = NULL;
    /* Called on the putting thread: done when the put returns. */
    CHECK_EQ_I64(atomic_load(&arrived.calls), 1);
    CHECK_EQ_I64(atomic_load(&arrived.last_ts), 4);
    stp_subscription_free(sub);
    sub = NULL;
    it = text_item("second");
    CHECK(it != NULL);
    CHECK_OK(stp_channel_put(f.out, 5, it, 0, 0));
    stp_item_free(it);
    it = NULL;
    CHECK_EQ_I64(atomic_load(&arrived.calls), 1); /* unsubscribed */
    CHECK_OK(stp_channel_get(f.in, STP_EXACT, 4, 0, &ts, &it));
    stp_item_free(it);
    it = NULL;
    CHECK_OK(stp_channel_consume(f.in, 4));
    CHECK_OK(stp_task_set_virtual_time(f.prod, STP_INFINITY));
    CHECK_OK(stp_runtime_collect(f.rt));
    CHECK_EQ_I64(atomic_load(&collected.calls), 1);
    CHECK_EQ_I64(atomic_load(&collected.last_ts), 4);
    CHECK_STR(collected.text, "first");
    CHECK_INVALID(stp_channel_on_arrival(f.ch, NULL, NULL, &sub), "NULL");
    CHECK_INVALID(stp_channel_on_arrival(f.ch, on_arrival, NULL, NULL), "NULL");
    CHECK_INVALID(stp_channel_on_garbage(f.ch, NULL, NULL), "NULL");
    /* Queues: told of each put, and of each item consumed. */
    CHECK_OK(stp_queue_new(f.rt, NULL, 0, 0, &q));
    CHECK_OK(stp_queue_on_arrival(q, on_arrival, &qarrived, &qsub));
    CHECK_OK(stp_queue_on_garbage(q, on_garbage, &qcollected));
    CHECK_OK(stp_task_new(f.rt, STP_AT_FLOOR, "jobs", &qt));
    CHECK_OK(stp_queue_attach_output(qt, q, &qout));
    CHECK_OK(stp_queue_attach_input(f.cons, q, &qin));
    it = text_item("job");
    CHECK(it != NULL);
    CHECK_OK(stp_queue_put(qout, 7, it, 0, &ticket));
    stp_item_free(it);
    it = NULL;
    CHECK_EQ_I64(atomic_load(&qarrived.calls), 1);
    CHECK_EQ_I64(atomic_load(&qarrived.last_ts), 7);
    CHECK_OK(stp_queue_get(qin, 0, &ts, &ticket, &it));
    CHECK_OK(stp_queue_consume(qin, ticket));
    CHECK_EQ_I64(atomic_load(&qcollected.calls), 1);
    CHECK_STR(qcollected.text, "job");
done:
    stp_item_free(it);
    stp_subscription_free(sub);
    stp_subscription_free(qsub);
    stp_queue_in_free(qin);
    stp_queue_out_free(qout);
    stp_task_free(qt);
    chan_teardown(&f);
    stp_queue_free(q);
}

/* A callback that holds its thread until released, and one that ends its own subscription. */
typedef struct {
    atomic_int inside, release, calls, returned;
    stp_subscription *own;
} slow_cb;

static void on_arrival_slow(void *ctx, int64_t ts) {
    slow_cb *c = ctx;
    (void)ts;
    atomic_fetch_add(&c->calls, 1);
    atomic_store(&c->inside, 1);
    for (int i = 0; i < 10000 && !atomic_load(&c->release); i++) sleep_ms(1);
    atomic_store(&c->returned, 1);
}

static void on_arrival_unsubscribing(void *ctx, int64_t ts) {
    slow_cb *c = ctx;
    (void)ts;
    atomic_fetch_add(&c->calls, 1);
    stp_subscription_free(c->own); /* from inside its own call: must not wait for itself */
    c->own = NULL;
    atomic_store(&c->returned, 1);
}

typedef struct {
    const stp_channel_out *out;
    int64_t ts;
    stp_status st;
} slow_putter;

static void *slow_putter_main(void *p) {
    slow_putter *u = p;
    stp_item *it = text_item("slow");
    u->st = it == NULL ? STP_INTERNAL : stp_channel_put(u->out, u->ts, it, 0, 0);
    stp_item_free(it);
    return NULL;
}

typedef struct {
    stp_subscription *sub;
    atomic_int done;
} freer;

static void *freer_main(void *p) {
    freer *r = p;
    stp_subscription_free(r->sub);
    atomic_store(&r->done, 1);
    return NULL;
}

/* Freeing a subscription returns only once a call running on another thread has returned
 * (the caller may then free the callback's context), and a callback may free its own. */
static void test_subscription_free_waits_for_running_calls(void) {
    chan_fix f;
    static slow_cb slow, self;
    stp_subscription *sub = NULL;
    pthread_t put_th, free_th;
    bool put_started = false, free_started = false;
    slow_putter u;
    static freer r;
    memset(&slow, 0, sizeof slow);
    memset(&self, 0, sizeof self);
    memset(&r, 0, sizeof r);
    CHAN_SETUP(f, 0);
    CHECK_OK(stp_channel_on_arrival(f.ch, on_arrival_slow, &slow, &sub));
    u = (slow_putter){.out = f.out, .ts = 1, .st = STP_OK};
    CHECK(pthread_create(&put_th, NULL, slow_putter_main, &u) == 0);
    put_started = true;
    for (int i = 0; i < 10000 && !atomic_load(&slow.inside); i++) sleep_ms(1);
    CHECK(atomic_load(&slow.inside));
    r.sub = sub;
    sub = NULL;
    CHECK(pthread_create(&free_th, NULL, freer_main, &r) == 0);
    free_started = true;
    sleep_ms(100);
    CHECK_MSG(!atomic_load(&r.done), "stp_subscription_free returned while a call was running");
    atomic_store(&slow.release, 1);
    CHECK(join_within(free_th, 10000));
    free_started = false;
    CHECK(atomic_load(&slow.returned));
    CHECK(join_within(put_th, 10000));
    put_started = false;
    CHECK_OK(u.st);
    PUT(f.out, 2, "after");
    CHECK_EQ_I64(atomic_load(&slow.calls), 1);
    /* A callback that frees its own subscription. */
    CHECK_OK(stp_channel_on_arrival(f.ch, on_arrival_unsubscribing, &self, &self.own));
    PUT(f.out, 3, "frees");
    CHECK(atomic_load(&self.returned));
    PUT(f.out, 4, "after");
    CHECK_EQ_I64(atomic_load(&self.calls), 1);
done:
    atomic_store(&slow.release, 1);
    if (free_started) (void)join_within(free_th, 10000);
    if (put_started) (void)join_within(put_th, 10000);
    stp_subscription_free(sub);
    chan_teardown(&f);
}

/* ---- correlation ---- */

static void test_correlator_sets(void) {
    stp_runtime *rt = NULL;
    stp_channel *video = NULL, *audio = NULL;
    stp_task *src = NULL, *fusion = NULL;
    stp_channel_out *vout = NULL, *aout = NULL;
    stp_channel_in *ins[2] = {NULL, NULL};
    stp_channel_in *twice[2] = {NULL, NULL};
    stp_correlator *c = NULL;
    stp_set *set = NULL;
    stp_item *it = NULL;
    int64_t ts = 0;
    CHECK_OK(stp_runtime_new(&rt));
    CHECK_OK(stp_channel_new(rt, NULL, 0, 0, &video));
    CHECK_OK(stp_channel_new(rt, NULL, 0, 0, &audio));
    CHECK_OK(stp_task_new(rt, 0, "src", &src));
    CHECK_OK(stp_task_new(rt, STP_INFINITY, "fusion", &fusion));
    CHECK_OK(stp_channel_attach_output(src, video, &vout));
    CHECK_OK(stp_channel_attach_output(src, audio, &aout));
    CHECK_OK(stp_channel_attach_input(fusion, video, &ins[0]));
    CHECK_OK(stp_channel_attach_input(fusion, audio, &ins[1]));
    /* Refused arguments leave the connections to the caller. */
    twice[0] = twice[1] = ins[0];
    CHECK_INVALID(stp_correlator_new(twice, 2, STP_MATCH_EXACT, 0, &c), "twice");
    CHECK_INVALID(stp_correlator_new(ins, 0, STP_MATCH_EXACT, 0, &c), "at least one");
    CHECK_INVALID(stp_correlator_new(ins, 2, 7, 0, &c), "stp_match");
    CHECK_INVALID(stp_correlator_new(ins, 2, STP_MATCH_WITHIN, -1, &c), "negative");
    CHECK_OK(stp_correlator_new(ins, 2, STP_MATCH_WITHIN, 2, &c));
    ins[0] = ins[1] = NULL; /* the correlator's now */
    it = text_item("frame");
    CHECK(it != NULL);
    CHECK_OK(stp_channel_put(vout, 10, it, 0, 0));
    stp_item_free(it);
    it = text_item("chunk");
    CHECK(it != NULL);
    CHECK_OK(stp_channel_put(aout, 11, it, 0, 0));
    stp_item_free(it);
    it = NULL;
    CHECK_OK(stp_correlator_get(c, LONG_MS, &set));
    CHECK_EQ_I64(stp_set_ts(set), 10);
    CHECK_EQ_U64(stp_set_len(set), 2);
    CHECK_OK(stp_set_item(set, 1, &ts, &it));
    CHECK_EQ_I64(ts, 11);
    CHECK(is_text(it, "chunk"));
    stp_item_free(it);
    it = NULL;
    CHECK_INVALID(stp_set_item(set, 2, &ts, &it), "input 2");
    CHECK_OK(stp_correlator_consume(c, set));
    CHECK_EQ_U64(stp_correlator_skipped(c), 0);
    stp_set_free(set);
    set = NULL;
    CHECK_ST(stp_correlator_get(c, 0, &set), STP_UNAVAILABLE);
    CHECK(set == NULL);
done:
    stp_item_free(it);
    stp_set_free(set);
    stp_correlator_free(c);
    stp_channel_in_free(ins[0]);
    stp_channel_in_free(ins[1]);
    stp_channel_out_free(vout);
    stp_channel_out_free(aout);
    stp_task_free(fusion);
    stp_task_free(src);
    stp_channel_free(video);
    stp_channel_free(audio);
    stp_runtime_free(rt);
}

/* ---- items of user types ---- */

static void test_items_typed(void) {
    chan_fix f;
    stp_item *it = NULL, *got = NULL;
    static const unsigned char point[] = {1, 0, 0, 0, 2, 0, 0, 0};
    size_t len = 0;
    const void *d;
    CHAN_SETUP(f, 0);
    CHECK_OK(stp_item_typed("demo.point", point, sizeof point, &it));
    CHECK(stp_type_tag("demo.point") != 0);
    CHECK_EQ_U64(stp_item_tag(it), stp_type_tag("demo.point"));
    CHECK(stp_type_tag("demo.point") != stp_type_tag("demo.other"));
    CHECK(stp_item_kind_of(it) == STP_ITEM_OTHER);
    got = round_trip(&f, 1, it);
    CHECK_MSG(got != NULL, "round trip failed: %s", stp_last_error());
    CHECK_EQ_U64(stp_item_tag(got), stp_type_tag("demo.point"));
    d = stp_item_data(got, &len);
    CHECK(d != NULL && len == sizeof point && memcmp(d, point, len) == 0);
    CHECK_EQ_U64(stp_type_tag(NULL), 0);
    stp_item_free(got);
    got = NULL;
    CHECK_INVALID(stp_item_typed("stampede.bytes", point, 1, &got), "built-in");
    CHECK_INVALID(stp_item_typed(NULL, point, 1, &got), "NULL");
    CHECK(got == NULL);
done:
    stp_item_free(it);
    stp_item_free(got);
    chan_teardown(&f);
}

static void test_pacer_paces_ticks(void) {
    stp_pacer *p = NULL;
    stp_pacer_stats s;
    stp_tick tick;
    double t0, el;
    CHECK_OK(stp_pacer_new(5000, 50000, STP_LATE_CONTINUE, &p));
    t0 = now_ms();
    for (int64_t vt = 0; vt < 10; vt++) {
        CHECK_OK(stp_pacer_sync(p, vt, &tick, NULL));
        CHECK_MSG(tick == STP_TICK_ON_TIME, "tick %lld: %d", (long long)vt, (int)tick);
    }
    el = now_ms() - t0;
    /* Tick 9 is due 9 periods after tick 0. */
    CHECK_MSG(el >= 45.0, "10 ticks of 5 ms took %.2f ms", el);
    CHECK_MSG(el < 45.0 + 2000, "10 ticks of 5 ms took %.2f ms", el);
    CHECK_OK(stp_pacer_get_stats(p, &s));
    CHECK_EQ_U64(s.on_time, 10);
    CHECK_EQ_U64(s.late, 0);
    CHECK_EQ_U64(s.skipped, 0);
    CHECK_EQ_U64(s.resyncs, 0);
done:
    stp_pacer_free(p);
}

static void test_pacer_late_actions(void) {
    stp_pacer *p = NULL;
    stp_pacer_stats s;
    stp_tick tick;
    int64_t skip_to = -1;
    /* Skip: a late tick reports the virtual time to jump to. */
    CHECK_OK(stp_pacer_new(5000, 1000, STP_LATE_SKIP, &p));
    CHECK_OK(stp_pacer_sync(p, 0, &tick, &skip_to));
    CHECK(tick == STP_TICK_ON_TIME);
    sleep_ms(30); /* tick 1 was due at 5 ms */
    CHECK_OK(stp_pacer_sync(p, 1, &tick, &skip_to));
    CHECK_MSG(tick == STP_TICK_SKIP, "tick %d, expected STP_TICK_SKIP", (int)tick);
    CHECK_MSG(skip_to > 1, "skip_to %lld", (long long)skip_to);
    /* 25 ms late at 5 ms a tick: at least the 5 missed ticks are skipped. */
    CHECK_MSG(skip_to >= 6, "skip_to %lld after 25 ms late", (long long)skip_to);
    CHECK_OK(stp_pacer_get_stats(p, &s));
    CHECK_EQ_U64(s.on_time, 1);
    CHECK_EQ_U64(s.late, 1);
    CHECK_EQ_U64(s.skipped, (uint64_t)(skip_to - 1));
    CHECK_EQ_U64(s.resyncs, 0);
    stp_pacer_free(p);
    p = NULL;

    /* Continue: reported late, schedule kept. */
    CHECK_OK(stp_pacer_new(5000, 1000, STP_LATE_CONTINUE, &p));
    CHECK_OK(stp_pacer_sync(p, 0, &tick, NULL));
    sleep_ms(20);
    skip_to = -1;
    CHECK_OK(stp_pacer_sync(p, 1, &tick, &skip_to));
    CHECK_MSG(tick == STP_TICK_LATE, "tick %d, expected STP_TICK_LATE", (int)tick);
    CHECK_OK(stp_pacer_get_stats(p, &s));
    CHECK_EQ_U64(s.late, 1);
    CHECK_EQ_U64(s.skipped, 0);
    stp_pacer_free(p);
    p = NULL;

    /* Resync: the late tick becomes due now, so the next one is a period away. */
    CHECK_OK(stp_pacer_new(5000, 1000, STP_LATE_RESYNC, &p));
    CHECK_OK(stp_pacer_sync(p, 0, &tick, NULL));
    sleep_ms(20);
    {
        double t0 = now_ms(), el;
        CHECK_OK(stp_pacer_sync(p, 1, &tick, NULL));
        CHECK_MSG(tick == STP_TICK_RESYNCED, "tick %d, expected STP_TICK_RESYNCED", (int)tick);
        CHECK_OK(stp_pacer_sync(p, 2, &tick, NULL));
        el = now_ms() - t0;
        CHECK(tick == STP_TICK_ON_TIME);
        /* Tick 2 is due a full period after the resync, not at its old time (long past). */
        CHECK_MSG(el >= 5.0, "tick 2 came %.2f ms after the late tick 1", el);
    }
    CHECK_OK(stp_pacer_get_stats(p, &s));
    CHECK_EQ_U64(s.resyncs, 1);
    CHECK_EQ_U64(s.late, 1);
    CHECK_EQ_U64(s.on_time, 2);
done:
    stp_pacer_free(p);
}

/* A pacer sleeping towards a far tick wakes when its stop flag is set, counting no tick. */
static void test_pacer_sync_interruptible(void) {
    stp_pacer *p = NULL;
    stp_pacer_stats st;
    stp_tick tick;
    int64_t skip_to = -5;
    pthread_t th;
    bool running = false;
    stopper s;
    int32_t stop = 0;
    double t0, el;
    /* A tick every 5 s; a 10 s tolerance keeps the ticks already due on time. */
    CHECK_OK(stp_pacer_new(5000000, 10000000, STP_LATE_CONTINUE, &p));
    CHECK_OK(stp_pacer_sync_interruptible(p, 0, &stop, &tick, NULL));
    CHECK(tick == STP_TICK_ON_TIME);
    CHECK(start_stopper(&th, &s, &stop, 100));
    running = true;
    tick = (stp_tick)-1;
    t0 = now_ms();
    CHECK_ST(stp_pacer_sync_interruptible(p, 1, &stop, &tick, &skip_to), STP_INTERRUPTED);
    el = now_ms() - t0;
    CHECK_MSG(el >= 80.0 && el < 2000.0, "the sync gave up after %.2f ms, flag set at 100", el);
    pthread_join(th, NULL);
    running = false;
    CHECK_MSG((int)tick == -1 && skip_to == -5, "an interrupted sync wrote tick %d, skip_to %lld",
              (int)tick, (long long)skip_to);
    CHECK_OK(stp_pacer_get_stats(p, &st));
    CHECK_EQ_U64(st.on_time, 1);
    CHECK_EQ_U64(st.late, 0);
    /* A tick already due returns at once, flag or not; NULL is stp_pacer_sync. */
    CHECK_OK(stp_pacer_sync_interruptible(p, 0, &stop, &tick, NULL));
    CHECK(tick == STP_TICK_ON_TIME);
    CHECK_OK(stp_pacer_sync_interruptible(p, 0, NULL, &tick, NULL));
    CHECK(tick == STP_TICK_ON_TIME);
done:
    if (running) pthread_join(th, NULL);
    stp_pacer_free(p);
}

/* ------------------------------------------------------------------------------------------ */
/* Thread safety                                                                              */
/* ------------------------------------------------------------------------------------------ */

#define STREAM_N 2000

typedef struct {
    chan_fix *f;
    uint32_t consumers; /* 0: reclaimed by the watermark; 1: by the reference count */
    int64_t received[STREAM_N];
    int nreceived;
    int nput;
} stream;

static void *stream_producer(void *p) {
    stream *s = p;
    stp_item *it = NULL;
    for (int64_t ts = 0; ts < STREAM_N; ts++) {
        int64_t payload = ts * 3 + 1;
        it = bytes_item(&payload, sizeof payload);
        CHECK(it != NULL);
        CHECK_OK(stp_channel_put(s->f->out, ts, it, s->consumers, LONG_MS));
        stp_item_free(it);
        it = NULL;
        s->nput++;
        /* Without a reference count, the producer's virtual time holds the watermark. */
        if (s->consumers == 0) CHECK_OK(stp_task_set_virtual_time(s->f->prod, ts + 1));
    }
done:
    stp_item_free(it);
    return NULL;
}

static void *stream_consumer(void *p) {
    stream *s = p;
    stp_item *it = NULL;
    for (int i = 0; i < STREAM_N; i++) {
        int64_t ts = -1, payload = 0;
        size_t len = 0;
        CHECK_OK(stp_channel_get(s->f->in, STP_NEXT_UNSEEN, 0, LONG_MS, &ts, &it));
        const void *d = stp_item_data(it, &len);
        CHECK_EQ_U64(len, sizeof payload);
        memcpy(&payload, d, sizeof payload);
        CHECK_MSG(ts == i, "item %d arrived with timestamp %lld", i, (long long)ts);
        CHECK_EQ_I64(payload, ts * 3 + 1);
        s->received[s->nreceived++] = ts;
        CHECK_OK(stp_channel_consume(s->f->in, ts));
        stp_item_free(it);
        it = NULL;
    }
done:
    stp_item_free(it);
    return NULL;
}

static void run_stream(uint32_t consumers) {
    chan_fix f;
    stream *s = calloc(1, sizeof *s);
    pthread_t pt, ct;
    bool prod = false, cons = false;
    CHECK(s != NULL);
    CHAN_SETUP(f, 8);
    s->f = &f;
    s->consumers = consumers;
    CHECK(pthread_create(&ct, NULL, stream_consumer, s) == 0);
    cons = true;
    CHECK(pthread_create(&pt, NULL, stream_producer, s) == 0);
    prod = true;
done:
    if (prod && !join_within(pt, 60000)) {
        fail_at(__FILE__, __LINE__, "the producer is stuck after %d puts", s->nput);
        stp_channel_close(f.ch);
        if (!join_within(pt, LONG_MS)) return;
    }
    if (cons && !join_within(ct, 60000)) {
        fail_at(__FILE__, __LINE__, "the consumer is stuck after %d gets", s->nreceived);
        stp_channel_close(f.ch);
        if (!join_within(ct, LONG_MS)) return;
    }
    if (s != NULL && prod && cons) {
        if (s->nput != STREAM_N || s->nreceived != STREAM_N)
            fail_at(__FILE__, __LINE__, "%d put, %d received, expected %d", s->nput,
                    s->nreceived, STREAM_N);
        for (int i = 0; i < s->nreceived; i++) {
            if (s->received[i] != i) {
                fail_at(__FILE__, __LINE__, "received[%d] = %lld", i, (long long)s->received[i]);
                break;
            }
        }
        /* Everything consumed was reclaimed: a bounded channel of 8 took 2000 items. */
        if (!atomic_load(&g_failed_now)) {
            int64_t ts;
            stp_item *it = NULL;
            if (stp_channel_get(f.in, STP_EXACT, 0, 0, &ts, &it) != STP_GONE)
                fail_at(__FILE__, __LINE__, "item 0 is not gone: %s", stp_last_error());
            stp_item_free(it);
        }
    }
    chan_teardown(&f);
    free(s);
}

static void test_thread_stream_watermark(void) { run_stream(0); }
static void test_thread_stream_refcount(void) { run_stream(1); }

/* ------------------------------------------------------------------------------------------ */
/* Distributed: a router and a client address space in this process                          */
/* ------------------------------------------------------------------------------------------ */

static stp_runtime *g_router, *g_client;
static bool g_dist_tried, g_dist_ok;
static char g_endpoint[64], g_app[64];

/* A loopback port nobody listens on now. */
static int free_port(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    socklen_t n = sizeof a;
    int port = -1;
    if (s < 0) return -1;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (bind(s, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(s, (struct sockaddr *)&a, &n) == 0)
        port = ntohs(a.sin_port);
    close(s);
    return port;
}

static bool dist_setup(void) {
    stp_config *rc = NULL, *cc = NULL;
    int port;
    if (g_dist_tried) {
        if (!g_dist_ok) fail_at(__FILE__, __LINE__, "the router and client did not join");
        return g_dist_ok;
    }
    g_dist_tried = true;
    port = free_port();
    CHECK(port > 0);
    snprintf(g_endpoint, sizeof g_endpoint, "tcp/127.0.0.1:%d", port);
    snprintf(g_app, sizeof g_app, "ctest%ld", (long)getpid());
    rc = stp_config_new(STP_ROUTER);
    cc = stp_config_new(STP_CLIENT);
    CHECK(rc != NULL && cc != NULL);
    CHECK_OK(stp_config_listen(rc, g_endpoint));
    CHECK_OK(stp_config_timeouts(rc, 5000, 5000, 5000));
    CHECK_OK(stp_config_connect(cc, g_endpoint));
    CHECK_OK(stp_config_timeouts(cc, 5000, 5000, 5000));
    CHECK_OK(stp_runtime_join(g_app, rc, &g_router));
    CHECK_OK(stp_runtime_join(g_app, cc, &g_client));
    g_dist_ok = true;
done:
    stp_config_free(rc);
    stp_config_free(cc);
    return g_dist_ok;
}

static void dist_teardown(void) {
    stp_runtime_free(g_client);
    stp_runtime_free(g_router);
    g_client = g_router = NULL;
}

#define DIST_SETUP()                \
    do {                            \
        if (!dist_setup()) goto done; \
    } while (0)

static void test_dist_join_ids(void) {
    const char *r, *c;
    DIST_SETUP();
    r = stp_runtime_id(g_router);
    c = stp_runtime_id(g_client);
    CHECK(r != NULL && c != NULL);
    CHECK_MSG(r[0] != '\0' && c[0] != '\0', "ids \"%s\" and \"%s\"", r, c);
    CHECK_MSG(strcmp(r, c) != 0, "both spaces have id %s", r);
    CHECK(stp_runtime_id(g_router) == r); /* stable while the runtime lives */
done:;
}

/* Virtual time is one time base across the application, and a space's GC floor rises with
 * the data put there (up to one above its newest timestamp); a root task cannot start below
 * it. So each distributed test works above every timestamp the earlier ones used. */
#define DIST_BASE_R2C 100
#define DIST_BASE_C2R 1000
#define DIST_BASE_QUEUE 2000
#define DIST_BASE_REGISTER 3000

/* The router owns the channel; the client finds it by name and puts; the router gets. */
static void test_dist_router_channel_client_puts(void) {
    const int64_t B = DIST_BASE_R2C;
    stp_channel *own = NULL, *remote = NULL;
    stp_task *rt_task = NULL, *cl_task = NULL;
    stp_channel_in *in = NULL;
    stp_channel_out *out = NULL;
    DIST_SETUP();
    CHECK_OK(stp_channel_new(g_router, "r2c/frames", 0, 0, &own));
    CHECK_OK(stp_task_new(g_router, STP_INFINITY, "router-reader", &rt_task));
    CHECK_OK(stp_channel_attach_input(rt_task, own, &in));
    CHECK_OK(stp_channel_lookup(g_client, "r2c/frames", 5000, &remote));
    /* The router serves it: local there, remote for the client that found it. */
    CHECK(stp_channel_is_local(own));
    CHECK(!stp_channel_is_local(remote));
    CHECK_OK(stp_task_new(g_client, B, "client-writer", &cl_task));
    CHECK_OK(stp_channel_attach_output(cl_task, remote, &out));
    for (int64_t ts = B; ts < B + 10; ts++) {
        char s[32];
        snprintf(s, sizeof s, "frame %lld", (long long)ts);
        CHECK_OK(put_text(out, ts, s, 0, 5000));
    }
    /* Remote puts keep the rules: duplicates and visibility. */
    CHECK_ST(put_text(out, B + 3, "again", 0, 0), STP_DUPLICATE);
    CHECK_OK(stp_task_set_virtual_time(cl_task, B + 20));
    CHECK_ST(put_text(out, B + 15, "late", 0, 0), STP_BELOW_VISIBILITY);
    for (int64_t ts = B; ts < B + 10; ts++) {
        char s[32];
        snprintf(s, sizeof s, "frame %lld", (long long)ts);
        GET(in, STP_NEXT_UNSEEN, 0, 5000, ts, s);
        CHECK_OK(stp_channel_consume(in, ts));
    }
    GET_FAILS(in, STP_NEXT_UNSEEN, 0, 0, STP_UNAVAILABLE);
    GET_FAILS(in, STP_EXACT, B + 3, 0, STP_GONE);
    /* A put that does not wait for the owner returns once sent; a flush waits for it. */
    CHECK_OK(put_text(out, B + 21, "sent", 0, STP_FOREVER));
    CHECK_OK(stp_channel_flush(out));
    GET(in, STP_NEXT_UNSEEN, 0, 5000, B + 21, "sent");
    /* A closed remote channel refuses the client's puts, and from then on at once. */
    CHECK_OK(stp_channel_close(own));
    CHECK_ST(put_text(out, B + 25, "closed", 0, 0), STP_CLOSED);
    CHECK_ST(put_text(out, B + 26, "closed", 0, STP_FOREVER), STP_CLOSED);
    CHECK_OK(stp_channel_flush(out));
done:
    stp_channel_out_free(out);
    stp_channel_in_free(in);
    stp_task_free(cl_task);
    stp_task_free(rt_task);
    stp_channel_free(remote);
    stp_channel_free(own);
}

/* The client owns the channel and puts; the router reads it remotely. */
static void test_dist_client_channel_router_gets(void) {
    const int64_t B = DIST_BASE_C2R;
    stp_channel *own = NULL, *remote = NULL;
    stp_task *cl_task = NULL, *rt_task = NULL;
    stp_channel_in *in = NULL;
    stp_channel_out *out = NULL;
    stp_item *arr = NULL, *got = NULL;
    pthread_t th;
    bool running = false;
    getter g;
    float fdata[6] = {1.5f, -2.0f, 3.25f, 0.0f, 1e6f, -1e-3f};
    size_t shape[2] = {2, 3};
    int64_t ts = -1;
    memset(&g, 0, sizeof g);
    DIST_SETUP();
    CHECK_OK(stp_channel_new(g_client, "c2r/results", 0, 0, &own));
    CHECK_OK(stp_task_new(g_client, B, "client-writer", &cl_task));
    CHECK_OK(stp_channel_attach_output(cl_task, own, &out));
    for (int64_t t = B; t < B + 5; t++) {
        char s[32];
        snprintf(s, sizeof s, "result %lld", (long long)t);
        CHECK_OK(put_text(out, t, s, 0, 0));
    }
    CHECK_OK(stp_item_array(STP_F32, 2, shape, fdata, sizeof fdata, &arr));
    CHECK_OK(stp_channel_put(out, B + 5, arr, 0, 0));
    CHECK_OK(stp_channel_lookup(g_router, "c2r/results", 5000, &remote));
    /* At B, so the items already there (B and above) are not below its visibility. */
    CHECK_OK(stp_task_new(g_router, B, "router-reader", &rt_task));
    CHECK_OK(stp_channel_attach_input(rt_task, remote, &in));
    GET(in, STP_OLDEST, 0, 5000, B, "result 1000");
    GET(in, STP_EXACT, B + 3, 5000, B + 3, "result 1003");
    GET(in, STP_NEWEST, 0, 5000, B + 5, NULL);
    /* An array crosses address spaces with its dtype, shape and data. */
    CHECK_OK(stp_channel_get(in, STP_EXACT, B + 5, 5000, &ts, &got));
    CHECK_EQ_I64(ts, B + 5);
    CHECK(stp_item_kind_of(got) == STP_ITEM_ARRAY);
    CHECK_EQ_U64(stp_item_tag(got), stp_item_tag(arr));
    {
        stp_dtype dt;
        size_t ndim = 0, len = 0;
        const size_t *sh = NULL;
        const void *d;
        CHECK_OK(stp_item_dtype(got, &dt));
        CHECK(dt == STP_F32);
        CHECK_OK(stp_item_shape(got, &ndim, &sh));
        CHECK(ndim == 2 && sh[0] == 2 && sh[1] == 3);
        d = stp_item_data(got, &len);
        CHECK_EQ_U64(len, sizeof fdata);
        CHECK(memcmp(d, fdata, sizeof fdata) == 0);
    }
    /* Neighbours, consumes and gone items, remotely. */
    GET_FAILS(in, STP_EXACT, B + 7, 0, STP_UNAVAILABLE);
    CHECK_NEIGHBORS(1, B + 5, 0, 0);
    CHECK_OK(stp_channel_consume_until(in, B + 1));
    GET_FAILS(in, STP_EXACT, B + 1, 0, STP_GONE);
    GET(in, STP_OLDEST, 0, 5000, B + 2, "result 1002");
    /* A remote get blocks until the owner's put. */
    g.in = in;
    g.sel = STP_EXACT;
    g.ts = B + 8;
    g.timeout_ms = LONG_MS;
    CHECK(pthread_create(&th, NULL, getter_main, &g) == 0);
    running = true;
    wait_started(&g.started);
    sleep_ms(50);
    CHECK(!atomic_load(&g.finished));
    CHECK_OK(put_text(out, B + 8, "eight", 0, 0));
    CHECK_MSG(join_within(th, LONG_MS + 5000), "the remote get stayed blocked");
    running = false;
    CHECK_MSG(g.st == STP_OK, "get -> %s: %s", stp_status_name((int32_t)g.st), g.error);
    CHECK_EQ_I64(g.got_ts, B + 8);
    CHECK(is_text(g.item, "eight"));
    /* A remote timeout. */
    {
        double t0 = now_ms(), el;
        GET_FAILS(in, STP_EXACT, B + 9, 50, STP_TIMEOUT);
        el = now_ms() - t0;
        CHECK_MSG(el >= 50.0, "the remote get gave up after %.2f ms, timeout 50", el);
        CHECK_NEIGHBORS(1, B + 8, 0, 0);
    }
done:
    if (running) {
        stp_channel_close(own);
        if (join_within(th, LONG_MS)) running = false;
    }
    stp_item_free(g.item);
    stp_item_free(arr);
    stp_item_free(got);
    if (running) return;
    stp_channel_in_free(in);
    stp_channel_out_free(out);
    stp_task_free(rt_task);
    stp_task_free(cl_task);
    stp_channel_free(remote);
    stp_channel_free(own);
}

static void test_dist_queue(void) {
    const int64_t B = DIST_BASE_QUEUE;
    stp_queue *own = NULL, *remote = NULL;
    stp_task *cl_task = NULL, *rt_task = NULL;
    stp_queue_out *out = NULL, *rout = NULL;
    stp_queue_in *in = NULL, *cin = NULL;
    stp_item *it = NULL;
    uint64_t tickets[5], ticket = 0;
    int64_t ts;
    DIST_SETUP();
    CHECK_OK(stp_queue_new(g_router, "dist/jobs", 0, 0, &own));
    CHECK_OK(stp_queue_lookup(g_client, "dist/jobs", 5000, &remote));
    CHECK(stp_queue_is_local(own));
    CHECK(!stp_queue_is_local(remote));
    CHECK_OK(stp_task_new(g_client, B, NULL, &cl_task));
    CHECK_OK(stp_task_new(g_router, B, NULL, &rt_task));
    CHECK_OK(stp_queue_attach_output(cl_task, remote, &out));
    CHECK_OK(stp_queue_attach_input(rt_task, own, &in));
    for (int i = 0; i < 5; i++) {
        char s[16];
        snprintf(s, sizeof s, "job %d", i);
        it = text_item(s);
        CHECK(it != NULL);
        CHECK_OK(stp_queue_put(out, B + 10 - i, it, 5000, &tickets[i]));
        stp_item_free(it);
        it = NULL;
    }
    /* FIFO, not timestamp order; the tickets are those the remote puts returned. */
    for (int i = 0; i < 5; i++) {
        char s[16];
        snprintf(s, sizeof s, "job %d", i);
        CHECK_OK(stp_queue_get(in, 5000, &ts, &ticket, &it));
        CHECK_EQ_I64(ts, B + 10 - i);
        CHECK_EQ_U64(ticket, tickets[i]);
        CHECK(is_text(it, s));
        stp_item_free(it);
        it = NULL;
        CHECK_OK(stp_queue_consume(in, ticket));
    }
    CHECK_ST(stp_queue_consume(in, tickets[0]), STP_UNKNOWN_TICKET);
    CHECK_ST(stp_queue_get(in, 0, &ts, &ticket, &it), STP_UNAVAILABLE);
    /* The other way: the router puts, the client takes from the remote queue. */
    CHECK_OK(stp_queue_attach_output(rt_task, own, &rout));
    CHECK_OK(stp_queue_attach_input(cl_task, remote, &cin));
    it = text_item("for the client");
    CHECK(it != NULL);
    CHECK_OK(stp_queue_put(rout, B + 50, it, 0, &tickets[0]));
    stp_item_free(it);
    it = NULL;
    CHECK_OK(stp_queue_get(cin, 5000, &ts, &ticket, &it));
    CHECK_EQ_I64(ts, B + 50);
    CHECK_EQ_U64(ticket, tickets[0]);
    CHECK(is_text(it, "for the client"));
    CHECK_ST(stp_queue_consume(cin, ticket + 1000), STP_UNKNOWN_TICKET);
    CHECK_OK(stp_queue_consume(cin, ticket));
    CHECK_ST(stp_queue_consume(cin, ticket), STP_UNKNOWN_TICKET);
    CHECK_ST(stp_queue_get(cin, 0, &ts, &ticket, &it), STP_UNAVAILABLE);
done:
    stp_item_free(it);
    stp_queue_in_free(cin);
    stp_queue_out_free(rout);
    stp_queue_in_free(in);
    stp_queue_out_free(out);
    stp_task_free(rt_task);
    stp_task_free(cl_task);
    stp_queue_free(remote);
    stp_queue_free(own);
}

static void test_dist_register(void) {
    const int64_t B = DIST_BASE_REGISTER;
    stp_register *own = NULL, *remote = NULL;
    stp_task *cl_task = NULL, *rt_task = NULL;
    stp_register_out *w = NULL, *rw = NULL;
    stp_register_in *r = NULL, *cr = NULL;
    stp_item *it = NULL;
    uint64_t seq = 0;
    pthread_t th;
    bool running = false;
    reader rd;
    memset(&rd, 0, sizeof rd);
    DIST_SETUP();
    CHECK_OK(stp_register_new(g_client, "dist/mode", 0, 0, &own));
    CHECK_OK(stp_task_new(g_client, B, NULL, &cl_task));
    CHECK_OK(stp_register_attach_output(cl_task, own, &w));
    CHECK(write_text(w, "a", &seq));
    CHECK_EQ_U64(seq, 1);
    CHECK(write_text(w, "b", &seq));
    CHECK_EQ_U64(seq, 2);
    CHECK_OK(stp_register_lookup(g_router, "dist/mode", 5000, &remote));
    /* The client serves it: local there, remote for the router that found it. */
    CHECK(stp_register_is_local(own));
    CHECK(!stp_register_is_local(remote));
    CHECK_OK(stp_task_new(g_router, B, NULL, &rt_task));
    CHECK_OK(stp_register_attach_input(rt_task, remote, &r));
    CHECK_OK(stp_register_read(r, 5000, &seq, &it));
    CHECK_EQ_U64(seq, 2);
    CHECK(is_text(it, "b"));
    stp_item_free(it);
    it = NULL;
    CHECK_ST(stp_register_read(r, 0, &seq, &it), STP_UNAVAILABLE);
    /* A remote read blocks until the owner writes. */
    rd.in = r;
    rd.timeout_ms = LONG_MS;
    CHECK(pthread_create(&th, NULL, reader_main, &rd) == 0);
    running = true;
    wait_started(&rd.started);
    sleep_ms(50);
    CHECK(!atomic_load(&rd.finished));
    CHECK(write_text(w, "c", &seq));
    CHECK_EQ_U64(seq, 3);
    CHECK_MSG(join_within(th, LONG_MS + 5000), "the remote read stayed blocked");
    running = false;
    CHECK_MSG(rd.st == STP_OK, "read -> %s: %s", stp_status_name((int32_t)rd.st), rd.error);
    CHECK_EQ_U64(rd.seq, 3);
    CHECK(is_text(rd.item, "c"));
    /* The router writes remotely; the owner's reader sees it. */
    CHECK_OK(stp_register_attach_output(rt_task, remote, &rw));
    CHECK(write_text(rw, "from the router", &seq));
    CHECK_EQ_U64(seq, 4);
    CHECK_OK(stp_register_attach_input(cl_task, own, &cr));
    CHECK_OK(stp_register_read(cr, 5000, &seq, &it));
    CHECK_EQ_U64(seq, 4);
    CHECK(is_text(it, "from the router"));
    stp_item_free(it);
    it = NULL;
    /* The remote reader gets the router's own write back, then times out. */
    CHECK_OK(stp_register_read(r, 5000, &seq, &it));
    CHECK_EQ_U64(seq, 4);
    stp_item_free(it);
    it = NULL;
    {
        double t0 = now_ms(), el;
        CHECK_ST(stp_register_read(r, 40, &seq, &it), STP_TIMEOUT);
        el = now_ms() - t0;
        CHECK_MSG(el >= 40.0, "the remote read gave up after %.2f ms, timeout 40", el);
    }
    /* The owner served this space's requests and pushed it the writes. */
    {
        stp_space_stats router, client;
        CHECK_OK(stp_runtime_space_stats(g_router, &router));
        CHECK_OK(stp_runtime_space_stats(g_client, &client));
        CHECK(client.served > 0 && client.pushed > 0);
        CHECK(router.push_received > 0);
    }
done:
    if (running) {
        stp_register_close(own);
        if (join_within(th, LONG_MS)) running = false;
    }
    stp_item_free(rd.item);
    stp_item_free(it);
    if (running) return;
    stp_register_in_free(cr);
    stp_register_out_free(rw);
    stp_register_in_free(r);
    stp_register_out_free(w);
    stp_task_free(rt_task);
    stp_task_free(cl_task);
    stp_register_free(remote);
    stp_register_free(own);
}

static void test_dist_names(void) {
    stp_channel *ch = NULL, *dup = NULL, *bad = NULL, *none = NULL;
    stp_queue *q = NULL;
    double t0, el;
    DIST_SETUP();
    CHECK_OK(stp_channel_new(g_router, "dist/kind", 0, 0, &ch));
    CHECK_OK(stp_runtime_wait_for(g_client, "dist/kind", 5000));
    /* First come, first served across the application. */
    CHECK_ST(stp_channel_new(g_client, "dist/kind", 0, 0, &dup), STP_NAME_TAKEN);
    CHECK(dup == NULL);
    CHECK_ST(stp_queue_lookup(g_client, "dist/kind", 5000, &q), STP_WRONG_KIND);
    CHECK(q == NULL);
    CHECK_ST(stp_channel_new(g_client, "bad*name", 0, 0, &bad), STP_INVALID_NAME);
    CHECK_ST(stp_channel_new(g_client, "bad//name", 0, 0, &bad), STP_INVALID_NAME);
    CHECK(bad == NULL);
    t0 = now_ms();
    CHECK_ST(stp_channel_lookup(g_client, "no/such/channel", 300, &none), STP_NOT_FOUND);
    el = now_ms() - t0;
    CHECK(none == NULL);
    CHECK_MSG(el >= 300.0 && el < 300.0 + 6000, "the lookup gave up after %.2f ms", el);
    CHECK_ST(stp_runtime_wait_for(g_client, "no/such/name", 100), STP_NOT_FOUND);
done:
    stp_queue_free(q);
    stp_channel_free(none);
    stp_channel_free(bad);
    stp_channel_free(dup);
    stp_channel_free(ch);
}

/* Writes `text` to a new temporary file whose path goes to `path`. */
static bool temp_file(char *path, size_t n, const char *text) {
    int fd;
    snprintf(path, n, "/tmp/stampede-ctest-XXXXXX");
    fd = mkstemp(path);
    if (fd < 0) return false;
    bool ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
    close(fd);
    return ok;
}

/* An owner's access rules: what they do not grant fails with STP_DENIED, naming the user
 * and the container; a malformed rules file is STP_CONFIG, naming the line. */
static void test_dist_access_denied(void) {
    stp_config *rc = NULL, *cc = NULL;
    stp_runtime *router = NULL, *viewer = NULL;
    stp_channel *own = NULL, *remote = NULL;
    stp_task *task = NULL;
    stp_channel_in *in = NULL;
    stp_channel_out *out = NULL;
    char users[64] = "", rules[64] = "", bad[64] = "", ep[64], app[64];
    int port = free_port();
    CHECK(port > 0);
    snprintf(ep, sizeof ep, "tcp/127.0.0.1:%d", port);
    snprintf(app, sizeof app, "caccess%ld", (long)getpid());
    CHECK(temp_file(users, sizeof users, "viewer:v1ewer\n"));
    CHECK(temp_file(rules, sizeof rules, "viewer read video/**\n"));
    CHECK(temp_file(bad, sizeof bad, "# fine\nviewer fly video/**\n"));
    rc = stp_config_new(STP_ROUTER);
    CHECK(rc != NULL);
    CHECK_ST(stp_config_access_file(rc, bad), STP_CONFIG);
    CHECK_MSG(strstr(stp_last_error(), "line 2") != NULL, "%s", stp_last_error());
    CHECK_OK(stp_config_listen(rc, ep));
    CHECK_OK(stp_config_credentials(rc, "router", "r0uter"));
    CHECK_OK(stp_config_credentials_file(rc, users));
    CHECK_OK(stp_config_access_file(rc, rules));
    CHECK_OK(stp_runtime_join(app, rc, &router));
    cc = stp_config_new(STP_CLIENT);
    CHECK(cc != NULL);
    CHECK_OK(stp_config_connect(cc, ep));
    CHECK_OK(stp_config_credentials(cc, "viewer", "v1ewer"));
    CHECK_OK(stp_runtime_join(app, cc, &viewer));
    CHECK_OK(stp_channel_new(router, "video/frames", 0, 0, &own));
    CHECK_OK(stp_channel_lookup(viewer, "video/frames", 5000, &remote));
    CHECK_OK(stp_task_new(viewer, 0, "viewer", &task));
    CHECK_OK(stp_channel_attach_input(task, remote, &in));
    CHECK_ST(stp_channel_attach_output(task, remote, &out), STP_DENIED);
    CHECK(out == NULL);
    CHECK_MSG(strstr(stp_last_error(), "viewer") != NULL &&
                  strstr(stp_last_error(), "video/frames") != NULL &&
                  strstr(stp_last_error(), "v1ewer") == NULL,
              "%s", stp_last_error());
done:
    stp_channel_in_free(in);
    stp_channel_out_free(out);
    stp_task_free(task);
    stp_channel_free(remote);
    stp_channel_free(own);
    stp_runtime_free(viewer);
    stp_runtime_free(router);
    stp_config_free(rc);
    stp_config_free(cc);
    if (users[0]) unlink(users);
    if (rules[0]) unlink(rules);
    if (bad[0]) unlink(bad);
}

static void test_dist_join_errors(void) {
    stp_config *cfg = NULL;
    stp_runtime *rt = NULL;
    char ep[64];
    double t0, el;
    int port = free_port();
    CHECK(port > 0);
    snprintf(ep, sizeof ep, "tcp/127.0.0.1:%d", port);
    /* A client needs a router to connect to. */
    cfg = stp_config_new(STP_CLIENT);
    CHECK(cfg != NULL);
    CHECK_ST(stp_runtime_join("capp", cfg, &rt), STP_CONFIG);
    CHECK(rt == NULL);
    /* Nothing listens there. */
    CHECK_OK(stp_config_connect(cfg, ep));
    CHECK_OK(stp_config_timeouts(cfg, 5000, 5000, 1000));
    t0 = now_ms();
    CHECK_ST(stp_runtime_join("capp", cfg, &rt), STP_CONNECT);
    el = now_ms() - t0;
    CHECK(rt == NULL);
    printf("# joining a client to nothing took %.0f ms to fail\n", el);
    /* An invalid application name. */
    CHECK_ST(stp_runtime_join("a/b", cfg, &rt), STP_INVALID_NAME);
    stp_config_free(cfg);
    cfg = NULL;
    /* A malformed endpoint. */
    cfg = stp_config_new(STP_PEER);
    CHECK(cfg != NULL);
    CHECK_OK(stp_config_listen(cfg, "not-an-endpoint"));
    CHECK_ST(stp_runtime_join("capp", cfg, &rt), STP_CONFIG);
    CHECK(rt == NULL);
    stp_config_free(cfg);
    cfg = NULL;
    /* TLS files that do not exist are a configuration error, found before connecting. */
    cfg = stp_config_new(STP_PEER);
    CHECK(cfg != NULL);
    CHECK_OK(stp_config_tls(cfg, "/nonexistent/ca.pem", NULL, NULL));
    CHECK_ST(stp_runtime_join("capp", cfg, &rt), STP_CONFIG);
    CHECK(strstr(stp_last_error(), "/nonexistent/ca.pem") != NULL);
    CHECK(rt == NULL);
    stp_config_free(cfg);
    cfg = NULL;
    /* A lease below the minimum. */
    cfg = stp_config_new(STP_PEER);
    CHECK(cfg != NULL);
    CHECK_OK(stp_config_timeouts(cfg, 50, 1000, 1000));
    CHECK_ST(stp_runtime_join("capp", cfg, &rt), STP_CONFIG);
    CHECK(rt == NULL);
    /* A metrics address that cannot be served fails the join as a configuration error. */
    stp_config_free(cfg);
    cfg = stp_config_new(STP_PEER);
    CHECK(cfg != NULL);
    CHECK_OK(stp_config_metrics_listen(cfg, "nowhere"));
    CHECK_ST(stp_runtime_join("capp", cfg, &rt), STP_CONFIG);
    CHECK_MSG(strstr(stp_last_error(), "metrics_listen") != NULL, "\"%s\"", stp_last_error());
    CHECK(rt == NULL);
    CHECK_INVALID(stp_config_metrics_listen(cfg, NULL), "addr");
done:
    stp_runtime_free(rt);
    stp_config_free(cfg);
}

/* The settings beyond endpoints, credentials, TLS and timeouts: good values are taken, and a
 * raw Zenoh setting is checked when it is added. */
static void test_config_settings(void) {
    stp_config *cfg = stp_config_new(STP_PEER);
    CHECK(cfg != NULL);
    CHECK_OK(stp_config_shm_pool(cfg, 0));
    CHECK_OK(stp_config_shm_pool(cfg, (size_t)8 << 20));
    CHECK_OK(stp_config_multicast_scouting(cfg, true));
    CHECK_OK(stp_config_multicast_scouting(cfg, false));
    CHECK_OK(stp_config_queue_prefetch(cfg, 0));
    CHECK_OK(stp_config_queue_prefetch(cfg, UINT32_MAX));
    CHECK_OK(stp_config_spin_rounds(cfg, 0));
    CHECK_OK(stp_config_spin_rounds(cfg, (int64_t)UINT32_MAX));
    CHECK_OK(stp_config_spin_rounds(cfg, -1)); /* the default again */
    CHECK_OK(stp_config_spin_rounds(cfg, INT64_MIN));
    CHECK_INVALID(stp_config_spin_rounds(cfg, (int64_t)UINT32_MAX + 1), "spin_rounds");
    CHECK_INVALID(stp_config_spin_rounds(cfg, INT64_MAX), "spin_rounds");
    CHECK_OK(stp_config_zenoh(cfg, "scouting/multicast/enabled", "false"));
    CHECK_OK(stp_config_zenoh(cfg, "transport/link/tx/keep_alive", "4"));
    CHECK_OK(stp_config_zenoh(cfg, "id", "\"a1b2c3d4e5f60718\""));
    /* Refused when added (the config is left as it was), with the path in the message. */
    CHECK_ST(stp_config_zenoh(cfg, "scouting/multicast/enabled", "{"), STP_CONFIG);
    CHECK_MSG(strstr(stp_last_error(), "scouting/multicast/enabled") != NULL, "\"%s\"",
              stp_last_error());
    CHECK_ST(stp_config_zenoh(cfg, "scouting/multicast/enabled", "\"yes\""), STP_CONFIG);
    CHECK_ST(stp_config_zenoh(cfg, "no/such/setting", "1"), STP_CONFIG);
    CHECK_MSG(strstr(stp_last_error(), "no/such/setting") != NULL, "\"%s\"", stp_last_error());
    CHECK_MSG(strstr(stp_last_error(), ".rs:") == NULL, "\"%s\"", stp_last_error());
done:
    stp_config_free(cfg);
}

/* A peer of its own application, listening on a free loopback port, joins with every one of
 * these settings, a raw Zenoh one among them; the refused settings above never reach it. */
static void test_dist_join_with_settings(void) {
    stp_config *cfg = NULL;
    stp_runtime *rt = NULL;
    char ep[64], app[64];
    int port = free_port();
    CHECK(port > 0);
    snprintf(ep, sizeof ep, "tcp/127.0.0.1:%d", port);
    snprintf(app, sizeof app, "ctestset%ld", (long)getpid());
    cfg = stp_config_new(STP_PEER);
    CHECK(cfg != NULL);
    CHECK_OK(stp_config_listen(cfg, ep));
    CHECK_OK(stp_config_timeouts(cfg, 5000, 5000, 5000));
    CHECK_OK(stp_config_multicast_scouting(cfg, true));
    /* Applied last, so it wins over the setter just above: no multicast in a test. */
    CHECK_OK(stp_config_zenoh(cfg, "scouting/multicast/enabled", "false"));
    CHECK_OK(stp_config_shm_pool(cfg, (size_t)4 << 20));
    CHECK_OK(stp_config_queue_prefetch(cfg, 4));
    CHECK_OK(stp_config_spin_rounds(cfg, 100));
    CHECK_ST(stp_config_zenoh(cfg, "no/such/setting", "1"), STP_CONFIG);
    CHECK_OK(stp_runtime_join(app, cfg, &rt));
    CHECK(rt != NULL && stp_runtime_id(rt)[0] != '\0');
done:
    stp_runtime_free(rt);
    stp_config_free(cfg);
}

/* A client with a queue prefetch of 4 getting from the router's queue of 8 items takes some
 * ahead into a lease, and the next gets are answered from it. */
#define DIST_BASE_PREFETCH 6000
/* ---- Cluster threads from C: tasks by name in the other space, their ends, and the named
 * synchronisation objects and segments. */

static int32_t task_square(stp_cluster_task *task, const uint8_t *args, size_t len, void *user) {
    int64_t x, y;
    (void)user;
    if (len != sizeof x) {
        stp_cluster_task_fail(task, "square wants eight bytes");
        return 1;
    }
    memcpy(&x, args, sizeof x);
    y = x * x;
    return stp_cluster_task_return(task, (const uint8_t *)&y, sizeof y) == STP_OK ? 0 : 1;
}

static int32_t task_fail(stp_cluster_task *task, const uint8_t *args, size_t len, void *user) {
    (void)args, (void)len, (void)user;
    stp_cluster_task_fail(task, "failed on purpose");
    return 1;
}

static int32_t task_until_cancelled(stp_cluster_task *task, const uint8_t *args, size_t len,
                                    void *user) {
    (void)args, (void)len, (void)user;
    while (!stp_cluster_task_cancelled(task)) sleep_ms(5);
    return 1;
}

/* Adds one under mutex "c-count" to word 0 of segment "c-seg", `args[0]` times. */
static int32_t task_locked_add(stp_cluster_task *task, const uint8_t *args, size_t len,
                               void *user) {
    stp_cluster *c = NULL;
    stp_cluster_mutex *m = NULL;
    stp_cluster_segment *s = NULL;
    int32_t rc = 1;
    (void)user;
    if (len != 1 || stp_cluster_task_cluster(task, &c) != STP_OK) goto out;
    if (stp_cluster_mutex_new(c, "c-count", &m) != STP_OK) goto out;
    if (stp_cluster_segment_new(c, "c-seg", 8, &s) != STP_OK) goto out;
    for (int i = 0; i < args[0]; i++) {
        uint64_t v;
        if (stp_cluster_mutex_lock(m, 10000, NULL) != STP_OK) goto out;
        stp_cluster_segment_read(s, 0, (uint8_t *)&v, sizeof v);
        v++;
        stp_cluster_segment_write(s, 0, (const uint8_t *)&v, sizeof v);
        if (stp_cluster_mutex_unlock(m) != STP_OK) goto out;
    }
    rc = 0;
out:
    if (rc) stp_cluster_task_fail(task, stp_last_error());
    stp_cluster_segment_free(s);
    stp_cluster_mutex_free(m);
    stp_cluster_free(c);
    return rc;
}

static void test_dist_cluster(void) {
    stp_cluster *a = NULL, *b = NULL;
    stp_thread *t = NULL, *t2 = NULL;
    stp_item *r = NULL;
    stp_cluster_mutex *m = NULL, *m2 = NULL;
    stp_cluster_cond *cv = NULL;
    stp_cluster_sem *sem = NULL;
    stp_cluster_barrier *bar = NULL;
    stp_cluster_segment *s = NULL;
    int64_t seven = 7, got = 0;
    const void *data;
    size_t n;
    bool flag = true;
    uint64_t count = 0;
    uint8_t adds = 20;
    DIST_SETUP();
    CHECK_OK(stp_cluster_register("c-square", task_square, NULL));
    CHECK_OK(stp_cluster_register("c-fail", task_fail, NULL));
    CHECK_OK(stp_cluster_register("c-until-cancelled", task_until_cancelled, NULL));
    CHECK_OK(stp_cluster_register("c-locked-add", task_locked_add, NULL));
    CHECK_INVALID(stp_cluster_register(NULL, task_fail, NULL), "NULL");
    CHECK_INVALID(stp_cluster_register("x", NULL, NULL), "NULL");
    CHECK_INVALID(stp_cluster_start(NULL, 10000, &a), "NULL");
    CHECK_OK(stp_cluster_start(g_router, 10000, &a));
    CHECK_OK(stp_cluster_start(g_client, 10000, &b));
    CHECK_STR(stp_cluster_id(a), stp_runtime_id(g_router));

    /* A task in the other space (once each knows the other), and how tasks end. */
    for (int i = 0; i < 1000; i++) {
        stp_status st = stp_cluster_spawn(a, "c-square", (const uint8_t *)&seven, sizeof seven,
                                          stp_cluster_id(b), &t);
        if (st != STP_UNAVAILABLE) {
            CHECK_OK(st);
            break;
        }
        sleep_ms(10);
    }
    CHECK(t != NULL);
    CHECK_STR(stp_thread_space(t), stp_cluster_id(b));
    CHECK_OK(stp_thread_join(t, 10000, &r));
    data = stp_item_data(r, &n);
    CHECK(n == sizeof got);
    memcpy(&got, data, sizeof got);
    CHECK_EQ_I64(got, 49);
    stp_item_free(r), r = NULL;
    stp_thread_free(t), t = NULL;
    CHECK_OK(stp_cluster_spawn(a, "c-fail", NULL, 0, stp_cluster_id(b), &t));
    CHECK_ST(stp_thread_join(t, 10000, &r), STP_TASK_FAILED);
    CHECK_MSG(strstr(stp_last_error(), "failed on purpose") != NULL, "%s", stp_last_error());
    stp_thread_free(t), t = NULL;
    CHECK_OK(stp_cluster_spawn(a, "no-such-task", NULL, 0, "here", &t));
    CHECK_ST(stp_thread_join(t, 10000, &r), STP_NOT_FOUND);
    stp_thread_free(t), t = NULL;
    CHECK_OK(stp_cluster_spawn(a, "c-until-cancelled", NULL, 0, stp_cluster_id(b), &t));
    CHECK_ST(stp_thread_join(t, 50, &r), STP_TIMEOUT);
    CHECK_OK(stp_thread_cancel(t));
    CHECK_ST(stp_thread_join(t, 10000, &r), STP_CANCELLED);
    stp_thread_free(t), t = NULL;

    /* Mutual exclusion over a segment, from tasks in both spaces. */
    CHECK_OK(stp_cluster_spawn(a, "c-locked-add", &adds, 1, stp_cluster_id(b), &t));
    CHECK_OK(stp_cluster_spawn(a, "c-locked-add", &adds, 1, "here", &t2));
    CHECK_OK(stp_thread_join(t, 20000, &r));
    stp_item_free(r), r = NULL;
    CHECK_OK(stp_thread_join(t2, 20000, &r));
    stp_item_free(r), r = NULL;
    CHECK_OK(stp_cluster_segment_new(a, "c-seg", 8, &s));
    CHECK_OK(stp_cluster_segment_acquire(s));
    CHECK_OK(stp_cluster_segment_read(s, 0, (uint8_t *)&count, sizeof count));
    CHECK_EQ_U64(count, 40);
    CHECK_INVALID(stp_cluster_segment_read(s, 4, (uint8_t *)&count, sizeof count), "segment");

    /* A held mutex times out elsewhere; a condition wait nobody signals returns unsignalled
     * holding the mutex; a semaphore counts; a barrier of one passes. */
    CHECK_OK(stp_cluster_mutex_new(a, "c-m", &m));
    CHECK_OK(stp_cluster_mutex_new(b, "c-m", &m2));
    CHECK_OK(stp_cluster_mutex_lock(m, 10000, &flag));
    CHECK(!flag);
    CHECK_ST(stp_cluster_mutex_lock(m2, 50, NULL), STP_TIMEOUT);
    CHECK_OK(stp_cluster_cond_new(a, "c-cv", &cv));
    CHECK_OK(stp_cluster_cond_wait(cv, m, 50, &flag));
    CHECK(!flag);
    CHECK_OK(stp_cluster_mutex_unlock(m));
    CHECK_INVALID(stp_cluster_mutex_unlock(m), "hold");
    CHECK_OK(stp_cluster_mutex_lock(m2, 10000, NULL));
    CHECK_OK(stp_cluster_mutex_unlock(m2));
    CHECK_OK(stp_cluster_cond_signal(cv));
    CHECK_OK(stp_cluster_cond_broadcast(cv));
    CHECK_OK(stp_cluster_sem_new(b, "c-sem", 1, &sem));
    CHECK_OK(stp_cluster_sem_wait(sem, 1000));
    CHECK_ST(stp_cluster_sem_wait(sem, 50), STP_TIMEOUT);
    CHECK_OK(stp_cluster_sem_post(sem));
    CHECK_OK(stp_cluster_sem_wait(sem, 1000));
    CHECK_OK(stp_cluster_barrier_new(a, "c-bar", 1, &bar));
    CHECK_EQ_I64(stp_cluster_barrier_rank(bar), 0);
    CHECK_OK(stp_cluster_barrier_wait(bar));
    CHECK_OK(stp_cluster_barrier_wait(bar));
    CHECK_INVALID(stp_cluster_barrier_new(a, "c-bar0", 0, &bar), "barrier");
done:
    stp_item_free(r);
    stp_thread_free(t);
    stp_thread_free(t2);
    stp_cluster_barrier_free(bar);
    stp_cluster_sem_free(sem);
    stp_cluster_cond_free(cv);
    stp_cluster_mutex_free(m);
    stp_cluster_mutex_free(m2);
    stp_cluster_segment_free(s);
    stp_cluster_free(b);
    stp_cluster_free(a);
}

static void test_dist_queue_prefetch(void) {
    const int64_t B = DIST_BASE_PREFETCH;
    stp_config *cfg = NULL;
    stp_runtime *pc = NULL;
    stp_queue *own = NULL, *remote = NULL;
    stp_task *rt_task = NULL, *pc_task = NULL;
    stp_queue_out *out = NULL;
    stp_queue_in *in = NULL;
    stp_item *it = NULL;
    stp_space_stats before, after;
    uint64_t ticket = 0;
    int64_t ts = 0;
    DIST_SETUP();
    cfg = stp_config_new(STP_CLIENT);
    CHECK(cfg != NULL);
    CHECK_OK(stp_config_connect(cfg, g_endpoint));
    CHECK_OK(stp_config_timeouts(cfg, 5000, 5000, 5000));
    CHECK_OK(stp_config_queue_prefetch(cfg, 4));
    CHECK_OK(stp_runtime_join(g_app, cfg, &pc));
    CHECK_OK(stp_queue_new(g_router, "prefetch/jobs", 0, 0, &own));
    CHECK_OK(stp_task_new(g_router, B, NULL, &rt_task));
    CHECK_OK(stp_queue_attach_output(rt_task, own, &out));
    for (int i = 0; i < 8; i++) {
        char s[16];
        snprintf(s, sizeof s, "job %d", i);
        it = text_item(s);
        CHECK(it != NULL);
        CHECK_OK(stp_queue_put(out, B + i, it, 5000, &ticket));
        stp_item_free(it);
        it = NULL;
    }
    CHECK_OK(stp_queue_lookup(pc, "prefetch/jobs", 5000, &remote));
    CHECK_OK(stp_task_new(pc, B, NULL, &pc_task));
    CHECK_OK(stp_queue_attach_input(pc_task, remote, &in));
    CHECK_OK(stp_runtime_space_stats(pc, &before));
    for (int i = 0; i < 8; i++) {
        char s[16];
        snprintf(s, sizeof s, "job %d", i);
        CHECK_OK(stp_queue_get(in, 5000, &ts, &ticket, &it));
        CHECK_EQ_I64(ts, B + i); /* one getter: still oldest first */
        CHECK(is_text(it, s));
        stp_item_free(it);
        it = NULL;
        CHECK_OK(stp_queue_consume(in, ticket));
    }
    CHECK_OK(stp_runtime_space_stats(pc, &after));
    CHECK_MSG(after.leased > before.leased, "leased %llu -> %llu",
              (unsigned long long)before.leased, (unsigned long long)after.leased);
    CHECK_MSG(after.lease_hits > before.lease_hits, "lease hits %llu -> %llu",
              (unsigned long long)before.lease_hits, (unsigned long long)after.lease_hits);
    CHECK_ST(stp_queue_get(in, 0, &ts, &ticket, &it), STP_UNAVAILABLE);
done:
    stp_item_free(it);
    stp_queue_in_free(in);
    stp_queue_out_free(out);
    stp_task_free(pc_task);
    stp_task_free(rt_task);
    stp_queue_free(remote);
    stp_queue_free(own);
    stp_runtime_free(pc);
    stp_config_free(cfg);
}

/* A malformed endpoint is refused before joining, however long joining would wait, with a
 * message that says what is wrong and names no file of the machine the library was built on. */
/* Loans: the client fills an array in memory the connection lends (shared memory, for the
 * router's channel on this host) and puts it without a copy; the router reads it back. */
#define DIST_BASE_LOAN 4000
static void test_dist_loan(void) {
    const int64_t B = DIST_BASE_LOAN;
    stp_channel *own = NULL, *remote = NULL;
    stp_task *rt_task = NULL, *cl_task = NULL;
    stp_channel_in *in = NULL;
    stp_channel_out *out = NULL;
    stp_loan *loan = NULL;
    stp_item *item = NULL, *got = NULL;
    void *data = NULL;
    const size_t shape[3] = {64, 64, 3};
    size_t ndim = 0;
    const size_t *got_shape = NULL;
    const void *bytes = NULL;
    size_t len = 0;
    int64_t ts = 0;
    DIST_SETUP();
    CHECK_OK(stp_channel_new(g_router, "loan/frames", 0, 0, &own));
    CHECK_OK(stp_task_new(g_router, STP_INFINITY, "loan-reader", &rt_task));
    CHECK_OK(stp_channel_attach_input(rt_task, own, &in));
    CHECK_OK(stp_channel_lookup(g_client, "loan/frames", 5000, &remote));
    CHECK_OK(stp_task_new(g_client, B, "loan-writer", &cl_task));
    CHECK_OK(stp_channel_attach_output(cl_task, remote, &out));
    CHECK_OK(stp_item_loan_array(out, STP_U8, 3, shape, &loan, &data));
    CHECK(data != NULL);
    CHECK_MSG(stp_loan_in_place(loan), "lent in plain memory: %s", stp_last_error());
    memset(data, 42, 64 * 64 * 3);
    CHECK_OK(stp_loan_finish(loan, &item));
    loan = NULL; /* released by finish */
    CHECK_OK(stp_channel_put(out, B, item, 0, STP_FOREVER));
    CHECK_OK(stp_channel_flush(out));
    CHECK_OK(stp_channel_get(in, STP_NEXT_UNSEEN, 0, 5000, &ts, &got));
    CHECK(ts == B);
    CHECK_OK(stp_item_shape(got, &ndim, &got_shape));
    CHECK(ndim == 3 && got_shape[0] == 64 && got_shape[1] == 64 && got_shape[2] == 3);
    bytes = stp_item_data(got, &len);
    CHECK(bytes != NULL && len == 64 * 64 * 3);
    CHECK(((const unsigned char *)bytes)[0] == 42 && ((const unsigned char *)bytes)[len - 1] == 42);
    /* An abandoned loan is given back; bad arguments are refused. */
    CHECK_OK(stp_item_loan(out, 5000, &loan, &data));
    stp_loan_free(loan);
    loan = NULL;
    CHECK_ST(stp_item_loan(out, 10, NULL, &data), STP_INVALID_ARGUMENT);
    CHECK_ST(stp_item_loan_array(out, 99, 1, shape, &loan, &data), STP_INVALID_ARGUMENT);
    CHECK_ST(stp_loan_finish(NULL, &item), STP_INVALID_ARGUMENT);
    CHECK(!stp_loan_in_place(NULL));
done:
    stp_loan_free(loan);
    stp_item_free(got);
    stp_item_free(item);
    stp_channel_out_free(out);
    stp_channel_in_free(in);
    stp_task_free(cl_task);
    stp_task_free(rt_task);
    stp_channel_free(remote);
    stp_channel_free(own);
}

/* Puts into another space's full queue and channel give up when their stop flag is set. A
 * queue put waits at the owner and asks the flag between wait slices (250 ms); a channel put
 * with STP_FOREVER returns once sent, and waits here only for a credit (one per slot). */
#define DIST_BASE_INTERRUPT 5000
static void test_dist_put_interruptible(void) {
    const int64_t B = DIST_BASE_INTERRUPT;
    stp_queue *qown = NULL, *qrem = NULL;
    stp_channel *cown = NULL, *crem = NULL;
    stp_task *cl_task = NULL;
    stp_queue_out *qout = NULL;
    stp_channel_out *cout = NULL;
    stp_item *it = NULL;
    stp_queue_stats qs;
    stp_channel_stats cs;
    pthread_t th;
    bool running = false;
    stopper s;
    int32_t stop = 0;
    double t0, el;
    DIST_SETUP();
    CHECK_OK(stp_queue_new(g_router, "int/jobs", 1, 0, &qown));
    CHECK_OK(stp_channel_new(g_router, "int/frames", 1, 0, &cown));
    CHECK_OK(stp_queue_lookup(g_client, "int/jobs", 5000, &qrem));
    CHECK_OK(stp_channel_lookup(g_client, "int/frames", 5000, &crem));
    CHECK_OK(stp_task_new(g_client, B, "client-writer", &cl_task));
    CHECK_OK(stp_queue_attach_output(cl_task, qrem, &qout));
    CHECK_OK(stp_channel_attach_output(cl_task, crem, &cout));
    it = text_item("x");
    CHECK(it != NULL);

    CHECK_OK(stp_queue_put_interruptible(qout, B, it, 5000, &stop, NULL));
    CHECK(start_stopper(&th, &s, &stop, 100));
    running = true;
    t0 = now_ms();
    CHECK_ST(stp_queue_put_interruptible(qout, B + 1, it, STP_FOREVER, &stop, NULL),
             STP_INTERRUPTED);
    el = now_ms() - t0;
    CHECK_MSG(el >= 80.0 && el < 100.0 + 5000, "the remote queue put gave up after %.2f ms", el);
    pthread_join(th, NULL);
    running = false;
    CHECK_OK(stp_queue_get_stats(qown, &qs));
    CHECK_EQ_U64(qs.waiting, 1);
    CHECK_EQ_U64(qs.puts, 1);

    stop = 0;
    CHECK_OK(stp_channel_put_interruptible(cout, B, it, 0, 5000, &stop)); /* stored: full */
    CHECK_OK(stp_channel_put_interruptible(cout, B + 1, it, 0, STP_FOREVER, &stop)); /* sent */
    CHECK(start_stopper(&th, &s, &stop, 100));
    running = true;
    t0 = now_ms();
    CHECK_ST(stp_channel_put_interruptible(cout, B + 2, it, 0, STP_FOREVER, &stop),
             STP_INTERRUPTED);
    el = now_ms() - t0;
    CHECK_MSG(el >= 80.0 && el < 100.0 + 3000, "the remote channel put gave up after %.2f ms",
              el);
    pthread_join(th, NULL);
    running = false;
    CHECK_OK(stp_channel_get_stats(cown, &cs));
    CHECK_EQ_U64(cs.items, 1);
    /* Closing refuses the put still waiting at the owner, so the connection detaches at once. */
    CHECK_OK(stp_channel_close(cown));
    CHECK_ST(stp_channel_flush(cout), STP_CLOSED);
    CHECK_OK(stp_channel_get_stats(cown, &cs));
    CHECK_EQ_U64(cs.puts, 1);
done:
    if (running) pthread_join(th, NULL);
    stp_item_free(it);
    stp_channel_out_free(cout);
    stp_queue_out_free(qout);
    stp_task_free(cl_task);
    stp_channel_free(crem);
    stp_channel_free(cown);
    stp_queue_free(qrem);
    stp_queue_free(qown);
}

static void test_dist_malformed_endpoints(void) {
    static const struct {
        const char *endpoint, *says;
    } bad[] = {
        {"tcp/127.0.0.1", "has no port"},
        {"bogus/127.0.0.1:1", "unknown protocol"},
        {"tcp/127.0.0.1:99999", "out of range"},
        {"not-an-endpoint", "has no protocol"},
    };
    stp_config *cfg = NULL;
    stp_runtime *rt = NULL;
    double t0, el;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (int listen = 0; listen < 2; listen++) {
            cfg = stp_config_new(listen ? STP_PEER : STP_CLIENT);
            CHECK(cfg != NULL);
            if (listen)
                CHECK_OK(stp_config_listen(cfg, bad[i].endpoint));
            else
                CHECK_OK(stp_config_connect(cfg, bad[i].endpoint));
            CHECK_OK(stp_config_timeouts(cfg, 1000, 1000, 30000));
            t0 = now_ms();
            CHECK_ST(stp_runtime_join("capp", cfg, &rt), STP_CONFIG);
            el = now_ms() - t0;
            CHECK(rt == NULL);
            CHECK_MSG(strstr(stp_last_error(), bad[i].says) != NULL, "%s: \"%s\"",
                      bad[i].endpoint, stp_last_error());
            CHECK_MSG(strstr(stp_last_error(), ".rs:") == NULL, "%s: \"%s\"", bad[i].endpoint,
                      stp_last_error());
            CHECK_MSG(el < 5000, "%s refused after %.0f ms", bad[i].endpoint, el);
            stp_config_free(cfg);
            cfg = NULL;
        }
    }
done:
    stp_runtime_free(rt);
    stp_config_free(cfg);
}

/* ------------------------------------------------------------------------------------------ */
/* Runner                                                                                     */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    const char *name;
    void (*fn)(void);
} test_case;

#define T(name) {#name, test_##name}
static const test_case tests[] = {
    T(status_names),
    T(version),
    T(invalid_null_arguments),
    T(null_out_does_not_leak),
    T(last_error_per_thread),
    T(invalid_selector),
    T(channel_exact_oldest_newest),
    T(channel_newest_unseen),
    T(channel_next_unseen),
    T(channel_try_get_neighbors),
    T(channel_get_timeout),
    T(channel_blocking_get_released_by_put),
    T(channel_duplicate_timestamp),
    T(channel_bounded_full),
    T(channel_blocked_put_released_by_gc),
    T(channel_blocked_put_released_by_refcount),
    T(channel_put_interruptible),
    T(channel_consume_gone),
    T(virtual_time_rules),
    T(task_at_floor),
    T(task_free_detaches),
    T(channel_closed),
    T(channel_named_lookup),
    T(lookup_wrong_kind_embedded),
    T(containers_are_local),
    T(zone_mismatch),
    T(too_many_connections),
    T(queue_fifo_tickets),
    T(queue_full),
    T(queue_put_interruptible),
    T(queue_producers_consumers),
    T(queue_tickets_unique),
    T(register_sequence),
    T(items_bytes_text),
    T(items_arrays),
    T(items_array_accessors_wrong_type),
    T(items_typed),
    T(observe_stats_and_explain),
    T(events_arrival_and_garbage),
    T(subscription_free_waits_for_running_calls),
    T(correlator_sets),
    T(pacer_paces_ticks),
    T(pacer_late_actions),
    T(pacer_sync_interruptible),
    T(config_settings),
    T(thread_stream_watermark),
    T(thread_stream_refcount),
    T(dist_join_ids),
    T(dist_router_channel_client_puts),
    T(dist_client_channel_router_gets),
    T(dist_queue),
    T(dist_register),
    T(dist_names),
    T(dist_join_errors),
    T(dist_access_denied),
    T(dist_malformed_endpoints),
    T(dist_loan),
    T(dist_put_interruptible),
    T(dist_join_with_settings),
    T(dist_queue_prefetch),
    T(dist_cluster),
};
#undef T

static void print_summary(void) {
    printf("# summary: passed=%d failed=%d total=%d\n", g_passed, g_failed, g_total);
    fflush(stdout);
}

/* Ends the run if one test hangs, still printing the summary line. */
static void *watchdog_main(void *arg) {
    (void)arg;
    for (;;) {
        sleep_ms(250);
        long long started = atomic_load(&g_test_started_ms);
        if (started > 0 && (long long)now_ms() - started > WATCHDOG_S * 1000LL) {
            pthread_mutex_lock(&g_diag_lock);
            printf("not ok %d - %s\n", g_test_number, g_test_name);
            fputs(g_diag, stdout);
            printf("  # watchdog: the test ran longer than %d s\n", WATCHDOG_S);
            printf("Bail out! %s hung\n", g_test_name);
            g_failed++;
            print_summary();
            _exit(1);
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    size_t n = sizeof tests / sizeof tests[0];
    pthread_t wd;
    double run_start = now_ms();
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (size_t i = 0; i < n; i++)
        if (filter == NULL || strstr(tests[i].name, filter) != NULL) g_total++;
    printf("TAP version 13\n");
    printf("1..%d\n", g_total);
    if (pthread_create(&wd, NULL, watchdog_main, NULL) == 0) pthread_detach(wd);
    for (size_t i = 0; i < n; i++) {
        if (filter != NULL && strstr(tests[i].name, filter) == NULL) continue;
        pthread_mutex_lock(&g_diag_lock);
        g_test_number++;
        g_test_name = tests[i].name;
        g_diag_len = 0;
        g_diag[0] = '\0';
        g_skip[0] = '\0';
        atomic_store(&g_failed_now, 0);
        pthread_mutex_unlock(&g_diag_lock);
        double t0 = now_ms();
        atomic_store(&g_test_started_ms, (long long)t0);
        tests[i].fn();
        double el = now_ms() - t0;
        pthread_mutex_lock(&g_diag_lock);
        atomic_store(&g_test_started_ms, 0);
        if (atomic_load(&g_failed_now)) {
            g_failed++;
            printf("not ok %d - %s\n", g_test_number, tests[i].name);
            fputs(g_diag, stdout);
        } else if (g_skip[0] != '\0') {
            g_passed++;
            g_skipped++;
            printf("ok %d - %s # SKIP %s\n", g_test_number, tests[i].name, g_skip);
        } else {
            g_passed++;
            printf("ok %d - %s\n", g_test_number, tests[i].name);
        }
        printf("# %s: %.0f ms\n", tests[i].name, el);
        pthread_mutex_unlock(&g_diag_lock);
    }
    dist_teardown();
    printf("# total time: %.0f ms\n", now_ms() - run_start);
    if (g_skipped > 0) printf("# skipped: %d (counted as passed)\n", g_skipped);
    print_summary();
    return g_failed == 0 ? 0 : 1;
}
