/* The C side of the cross-language item test (java/examples InteropTest).
 *
 * Joins the application as a client of argv[2], reads the array of every dtype the Java side
 * put on "interop/java" (timestamp = the dtype's code) and checks its dtype, shape and bytes,
 * then puts its own arrays of every dtype on "interop/c", which it owns. Prints "OK" and
 * stays until its standard input closes, so that its channel outlives the reads.
 *
 * usage: interop_peer <app> <endpoint>
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "stampede.h"

#define N 6
static const size_t SHAPE[2] = {2, 3};
static const size_t SIZES[12] = {1, 1, 1, 2, 2, 4, 4, 8, 8, 2, 4, 8};

/* IEEE half of a small multiple of 1/4 (exact, normal or zero). */
static uint16_t half(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if (f == 0.0f) return 0;
    uint32_t sign = (x >> 16) & 0x8000u;
    int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
    uint32_t mant = (x >> 13) & 0x3ffu;
    return (uint16_t)(sign | ((uint32_t)exp << 10) | mant);
}

/* Element i is (37 i + 5) mod 100; booleans take it mod 2, floats divide it by 4. */
static void expected(int code, unsigned char *out) {
    for (int i = 0; i < N; i++) {
        int64_t v = (i * 37 + 5) % 100;
        unsigned char *p = out + (size_t)i * SIZES[code];
        if (code == STP_BOOL) {
            p[0] = (unsigned char)(v % 2);
        } else if (code == STP_F16) {
            uint16_t h = half((float)v / 4.0f);
            memcpy(p, &h, 2);
        } else if (code == STP_F32) {
            float f = (float)v / 4.0f;
            memcpy(p, &f, 4);
        } else if (code == STP_F64) {
            double d = (double)v / 4.0;
            memcpy(p, &d, 8);
        } else {
            memcpy(p, &v, SIZES[code]); /* little-endian: the low bytes */
        }
    }
}

static int fail(const char *what) {
    printf("FAIL %s: %s\n", what, stp_last_error());
    fflush(stdout);
    return 1;
}

int main(int argc, char **argv) {
    stp_runtime *rt = NULL;
    stp_channel *theirs = NULL, *mine = NULL;
    stp_task *task = NULL;
    stp_channel_in *in = NULL;
    stp_channel_out *out = NULL;
    int rc = 1;
    if (argc != 3) {
        fprintf(stderr, "usage: interop_peer <app> <endpoint>\n");
        return 2;
    }
    stp_config *cfg = stp_config_new(STP_CLIENT);
    if (stp_config_connect(cfg, argv[2]) != STP_OK || stp_runtime_join(argv[1], cfg, &rt) != STP_OK) {
        stp_config_free(cfg);
        return fail("join");
    }
    stp_config_free(cfg);
    if (stp_channel_lookup(rt, "interop/java", 10000, &theirs) != STP_OK) { rc = fail("lookup"); goto done; }
    if (stp_channel_new(rt, "interop/c", 0, 0, &mine) != STP_OK) { rc = fail("channel"); goto done; }
    if (stp_task_new(rt, 0, "c-peer", &task) != STP_OK) { rc = fail("task"); goto done; }
    if (stp_channel_attach_input(task, theirs, &in) != STP_OK ||
        stp_channel_attach_output(task, mine, &out) != STP_OK) { rc = fail("attach"); goto done; }
    for (int code = 0; code < 12; code++) {
        unsigned char want[N * 8];
        int64_t ts;
        stp_item *item = NULL;
        stp_dtype dtype;
        size_t ndim, len;
        const size_t *shape;
        if (stp_channel_get(in, STP_EXACT, code, 10000, &ts, &item) != STP_OK) { rc = fail("get"); goto done; }
        expected(code, want);
        const void *data = stp_item_data(item, &len);
        int ok = stp_item_kind_of(item) == STP_ITEM_ARRAY &&
                 stp_item_dtype(item, &dtype) == STP_OK && (int)dtype == code &&
                 stp_item_shape(item, &ndim, &shape) == STP_OK && ndim == 2 &&
                 shape[0] == SHAPE[0] && shape[1] == SHAPE[1] && len == N * SIZES[code] &&
                 memcmp(data, want, len) == 0;
        stp_item_free(item);
        if (!ok) {
            printf("FAIL dtype %d: the array differs\n", code);
            fflush(stdout);
            goto done;
        }
    }
    for (int code = 0; code < 12; code++) {
        unsigned char data[N * 8];
        stp_item *item = NULL;
        expected(code, data);
        if (stp_item_array(code, 2, SHAPE, data, N * SIZES[code], &item) != STP_OK) { rc = fail("array"); goto done; }
        stp_status s = stp_channel_put(out, code, item, 0, STP_FOREVER);
        stp_item_free(item);
        if (s != STP_OK) { rc = fail("put"); goto done; }
    }
    printf("OK\n");
    fflush(stdout);
    while (getchar() != EOF) {
    }
    rc = 0;
done:
    stp_channel_out_free(out);
    stp_channel_in_free(in);
    stp_task_free(task);
    stp_channel_free(mine);
    stp_channel_free(theirs);
    stp_runtime_free(rt);
    return rc;
}
