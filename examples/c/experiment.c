/*
 * D-Stampede's Experiment 2 for the C face: one-way producer-to-consumer latency by payload,
 * with the producer on an end device (a client-mode address space connected to a router over
 * loopback TCP) and the consumer in one of the paper's three places, next to a TCP producer
 * and consumer in C. bench/experiments_bench.py starts these roles as processes on this host
 * and collects the JSON lines they print on stdout.
 *
 * Stampede roles, in application APP. The router owns the channels "exp/data" (the timed
 * payloads) and "exp/ack" (the untimed acknowledgements):
 *
 *   experiment router --app APP [--consume] [schedule] [--shm]
 *       The cluster address space: a Zenoh router on a free loopback port, owning both
 *       channels. Prints {"event":"ready","endpoint":...}. With --consume it also runs the
 *       consumer on the channels it owns (configuration 1: the get is local). It stays until
 *       its standard input closes, then prints the data channel's counters.
 *   experiment cluster-consumer --app APP --connect EP [schedule] [--shm]
 *       Configuration 2: the consumer in a second cluster address space (peer mode).
 *   experiment device-consumer --app APP --connect EP [schedule] [--shm]
 *       Configuration 3: the consumer on another end device (client mode).
 *   experiment device-producer --app APP --connect EP --base TS [schedule] [--shm]
 *       The end device that puts the payloads (client mode), from timestamp TS on at least.
 *
 * TCP roles (loopback, TCP_NODELAY on every socket):
 *
 *   experiment tcp-consumer [schedule]          listens; prints {"event":"ready","port":P}
 *   experiment tcp-relay --connect PORT         connects to PORT, listens, prints its port,
 *                                               forwards bytes both ways (configurations 2, 3)
 *   experiment tcp-producer --connect PORT [schedule]
 *
 * schedule: --sizes 1,1000,10000,35000,55000 --items 1000 --repeats 3
 *
 * Timing: the producer writes its CLOCK_MONOTONIC time in ns into the first 8 bytes of the
 * payload just before the put (or send); the consumer reads the clock as the get (or the read
 * of the whole payload) returns and records the difference. CLOCK_MONOTONIC is one clock for
 * every process of a host. A payload is max(size, 8) bytes, so a 1-byte payload travels as 8.
 * The consumer then acknowledges (a 1-byte item on "exp/ack", or one byte back on the
 * socket), untimed; the producer puts the next payload only once it has the acknowledgement,
 * so puts and gets never overlap. Each size and repeat starts with a warm-up of
 * max(10, items / 10) payloads that are not recorded; the consumer prints one line per size
 * and repeat: {"system","role","size","wire_bytes","repeat","items","p50_us",...}.
 *
 * Shared memory between the address spaces is off unless --shm is given: the payloads then
 * cross loopback TCP links, as they would cross the network between real devices.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "stampede.h"

#define DATA "exp/data"
#define ACK "exp/ack"
#define IO_MS 30000
#define LOOKUP_MS 10000
#define MAX_SIZES 32
#define SHM_POOL ((size_t)64 << 20)

struct opts {
    const char *app;
    const char *connect;
    int consume;
    int shm;
    int64_t base;
    size_t sizes[MAX_SIZES];
    int nsizes;
    long items;
    long repeats;
};

static int usage(void) {
    fprintf(stderr,
            "usage: experiment router|cluster-consumer|device-consumer|device-producer|"
            "tcp-consumer|tcp-relay|tcp-producer [--app APP] [--connect EP|PORT] [--consume]"
            " [--base TS] [--shm] [--sizes a,b,..] [--items N] [--repeats R]\n");
    return 2;
}

static int parse(int argc, char **argv, struct opts *o) {
    static const size_t defaults[] = {1, 1000, 10000, 35000, 55000};
    memset(o, 0, sizeof *o);
    o->nsizes = 5;
    memcpy(o->sizes, defaults, sizeof defaults);
    o->items = 1000;
    o->repeats = 3;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--consume") == 0) {
            o->consume = 1;
        } else if (strcmp(a, "--shm") == 0) {
            o->shm = 1;
        } else if (v == NULL) {
            return -1;
        } else if (strcmp(a, "--app") == 0) {
            o->app = v, i++;
        } else if (strcmp(a, "--connect") == 0) {
            o->connect = v, i++;
        } else if (strcmp(a, "--base") == 0) {
            o->base = strtoll(v, NULL, 10), i++;
        } else if (strcmp(a, "--items") == 0) {
            o->items = strtol(v, NULL, 10), i++;
        } else if (strcmp(a, "--repeats") == 0) {
            o->repeats = strtol(v, NULL, 10), i++;
        } else if (strcmp(a, "--sizes") == 0) {
            o->nsizes = 0;
            for (const char *p = v; *p != '\0';) {
                char *end;
                unsigned long long s = strtoull(p, &end, 10);
                if (end == p || s == 0 || o->nsizes == MAX_SIZES) return -1;
                o->sizes[o->nsizes++] = (size_t)s;
                p = *end == ',' ? end + 1 : end;
            }
            i++;
        } else {
            return -1;
        }
    }
    return o->items > 0 && o->repeats > 0 && o->nsizes > 0 ? 0 : -1;
}

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Bytes on the wire: room for the 8-byte timestamp at least. */
static size_t wire(size_t size) { return size < 8 ? 8 : size; }

static long warmup(long items) { return items / 10 > 10 ? items / 10 : 10; }

static size_t max_wire(const struct opts *o) {
    size_t m = 8;
    for (int i = 0; i < o->nsizes; i++) m = wire(o->sizes[i]) > m ? wire(o->sizes[i]) : m;
    return m;
}

static void emit(const char *line) {
    fputs(line, stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One line of results for a size and repeat; sorts `us`. */
static void report(const char *system, const char *role, size_t size, long repeat, double *us,
                   long n) {
    qsort(us, (size_t)n, sizeof *us, cmp_double);
    double sum = 0;
    for (long i = 0; i < n; i++) sum += us[i];
    double p50 = n % 2 ? us[n / 2] : (us[n / 2 - 1] + us[n / 2]) / 2;
    printf("{\"lang\":\"c\",\"system\":\"%s\",\"role\":\"%s\",\"size\":%zu,\"wire_bytes\":%zu,"
           "\"repeat\":%ld,\"items\":%ld,\"p50_us\":%.2f,\"p10_us\":%.2f,\"p90_us\":%.2f,"
           "\"min_us\":%.2f,\"max_us\":%.2f,\"mean_us\":%.2f}\n",
           system, role, size, wire(size), repeat, n, p50, us[(n - 1) / 10],
           us[(n - 1) * 9 / 10], us[0], us[n - 1], sum / (double)n);
    fflush(stdout);
    fprintf(stderr, "c %s %s %zu B repeat %ld: p50 %.1f us\n", system, role, size, repeat, p50);
}

static int fail(const char *what, stp_status st) {
    fprintf(stderr, "experiment: %s: %s: %s\n", what, stp_status_name(st), stp_last_error());
    return 1;
}

static int sys_fail(const char *what) {
    fprintf(stderr, "experiment: %s: %s\n", what, strerror(errno));
    return 1;
}

/* ---- Stampede ---------------------------------------------------------------------------- */

static stp_status join(const char *app, int mode, const char *listen, const char *connect,
                       int shm, stp_runtime **rt) {
    stp_config *cfg = stp_config_new(mode);
    stp_status st = cfg == NULL ? STP_CONFIG : STP_OK;
    if (st == STP_OK && listen != NULL) st = stp_config_listen(cfg, listen);
    if (st == STP_OK && connect != NULL) st = stp_config_connect(cfg, connect);
    if (st == STP_OK) st = stp_config_shm_pool(cfg, shm ? SHM_POOL : 0);
    if (st == STP_OK) st = stp_runtime_join(app, cfg, rt);
    stp_config_free(cfg);
    return st;
}

/* A free loopback port: bound, read and released (another process may take it before Zenoh
 * binds it, hence the caller's retries). */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

/*
 * The consumer: a task that gets every payload in order (NEXT_UNSEEN), reads the clock,
 * consumes the payload and acknowledges it with a 1-byte item at the same timestamp, then
 * moves its virtual time past it. The task starts at the zone's floor (STP_AT_FLOOR), which
 * it reports as the producer's base: nothing the producer puts can fall below it. `ready`
 * holds the fields that come before "base" in the ready line.
 */
static int consume(stp_runtime *rt, stp_channel *data, stp_channel *ack, const struct opts *o,
                   const char *role, const char *ready) {
    stp_task *task = NULL;
    stp_channel_in *in = NULL;
    stp_channel_out *out = NULL;
    stp_item *token = NULL;
    long warm = warmup(o->items);
    double *us = calloc((size_t)o->items, sizeof *us);
    int rc = 1;
    stp_status st;
    char line[512];
    if (us == NULL) return sys_fail("calloc");
    if ((st = stp_task_new(rt, STP_AT_FLOOR, role, &task)) != STP_OK) { rc = fail("task", st); goto done; }
    if ((st = stp_channel_attach_input(task, data, &in)) != STP_OK ||
        (st = stp_channel_attach_output(task, ack, &out)) != STP_OK) { rc = fail("attach", st); goto done; }
    if ((st = stp_item_bytes("!", 1, &token)) != STP_OK) { rc = fail("ack item", st); goto done; }
    snprintf(line, sizeof line, "{\"event\":\"ready\",%s\"base\":%" PRId64 "}", ready,
             stp_task_virtual_time(task));
    emit(line);
    int64_t last = INT64_MIN;
    for (int s = 0; s < o->nsizes; s++) {
        for (long r = 0; r < o->repeats; r++) {
            for (long i = 0; i < warm + o->items; i++) {
                int64_t ts, sent;
                size_t len;
                stp_item *item = NULL;
                if ((st = stp_channel_get(in, STP_NEXT_UNSEEN, 0, IO_MS, &ts, &item)) != STP_OK) {
                    rc = fail("get", st);
                    goto done;
                }
                int64_t got = now_ns();
                const void *bytes = stp_item_data(item, &len);
                memcpy(&sent, bytes, sizeof sent);
                stp_item_free(item);
                if (len != wire(o->sizes[s]) || ts <= last) {
                    fprintf(stderr, "experiment: got %zu bytes at %" PRId64 ", not %zu after %" PRId64 "\n",
                            len, ts, wire(o->sizes[s]), last);
                    goto done;
                }
                last = ts;
                if (i >= warm) us[i - warm] = (double)(got - sent) / 1e3;
                if ((st = stp_channel_consume(in, ts)) != STP_OK) { rc = fail("consume", st); goto done; }
                if ((st = stp_channel_put(out, ts, token, 0, STP_FOREVER)) != STP_OK) { rc = fail("ack", st); goto done; }
                if ((st = stp_task_set_virtual_time(task, ts + 1)) != STP_OK) { rc = fail("advance", st); goto done; }
            }
            report("stampede", role, o->sizes[s], r, us, o->items);
        }
    }
    /* The last acknowledgement is stored before this space may leave. */
    if ((st = stp_channel_flush(out)) != STP_OK) { rc = fail("flush", st); goto done; }
    rc = 0;
done:
    stp_item_free(token);
    stp_channel_out_free(out);
    stp_channel_in_free(in);
    stp_task_free(task);
    free(us);
    return rc;
}

static int router(const struct opts *o) {
    stp_runtime *rt = NULL;
    stp_channel *data = NULL, *ack = NULL;
    char endpoint[64], fields[128];
    stp_status st = STP_CONNECT;
    int rc = 1;
    for (int attempt = 0; attempt < 5 && st != STP_OK; attempt++) {
        snprintf(endpoint, sizeof endpoint, "tcp/127.0.0.1:%d", free_port());
        st = join(o->app, STP_ROUTER, endpoint, NULL, o->shm, &rt);
    }
    if (st != STP_OK) return fail("join as a router", st);
    if ((st = stp_channel_new(rt, DATA, 0, 0, &data)) != STP_OK ||
        (st = stp_channel_new(rt, ACK, 0, 0, &ack)) != STP_OK) { rc = fail("channels", st); goto done; }
    snprintf(fields, sizeof fields, "\"endpoint\":\"%s\",", endpoint);
    if (o->consume) {
        if (consume(rt, data, ack, o, "router-consumer", fields) != 0) goto done;
    } else {
        snprintf(fields, sizeof fields, "{\"event\":\"ready\",\"endpoint\":\"%s\"}", endpoint);
        emit(fields);
    }
    /* The channels must outlive the other processes' last operations. */
    while (getchar() != EOF) {
    }
    stp_channel_stats s;
    if ((st = stp_channel_get_stats(data, &s)) != STP_OK) { rc = fail("stats", st); goto done; }
    printf("{\"event\":\"stats\",\"puts\":%" PRIu64 ",\"gets\":%" PRIu64 ",\"reclaimed\":%" PRIu64
           ",\"items\":%" PRIu64 "}\n", s.puts, s.gets, s.reclaimed, s.items);
    fflush(stdout);
    rc = 0;
done:
    stp_channel_free(ack);
    stp_channel_free(data);
    stp_runtime_free(rt);
    return rc;
}

/* A consumer in its own address space: peer (configuration 2) or client (configuration 3). */
static int remote_consumer(const struct opts *o, int mode, const char *role) {
    stp_runtime *rt = NULL;
    stp_channel *data = NULL, *ack = NULL;
    stp_status st;
    int rc = 1;
    /* A peer listens for other peers; on loopback only, like everything here. */
    const char *listen = mode == STP_PEER ? "tcp/127.0.0.1:0" : NULL;
    if (o->connect == NULL) return usage();
    if ((st = join(o->app, mode, listen, o->connect, o->shm, &rt)) != STP_OK) return fail("join", st);
    if ((st = stp_channel_lookup(rt, DATA, LOOKUP_MS, &data)) != STP_OK ||
        (st = stp_channel_lookup(rt, ACK, LOOKUP_MS, &ack)) != STP_OK) { rc = fail("lookup", st); goto done; }
    rc = consume(rt, data, ack, o, role, "");
done:
    stp_channel_free(ack);
    stp_channel_free(data);
    stp_runtime_free(rt);
    return rc;
}

/*
 * The end device that produces: puts each payload at the next timestamp, waits for its
 * acknowledgement, consumes it, and only then moves its virtual time past the payload and
 * puts the next one. Its task starts at the zone's floor, raised to the consumer's base.
 */
static int producer(const struct opts *o) {
    stp_runtime *rt = NULL;
    stp_channel *data = NULL, *ack = NULL;
    stp_task *task = NULL;
    stp_channel_out *out = NULL;
    stp_channel_in *in = NULL;
    unsigned char *buf = NULL;
    long warm = warmup(o->items), sent = 0;
    stp_status st;
    int rc = 1;
    if (o->connect == NULL) return usage();
    if ((st = join(o->app, STP_CLIENT, NULL, o->connect, o->shm, &rt)) != STP_OK) return fail("join", st);
    if ((st = stp_channel_lookup(rt, DATA, LOOKUP_MS, &data)) != STP_OK ||
        (st = stp_channel_lookup(rt, ACK, LOOKUP_MS, &ack)) != STP_OK) { rc = fail("lookup", st); goto done; }
    if ((st = stp_task_new(rt, STP_AT_FLOOR, "device-producer", &task)) != STP_OK) { rc = fail("task", st); goto done; }
    int64_t ts = stp_task_virtual_time(task);
    if (ts < o->base) {
        ts = o->base;
        if ((st = stp_task_set_virtual_time(task, ts)) != STP_OK) { rc = fail("base", st); goto done; }
    }
    if ((st = stp_channel_attach_output(task, data, &out)) != STP_OK ||
        (st = stp_channel_attach_input(task, ack, &in)) != STP_OK) { rc = fail("attach", st); goto done; }
    size_t cap = max_wire(o);
    if ((buf = malloc(cap)) == NULL) { rc = sys_fail("malloc"); goto done; }
    for (size_t i = 0; i < cap; i++) buf[i] = (unsigned char)i;
    for (int s = 0; s < o->nsizes; s++) {
        for (long r = 0; r < o->repeats; r++) {
            for (long i = 0; i < warm + o->items; i++, ts++) {
                stp_item *item = NULL;
                int64_t got;
                int64_t t0 = now_ns();
                memcpy(buf, &t0, sizeof t0);
                if ((st = stp_item_bytes(buf, wire(o->sizes[s]), &item)) != STP_OK) { rc = fail("item", st); goto done; }
                st = stp_channel_put(out, ts, item, 0, STP_FOREVER);
                stp_item_free(item);
                if (st != STP_OK) { rc = fail("put", st); goto done; }
                if ((st = stp_channel_get(in, STP_NEXT_UNSEEN, 0, IO_MS, &got, &item)) != STP_OK) {
                    rc = fail("get the acknowledgement", st);
                    goto done;
                }
                stp_item_free(item);
                if (got != ts) {
                    fprintf(stderr, "experiment: acknowledged %" PRId64 ", not %" PRId64 "\n", got, ts);
                    goto done;
                }
                if ((st = stp_channel_consume(in, got)) != STP_OK) { rc = fail("consume", st); goto done; }
                if ((st = stp_task_set_virtual_time(task, ts + 1)) != STP_OK) { rc = fail("advance", st); goto done; }
                sent++;
            }
        }
    }
    printf("{\"event\":\"done\",\"sent\":%ld}\n", sent);
    fflush(stdout);
    rc = 0;
done:
    free(buf);
    stp_channel_in_free(in);
    stp_channel_out_free(out);
    stp_task_free(task);
    stp_channel_free(ack);
    stp_channel_free(data);
    stp_runtime_free(rt);
    return rc;
}

/* ---- TCP --------------------------------------------------------------------------------- */

static void nodelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* A listening socket on a loopback port the system picks; `*port` receives it. */
static int listen_loopback(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0) return -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 1) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

static int accept_one(int server) {
    int fd = accept(server, NULL, NULL);
    if (fd >= 0) nodelay(fd);
    return fd;
}

static int connect_loopback(const char *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                            .sin_port = htons((uint16_t)atoi(port))};
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    nodelay(fd);
    return fd;
}

static int write_full(int fd, const void *p, size_t n) {
    const unsigned char *b = p;
    while (n > 0) {
        ssize_t k = write(fd, b, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        b += k, n -= (size_t)k;
    }
    return 0;
}

static int read_full(int fd, void *p, size_t n) {
    unsigned char *b = p;
    while (n > 0) {
        ssize_t k = read(fd, b, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        b += k, n -= (size_t)k;
    }
    return 0;
}

static int tcp_consumer(const struct opts *o) {
    int port, server = listen_loopback(&port), fd = -1, rc = 1;
    long warm = warmup(o->items);
    double *us = calloc((size_t)o->items, sizeof *us);
    unsigned char *buf = malloc(max_wire(o));
    char line[64];
    if (server < 0 || us == NULL || buf == NULL) { rc = sys_fail("listen"); goto done; }
    snprintf(line, sizeof line, "{\"event\":\"ready\",\"port\":%d}", port);
    emit(line);
    if ((fd = accept_one(server)) < 0) { rc = sys_fail("accept"); goto done; }
    for (int s = 0; s < o->nsizes; s++) {
        for (long r = 0; r < o->repeats; r++) {
            for (long i = 0; i < warm + o->items; i++) {
                int64_t sent;
                if (read_full(fd, buf, wire(o->sizes[s])) != 0) { rc = sys_fail("read"); goto done; }
                int64_t got = now_ns();
                memcpy(&sent, buf, sizeof sent);
                if (i >= warm) us[i - warm] = (double)(got - sent) / 1e3;
                if (write_full(fd, "!", 1) != 0) { rc = sys_fail("ack"); goto done; }
            }
            report("tcp", "tcp-consumer", o->sizes[s], r, us, o->items);
        }
    }
    rc = 0;
done:
    if (fd >= 0) close(fd);
    if (server >= 0) close(server);
    free(buf);
    free(us);
    return rc;
}

static int tcp_producer(const struct opts *o) {
    long warm = warmup(o->items), sent = 0;
    size_t cap = max_wire(o);
    unsigned char *buf = malloc(cap), ack;
    int fd = -1, rc = 1;
    if (o->connect == NULL) { free(buf); return usage(); }
    if (buf == NULL || (fd = connect_loopback(o->connect)) < 0) { rc = sys_fail("connect"); goto done; }
    for (size_t i = 0; i < cap; i++) buf[i] = (unsigned char)i;
    for (int s = 0; s < o->nsizes; s++) {
        for (long r = 0; r < o->repeats; r++) {
            for (long i = 0; i < warm + o->items; i++) {
                int64_t t0 = now_ns();
                memcpy(buf, &t0, sizeof t0);
                if (write_full(fd, buf, wire(o->sizes[s])) != 0) { rc = sys_fail("write"); goto done; }
                if (read_full(fd, &ack, 1) != 0) { rc = sys_fail("read the acknowledgement"); goto done; }
                sent++;
            }
        }
    }
    printf("{\"event\":\"done\",\"sent\":%ld}\n", sent);
    fflush(stdout);
    rc = 0;
done:
    if (fd >= 0) close(fd);
    free(buf);
    return rc;
}

/* Forwards whatever arrives on either connection to the other, as it arrives (64 KiB reads),
 * until one of them closes. */
static int tcp_relay(const struct opts *o) {
    static unsigned char buf[64 << 10];
    int port, server = -1, up = -1, down = -1, rc = 1;
    char line[64];
    if (o->connect == NULL) return usage();
    signal(SIGPIPE, SIG_IGN);
    if ((down = connect_loopback(o->connect)) < 0) { rc = sys_fail("connect"); goto done; }
    if ((server = listen_loopback(&port)) < 0) { rc = sys_fail("listen"); goto done; }
    snprintf(line, sizeof line, "{\"event\":\"ready\",\"port\":%d}", port);
    emit(line);
    if ((up = accept_one(server)) < 0) { rc = sys_fail("accept"); goto done; }
    struct pollfd p[2] = {{.fd = up, .events = POLLIN}, {.fd = down, .events = POLLIN}};
    for (;;) {
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR) continue;
            rc = sys_fail("poll");
            goto done;
        }
        for (int k = 0; k < 2; k++) {
            if (p[k].revents == 0) continue;
            ssize_t n = read(p[k].fd, buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                rc = 0; /* a side closed: the run is over */
                goto done;
            }
            if (write_full(p[1 - k].fd, buf, (size_t)n) != 0) { rc = sys_fail("forward"); goto done; }
        }
    }
done:
    if (up >= 0) close(up);
    if (down >= 0) close(down);
    if (server >= 0) close(server);
    return rc;
}

int main(int argc, char **argv) {
    struct opts o;
    if (argc < 2 || parse(argc, argv, &o) != 0) return usage();
    const char *role = argv[1];
    int stampede = strncmp(role, "tcp-", 4) != 0;
    if (stampede && o.app == NULL) return usage();
    if (strcmp(role, "router") == 0) return router(&o);
    if (strcmp(role, "cluster-consumer") == 0) return remote_consumer(&o, STP_PEER, role);
    if (strcmp(role, "device-consumer") == 0) return remote_consumer(&o, STP_CLIENT, role);
    if (strcmp(role, "device-producer") == 0) return producer(&o);
    if (strcmp(role, "tcp-consumer") == 0) return tcp_consumer(&o);
    if (strcmp(role, "tcp-producer") == 0) return tcp_producer(&o);
    if (strcmp(role, "tcp-relay") == 0) return tcp_relay(&o);
    return usage();
}
