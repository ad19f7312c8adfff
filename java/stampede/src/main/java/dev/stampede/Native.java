package dev.stampede;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BOOLEAN;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The C library's functions as method handles, each behind a typed wrapper so callers never
 * see {@code invokeExact}. Layouts follow {@code stampede.h}: {@code size_t} and pointers are
 * 64 bits, enums and {@code stp_status} are {@code int}. Calls that never block, never call
 * back and return quickly are linked {@code critical} (no thread-state transition).
 */
final class Native {
    private Native() {}

    static final Linker LINKER = Linker.nativeLinker();
    static final SymbolLookup LIB = load();

    /** The library named by {@code -Dstampede.library}, {@code STAMPEDE_LIBRARY}, or on
     * {@code java.library.path}. */
    private static SymbolLookup load() {
        String path = System.getProperty("stampede.library");
        if (path == null || path.isEmpty()) {
            path = System.getenv("STAMPEDE_LIBRARY");
        }
        if (path != null && !path.isEmpty()) {
            Path p = Path.of(path);
            if (!Files.exists(p)) {
                throw new UnsatisfiedLinkError("the Stampede library " + p + " does not exist");
            }
            return SymbolLookup.libraryLookup(p, Arena.global());
        }
        System.loadLibrary("stampede_c");
        return SymbolLookup.loaderLookup();
    }

    private static MethodHandle fn(String name, MemoryLayout ret, MemoryLayout... args) {
        return link(name, false, ret, args);
    }

    private static MethodHandle quick(String name, MemoryLayout ret, MemoryLayout... args) {
        return link(name, true, ret, args);
    }

    /** A quick call that may also be passed heap segments (Java arrays), copied from in place. */
    private static MethodHandle heap(String name, MemoryLayout ret, MemoryLayout... args) {
        MemorySegment at = LIB.find(name)
                .orElseThrow(() -> new UnsatisfiedLinkError("the Stampede library lacks " + name));
        return LINKER.downcallHandle(at, FunctionDescriptor.of(ret, args),
                Linker.Option.critical(true));
    }

    private static MethodHandle link(String name, boolean critical, MemoryLayout ret,
                                     MemoryLayout... args) {
        MemorySegment at = LIB.find(name)
                .orElseThrow(() -> new UnsatisfiedLinkError("the Stampede library lacks " + name));
        FunctionDescriptor d = ret == null ? FunctionDescriptor.ofVoid(args)
                : FunctionDescriptor.of(ret, args);
        return critical ? LINKER.downcallHandle(at, d, Linker.Option.critical(false))
                : LINKER.downcallHandle(at, d);
    }

    static RuntimeException fail(Throwable t) {
        if (t instanceof RuntimeException r) {
            return r;
        }
        if (t instanceof Error e) {
            throw e;
        }
        return new IllegalStateException(t);
    }

    private static final MemoryLayout P = ADDRESS;
    private static final MemoryLayout I = JAVA_INT;
    private static final MemoryLayout L = JAVA_LONG;

    // Errors and names.
    private static final MethodHandle LAST_ERROR = quick("stp_last_error", P);
    private static final MethodHandle STATUS_NAME = quick("stp_status_name", P, I);
    private static final MethodHandle VERSION = quick("stp_version", P);
    private static final MethodHandle LAST_NEIGHBORS =
            quick("stp_last_neighbors", Layouts.NEIGHBORS);

    static String lastError() {
        try {
            return cString((MemorySegment) LAST_ERROR.invokeExact());
        } catch (Throwable t) {
            throw fail(t);
        }
    }

    static String statusName(int status) {
        try {
            return cString((MemorySegment) STATUS_NAME.invokeExact(status));
        } catch (Throwable t) {
            throw fail(t);
        }
    }

    static String version() {
        try {
            return cString((MemorySegment) VERSION.invokeExact());
        } catch (Throwable t) {
            throw fail(t);
        }
    }

    /** The neighbours of the last failed get on this thread, as {@code {below, above}}
     * with {@code null} where there is none. */
    static Long[] lastNeighbors() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment n = (MemorySegment) LAST_NEIGHBORS.invokeExact((java.lang.foreign.SegmentAllocator) a);
            Long below = n.get(JAVA_BOOLEAN, Layouts.off(Layouts.NEIGHBORS, "has_below"))
                    ? n.get(JAVA_LONG, Layouts.off(Layouts.NEIGHBORS, "below")) : null;
            Long above = n.get(JAVA_BOOLEAN, Layouts.off(Layouts.NEIGHBORS, "has_above"))
                    ? n.get(JAVA_LONG, Layouts.off(Layouts.NEIGHBORS, "above")) : null;
            return new Long[] {below, above};
        } catch (Throwable t) {
            throw fail(t);
        }
    }

    static String cString(MemorySegment p) {
        return p.equals(MemorySegment.NULL) ? "" : p.reinterpret(Long.MAX_VALUE).getString(0);
    }

    // Items.
    static final MethodHandle ITEM_BYTES = heap("stp_item_bytes", I, P, L, P);
    static final MethodHandle ITEM_TEXT = heap("stp_item_text", I, P, P);
    static final MethodHandle ITEM_ARRAY = heap("stp_item_array", I, I, L, P, P, L, P);
    static final MethodHandle ITEM_TYPED = heap("stp_item_typed", I, P, P, L, P);
    static final MethodHandle TYPE_TAG = quick("stp_type_tag", L, P);
    static final MethodHandle ITEM_CLONE = quick("stp_item_clone", P, P);
    static final MethodHandle ITEM_KIND = quick("stp_item_kind_of", I, P);
    static final MethodHandle ITEM_TAG = quick("stp_item_tag", L, P);
    static final MethodHandle ITEM_DATA = quick("stp_item_data", P, P, P);
    static final MethodHandle ITEM_DTYPE = quick("stp_item_dtype", I, P, P);
    static final MethodHandle ITEM_SHAPE = quick("stp_item_shape", I, P, P, P);
    static final MethodHandle ITEM_FREE = fn("stp_item_free", null, P);

    // Loans.
    static final MethodHandle ITEM_LOAN = fn("stp_item_loan", I, P, L, P, P);
    static final MethodHandle ITEM_LOAN_ARRAY = fn("stp_item_loan_array", I, P, I, L, P, P, P);
    static final MethodHandle LOAN_IN_PLACE = quick("stp_loan_in_place", JAVA_BOOLEAN, P);
    static final MethodHandle LOAN_FINISH = fn("stp_loan_finish", I, P, P);
    static final MethodHandle LOAN_FREE = fn("stp_loan_free", null, P);

    // Runtimes and configurations.
    static final MethodHandle RUNTIME_NEW = fn("stp_runtime_new", I, P);
    static final MethodHandle RUNTIME_JOIN = fn("stp_runtime_join", I, P, P, P);
    static final MethodHandle RUNTIME_ID = quick("stp_runtime_id", P, P);
    static final MethodHandle RUNTIME_WAIT_FOR = fn("stp_runtime_wait_for", I, P, P, L);
    static final MethodHandle RUNTIME_FREE = fn("stp_runtime_free", null, P);
    static final MethodHandle RUNTIME_FLOOR = fn("stp_runtime_floor", L, P, I);
    static final MethodHandle RUNTIME_GC_STATS = fn("stp_runtime_gc_stats", I, P, I, P);
    static final MethodHandle RUNTIME_COLLECT = fn("stp_runtime_collect", I, P);
    static final MethodHandle RUNTIME_SPACE_STATS = fn("stp_runtime_space_stats", I, P, P);
    static final MethodHandle RUNTIME_EXPLAIN = fn("stp_runtime_explain", I, P, I, P, P, L, P);
    static final MethodHandle STRING_FREE = fn("stp_string_free", null, P);
    static final MethodHandle CONFIG_NEW = fn("stp_config_new", P, I);
    static final MethodHandle CONFIG_LISTEN = fn("stp_config_listen", I, P, P);
    static final MethodHandle CONFIG_CONNECT = fn("stp_config_connect", I, P, P);
    static final MethodHandle CONFIG_CREDENTIALS = fn("stp_config_credentials", I, P, P, P);
    static final MethodHandle CONFIG_CREDENTIALS_FILE = fn("stp_config_credentials_file", I, P, P);
    static final MethodHandle CONFIG_ACCESS_FILE = fn("stp_config_access_file", I, P, P);
    static final MethodHandle CONFIG_TLS = fn("stp_config_tls", I, P, P, P, P);
    static final MethodHandle CONFIG_TIMEOUTS = fn("stp_config_timeouts", I, P, L, L, L);
    static final MethodHandle CONFIG_SHM_POOL = fn("stp_config_shm_pool", I, P, L);
    static final MethodHandle CONFIG_QUOTAS = fn("stp_config_quotas", I, P, L, L, L);
    static final MethodHandle CONFIG_MULTICAST = fn("stp_config_multicast_scouting", I, P,
            JAVA_BOOLEAN);
    static final MethodHandle CONFIG_PREFETCH = fn("stp_config_queue_prefetch", I, P, I);
    static final MethodHandle CONFIG_SPIN = fn("stp_config_spin_rounds", I, P, L);
    static final MethodHandle CONFIG_ZENOH = fn("stp_config_zenoh", I, P, P, P);
    static final MethodHandle CONFIG_FREE = fn("stp_config_free", null, P);

    // Containers: new, lookup, close, free, is_local, stats, hooks; index by Kind.
    static final MethodHandle[] CONTAINER_NEW = {
        fn("stp_channel_new", I, P, P, L, I, P),
        fn("stp_queue_new", I, P, P, L, I, P),
        fn("stp_register_new", I, P, P, L, I, P),
    };
    static final MethodHandle[] CONTAINER_LOOKUP = {
        fn("stp_channel_lookup", I, P, P, L, P),
        fn("stp_queue_lookup", I, P, P, L, P),
        fn("stp_register_lookup", I, P, P, L, P),
    };
    static final MethodHandle[] CONTAINER_CLOSE = {
        fn("stp_channel_close", I, P),
        fn("stp_queue_close", I, P),
        fn("stp_register_close", I, P),
    };
    static final MethodHandle[] CONTAINER_FREE = {
        fn("stp_channel_free", null, P),
        fn("stp_queue_free", null, P),
        fn("stp_register_free", null, P),
    };
    static final MethodHandle[] CONTAINER_IS_LOCAL = {
        quick("stp_channel_is_local", JAVA_BOOLEAN, P),
        quick("stp_queue_is_local", JAVA_BOOLEAN, P),
        quick("stp_register_is_local", JAVA_BOOLEAN, P),
    };
    static final MethodHandle CHANNEL_STATS = fn("stp_channel_get_stats", I, P, P);
    static final MethodHandle QUEUE_STATS = fn("stp_queue_get_stats", I, P, P);
    static final MethodHandle[] ON_ARRIVAL = {
        fn("stp_channel_on_arrival", I, P, P, P, P),
        fn("stp_queue_on_arrival", I, P, P, P, P),
    };
    static final MethodHandle[] ON_GARBAGE = {
        fn("stp_channel_on_garbage", I, P, P, P),
        fn("stp_queue_on_garbage", I, P, P, P),
    };
    static final MethodHandle SUBSCRIPTION_FREE = fn("stp_subscription_free", null, P);

    // Tasks.
    static final MethodHandle TASK_NEW_IN = fn("stp_task_new_in", I, P, L, I, P, P);
    static final MethodHandle TASK_CHILD = fn("stp_task_child", I, P, L, P);
    static final MethodHandle TASK_VT = quick("stp_task_virtual_time", L, P);
    static final MethodHandle TASK_VISIBILITY = fn("stp_task_visibility", L, P);
    static final MethodHandle TASK_SET_VT = fn("stp_task_set_virtual_time", I, P, L);
    static final MethodHandle TASK_FREE = fn("stp_task_free", null, P);

    // Connections: attach and free, input then output, indexed by Kind.
    static final MethodHandle[] ATTACH_INPUT = {
        fn("stp_channel_attach_input", I, P, P, P),
        fn("stp_queue_attach_input", I, P, P, P),
        fn("stp_register_attach_input", I, P, P, P),
    };
    static final MethodHandle[] ATTACH_OUTPUT = {
        fn("stp_channel_attach_output", I, P, P, P),
        fn("stp_queue_attach_output", I, P, P, P),
        fn("stp_register_attach_output", I, P, P, P),
    };
    static final MethodHandle[] INPUT_FREE = {
        fn("stp_channel_in_free", null, P),
        fn("stp_queue_in_free", null, P),
        fn("stp_register_in_free", null, P),
    };
    static final MethodHandle[] OUTPUT_FREE = {
        fn("stp_channel_out_free", null, P),
        fn("stp_queue_out_free", null, P),
        fn("stp_register_out_free", null, P),
    };

    // Operations.
    static final MethodHandle CHANNEL_PUT = fn("stp_channel_put_interruptible", I, P, L, P, I, L, P);
    static final MethodHandle CHANNEL_FLUSH = fn("stp_channel_flush", I, P);
    static final MethodHandle CHANNEL_GET = fn("stp_channel_get", I, P, I, L, L, P, P);
    static final MethodHandle CHANNEL_CONSUME = fn("stp_channel_consume", I, P, L);
    static final MethodHandle CHANNEL_CONSUME_UNTIL = fn("stp_channel_consume_until", I, P, L);
    static final MethodHandle QUEUE_PUT = fn("stp_queue_put_interruptible", I, P, L, P, L, P, P);
    static final MethodHandle QUEUE_GET = fn("stp_queue_get", I, P, L, P, P, P);
    static final MethodHandle QUEUE_CONSUME = fn("stp_queue_consume", I, P, L);
    static final MethodHandle REGISTER_WRITE = fn("stp_register_write", I, P, P, P);
    static final MethodHandle REGISTER_READ = fn("stp_register_read", I, P, L, P, P);

    // Correlation.
    static final MethodHandle CORRELATOR_NEW = fn("stp_correlator_new", I, P, L, I, L, P);
    static final MethodHandle CORRELATOR_GET = fn("stp_correlator_get", I, P, L, P);
    static final MethodHandle CORRELATOR_CONSUME = fn("stp_correlator_consume", I, P, P);
    static final MethodHandle CORRELATOR_CONSUME_UNTIL = fn("stp_correlator_consume_until", I, P, P);
    static final MethodHandle CORRELATOR_SKIPPED = fn("stp_correlator_skipped", L, P);
    static final MethodHandle CORRELATOR_FREE = fn("stp_correlator_free", null, P);
    static final MethodHandle SET_TS = quick("stp_set_ts", L, P);
    static final MethodHandle SET_LEN = quick("stp_set_len", L, P);
    static final MethodHandle SET_ITEM = fn("stp_set_item", I, P, L, P, P);
    static final MethodHandle SET_FREE = fn("stp_set_free", null, P);

    // Pacing.
    static final MethodHandle PACER_NEW = fn("stp_pacer_new", I, L, L, I, P);
    static final MethodHandle PACER_SYNC = fn("stp_pacer_sync_interruptible", I, P, L, P, P, P);
    static final MethodHandle PACER_STATS = fn("stp_pacer_get_stats", I, P, P);
    static final MethodHandle PACER_FREE = fn("stp_pacer_free", null, P);

    static MemorySegment cloneItem(MemorySegment item) {
        try {
            return (MemorySegment) ITEM_CLONE.invokeExact(item);
        } catch (Throwable t) {
            throw fail(t);
        }
    }

    /** Calls a {@code void f(void *)} free function. */
    static void free(MethodHandle f, MemorySegment p) {
        try {
            f.invokeExact(p);
        } catch (Throwable t) {
            throw fail(t);
        }
    }
}
