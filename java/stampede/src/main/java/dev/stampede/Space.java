package dev.stampede;

import static java.lang.foreign.ValueLayout.ADDRESS;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

/**
 * An address space joined to a distributed application: a {@link Runtime} whose named
 * containers are found application-wide and whose connections reach containers owned by
 * other processes and hosts, in any language. Closing it leaves the application.
 */
public final class Space extends Runtime {
    private Space(MemorySegment ptr) {
        super(ptr);
    }

    /** Joins the application {@code app} as {@code config} says. */
    public static Space join(String app, Config config) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment cfg;
            try {
                cfg = (MemorySegment) Native.CONFIG_NEW.invokeExact(config.mode.ordinal());
            } catch (Throwable t) {
                throw Native.fail(t);
            }
            try {
                for (String e : config.listen) {
                    set(Native.CONFIG_LISTEN, cfg, a.allocateFrom(e));
                }
                for (String e : config.connect) {
                    set(Native.CONFIG_CONNECT, cfg, a.allocateFrom(e));
                }
                if (config.user != null) {
                    Status.check((int) Native.CONFIG_CREDENTIALS.invokeExact(cfg,
                            a.allocateFrom(config.user), a.allocateFrom(
                                    config.password == null ? "" : config.password)));
                }
                if (config.credentialsFile != null) {
                    set(Native.CONFIG_CREDENTIALS_FILE, cfg, a.allocateFrom(config.credentialsFile));
                }
                if (config.accessFile != null) {
                    set(Native.CONFIG_ACCESS_FILE, cfg, a.allocateFrom(config.accessFile));
                }
                if (config.rootCa != null || config.certificate != null
                        || config.privateKey != null) {
                    Status.check((int) Native.CONFIG_TLS.invokeExact(cfg, str(a, config.rootCa),
                            str(a, config.certificate), str(a, config.privateKey)));
                }
                if (config.lease != null || config.opTimeout != null
                        || config.connectTimeout != null) {
                    Status.check((int) Native.CONFIG_TIMEOUTS.invokeExact(cfg,
                            ms(config.lease, 1000), ms(config.opTimeout, 5000),
                            ms(config.connectTimeout, 5000)));
                }
                if (config.shmPool != null) {
                    Status.check((int) Native.CONFIG_SHM_POOL.invokeExact(cfg,
                            (long) config.shmPool));
                }
                if (config.quotas != null) {
                    Status.check((int) Native.CONFIG_QUOTAS.invokeExact(cfg, config.quotas[0],
                            config.quotas[1], config.quotas[2]));
                }
                if (config.multicastScouting != null) {
                    Status.check((int) Native.CONFIG_MULTICAST.invokeExact(cfg,
                            (boolean) config.multicastScouting));
                }
                if (config.queuePrefetch != null) {
                    Status.check((int) Native.CONFIG_PREFETCH.invokeExact(cfg,
                            (int) config.queuePrefetch));
                }
                if (config.spinRounds != null) {
                    Status.check((int) Native.CONFIG_SPIN.invokeExact(cfg,
                            (long) config.spinRounds));
                }
                for (String[] kv : config.zenoh) {
                    Status.check((int) Native.CONFIG_ZENOH.invokeExact(cfg, a.allocateFrom(kv[0]),
                            a.allocateFrom(kv[1])));
                }
                MemorySegment out = a.allocate(ADDRESS);
                Status.check((int) Native.RUNTIME_JOIN.invokeExact(a.allocateFrom(app), cfg, out));
                return new Space(out.get(ADDRESS, 0));
            } catch (Throwable t) {
                throw Native.fail(t);
            } finally {
                Native.free(Native.CONFIG_FREE, cfg);
            }
        }
    }

    private static void set(MethodHandle h, MemorySegment cfg, MemorySegment value)
            throws Throwable {
        Status.check((int) h.invokeExact(cfg, value));
    }

    private static MemorySegment str(Arena a, String s) {
        return s == null ? MemorySegment.NULL : a.allocateFrom(s);
    }

    private static long ms(java.time.Duration d, long otherwise) {
        return d == null ? otherwise : Math.max(1, d.toMillis());
    }

    /** This address space's counters. */
    public SpaceStats stats() {
        return counters(Layouts.SPACE_STATS, Native.RUNTIME_SPACE_STATS, SpaceStats::read);
    }

    @Override
    public String toString() {
        return "Space(" + id() + ")";
    }
}
