package dev.stampede;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A runtime: the embedded in-process one ({@code new Runtime()}), or an address space of a
 * distributed application ({@link Space#join}). Containers and tasks are made from it; a
 * program written against a {@code Runtime} runs unchanged on either. Closing it closes every
 * handle and subscription made from it that is still open; an unreachable runtime is released
 * the same way by the cleaner.
 */
public class Runtime extends Handle {
    final Children children;
    /** The arrival callbacks and garbage handlers of this runtime's containers by key: held
     * here, so that they live as long as the runtime can call them and no longer, and a
     * callback that refers to the runtime does not keep it reachable (see {@link Upcalls}). */
    final Map<Long, Object> callbacks = new ConcurrentHashMap<>();

    /** A new embedded runtime: containers, tasks and garbage collection in this process. */
    public Runtime() {
        this(create());
    }

    Runtime(MemorySegment ptr) {
        this(ptr, new Children());
    }

    private Runtime(MemorySegment ptr, Children children) {
        super(ptr, Native.RUNTIME_FREE, "runtime", null, 0, children);
        this.children = children;
    }

    private static MemorySegment create() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            Status.check((int) Native.RUNTIME_NEW.invokeExact(out));
            return out.get(ADDRESS, 0);
        } catch (Throwable t) {
            throw Native.fail(t);
        }
    }

    /** An unbounded, unnamed channel in zone 0. */
    public Channel channel() {
        return channel(null, 0, 0);
    }

    /** An unbounded channel called {@code name} (registered application-wide in a space). */
    public Channel channel(String name) {
        return channel(name, 0, 0);
    }

    /** A channel bounded to {@code capacity} items (0 for unbounded). */
    public Channel channel(String name, long capacity) {
        return channel(name, capacity, 0);
    }

    /** A channel called {@code name} (or {@code null}), bounded to {@code capacity} items (0
     * for unbounded), in time zone {@code zone}. */
    public Channel channel(String name, long capacity, int zone) {
        return new Channel(Container.create(this, Kind.CHANNEL, name, capacity, zone), this, name);
    }

    /** An unbounded, unnamed queue in zone 0. */
    public Queue queue() {
        return queue(null, 0, 0);
    }

    /** An unbounded queue called {@code name}. */
    public Queue queue(String name) {
        return queue(name, 0, 0);
    }

    /** A queue bounded to {@code capacity} items (0 for unbounded). */
    public Queue queue(String name, long capacity) {
        return queue(name, capacity, 0);
    }

    /** A queue called {@code name} (or {@code null}) of {@code capacity} (0 for unbounded) in
     * zone {@code zone}. */
    public Queue queue(String name, long capacity, int zone) {
        return new Queue(Container.create(this, Kind.QUEUE, name, capacity, zone), this, name);
    }

    /** An unnamed register in zone 0. */
    public Register register() {
        return register(null, 0);
    }

    /** A register called {@code name} (or {@code null}) in zone {@code zone}. */
    public Register register(String name, int zone) {
        return new Register(Container.create(this, Kind.REGISTER, name, 0, zone), this, name);
    }

    /** The channel called {@code name}, waiting up to {@code timeout} for it to appear
     * ({@code null} waits forever). */
    public Channel lookupChannel(String name, Duration timeout) throws InterruptedException {
        return new Channel(Container.lookup(this, Kind.CHANNEL, name, Waits.millis(timeout)), this,
                name);
    }

    /** The queue called {@code name}, waiting up to {@code timeout}. */
    public Queue lookupQueue(String name, Duration timeout) throws InterruptedException {
        return new Queue(Container.lookup(this, Kind.QUEUE, name, Waits.millis(timeout)), this,
                name);
    }

    /** The register called {@code name}, waiting up to {@code timeout}. */
    public Register lookupRegister(String name, Duration timeout) throws InterruptedException {
        return new Register(Container.lookup(this, Kind.REGISTER, name, Waits.millis(timeout)),
                this, name);
    }

    /** A task at virtual time {@code vt} in zone 0. */
    public Task task(long vt) {
        return task(vt, 0, null);
    }

    /** A task at virtual time {@code vt} called {@code name} (shown by {@link #explain}). */
    public Task task(long vt, String name) {
        return task(vt, 0, name);
    }

    /** A task at {@code vt} ({@link Stampede#AT_FLOOR} for the zone's floor) in zone
     * {@code zone}, called {@code name} (or {@code null}). */
    public Task task(long vt, int zone, String name) {
        MemorySegment r = res.enter();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            MemorySegment n = name == null ? MemorySegment.NULL : a.allocateFrom(name);
            Status.check((int) Native.TASK_NEW_IN.invokeExact(r, vt, zone, n, out));
            return new Task(out.get(ADDRESS, 0), this);
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            res.leave();
        }
    }

    /** Everything below this timestamp of zone {@code zone} has been reclaimed. */
    public long floor(int zone) {
        MemorySegment r = res.enter();
        try {
            return (long) Native.RUNTIME_FLOOR.invokeExact(r, zone);
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            res.leave();
        }
    }

    /** The garbage-collection counters of zone {@code zone}. */
    public GcStats gcStats(int zone) {
        MemorySegment r = res.enter();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(Layouts.GC_STATS);
            Status.check((int) Native.RUNTIME_GC_STATS.invokeExact(r, zone, out));
            return new GcStats(out.get(JAVA_LONG, 0), out.get(JAVA_LONG, 8),
                    out.get(JAVA_LONG, 16));
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            res.leave();
        }
    }

    /**
     * Runs a collection pass over every zone now. When it returns, every item below each
     * zone's new floor has been handed to its garbage handler, whichever pass reclaimed it, so
     * a garbage handler must not wait for a thread that calls this.
     */
    public void collect() {
        MemorySegment r = res.enter();
        try {
            Status.check((int) Native.RUNTIME_COLLECT.invokeExact(r));
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            res.leave();
        }
    }

    /** Why zone {@code zone}'s watermark is where it is: its figures, every term holding it
     * (lowest first), and a readable report. */
    public WatermarkReport explain(int zone) {
        MemorySegment r = res.enter();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(Layouts.WATERMARK);
            MemorySegment text = a.allocate(ADDRESS);
            long cap = 16;
            while (true) {
                MemorySegment holds = a.allocate(Layouts.HOLD, cap);
                text.set(ADDRESS, 0, MemorySegment.NULL);
                Status.check((int) Native.RUNTIME_EXPLAIN.invokeExact(r, zone, out, holds, cap,
                        text));
                MemorySegment t = text.get(ADDRESS, 0);
                String report = Native.cString(t);
                Native.free(Native.STRING_FREE, t);
                long n = out.get(JAVA_LONG, Layouts.off(Layouts.WATERMARK, "holds"));
                if (n > cap) {
                    cap = n;
                    continue;
                }
                List<Hold> list = new ArrayList<>();
                long size = Layouts.HOLD.byteSize();
                for (long i = 0; i < n; i++) {
                    MemorySegment h = holds.asSlice(i * size, size);
                    list.add(new Hold(h.get(JAVA_LONG, Layouts.off(Layouts.HOLD, "ts")),
                            Hold.Cause.of(h.get(JAVA_INT, Layouts.off(Layouts.HOLD, "cause"))),
                            h.get(JAVA_LONG, Layouts.off(Layouts.HOLD, "task")),
                            h.get(JAVA_LONG, Layouts.off(Layouts.HOLD, "container"))));
                }
                return new WatermarkReport(
                        out.get(JAVA_INT, Layouts.off(Layouts.WATERMARK, "zone")),
                        out.get(JAVA_LONG, Layouts.off(Layouts.WATERMARK, "local")),
                        out.get(JAVA_LONG, Layouts.off(Layouts.WATERMARK, "floor")),
                        out.get(JAVA_LONG, Layouts.off(Layouts.WATERMARK, "watermark")),
                        List.copyOf(list), report);
            }
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            res.leave();
        }
    }

    /** This runtime's id: the address space's id in a distributed application. */
    public String id() {
        MemorySegment r = res.enter();
        try {
            return Native.cString((MemorySegment) Native.RUNTIME_ID.invokeExact(r));
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            res.leave();
        }
    }

    /** Waits up to {@code timeout} for a container or service called {@code name} to be
     * registered. */
    public void waitFor(String name, Duration timeout) throws InterruptedException {
        long deadline = Waits.deadline(Waits.millis(timeout));
        try (Arena a = Arena.ofConfined()) {
            MemorySegment n = a.allocateFrom(name);
            while (true) {
                long slice = Waits.slice(Waits.left(deadline));
                int s;
                MemorySegment r = res.enter();
                try {
                    s = (int) Native.RUNTIME_WAIT_FOR.invokeExact(r, n, slice);
                } catch (Throwable t) {
                    throw Native.fail(t);
                } finally {
                    res.leave();
                }
                if (s == 0) {
                    return;
                }
                if (s != Status.NOT_FOUND.code() || Waits.left(deadline) == 0) {
                    throw StampedeException.last(Status.of(s), null, null);
                }
                Waits.checkInterrupt();
            }
        }
    }
}
