package dev.stampede;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.lang.foreign.Arena;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The Java face's whole life, over and over, in a JVM of its own: a runtime (one life in ten an
 * address space, with Zenoh under it) with channels, a queue and a register, tasks and a child task, connections, puts and gets of bytes, text,
 * arrays, typed and loaned items, zero-copy views, correlation, arrival callbacks and garbage
 * handlers (upcall stubs), a get on a virtual thread, a pacer, reports, and the errors that
 * hand an item back; then the end of it: everything closed, or only the runtime, or nothing
 * at all, left to the cleaner.
 *
 * <p>After a warm-up (the library's lazily made state, the JVM's threads), it reads
 * {@link NativeMemory}, runs the lives, lets the cleaner finish, and reads again. It exits
 * with status 1 if the C library's heap, the arenas, the upcall stubs or the resident memory
 * grew past their bounds or a runtime's collector thread was left running. Run by
 * {@link LifeCycleLeakTest}: {@code LifeCycle ENDING LIVES}, in a JVM with
 * {@code -XX:NativeMemoryTracking=summary}, a fixed heap and
 * {@code GLIBC_TUNABLES=glibc.malloc.tcache_count=0} (see {@link NativeMemory}).
 */
final class LifeCycle {
    private LifeCycle() {}

    static final int WARM_UP = 50;
    /** Timestamps put per life: each kind of put once every four. */
    static final int ITEMS = 24;

    /**
     * The bounds. A life makes about a hundred items of 1 KiB, some thirty handles and a dozen
     * arenas; one of them left behind per life is 300 KiB or more over 300 lives, and a runtime
     * left behind is also a collector thread. A clean run ends within a few KiB of where it
     * started.
     */
    static final long LIBRARY_BOUND = 64 * 1024;
    /** Native Memory Tracking counts arenas' bytes exactly: a clean run moves them by none. */
    static final long ARENA_BOUND = 4 * 1024;
    /** About 800 bytes an upcall stub: the face makes one per kind of callback, for good; a
     * stub per callback left unfreed would pass this within 40 lives. */
    static final long STUB_BOUND = 32 * 1024;
    /**
     * Resident memory, with the Java heap fixed and touched from the start and malloc's free
     * pages given back before reading: a generous backstop for memory that bypasses malloc (a
     * thread's stack, a mapping). The JIT's code and working memory and the class metadata
     * move it by up to 25 MiB as the lives are compiled, hence the margin.
     */
    static final long RSS_BOUND = 64 * 1024 * 1024;
    /** Readings that have not moved for this many rounds (a few seconds) are final. */
    static final int STILL = 40;
    /** Lives between collections when nothing is closed. */
    static final int BATCH = 50;
    /** One life in this many runs on an address space, which takes some 40 ms to join and
     * leave. */
    static final int SPACE_EVERY = 10;

    enum Ending {
        /** Every handle, item and subscription closed explicitly, last made first. */
        CLOSED,
        /** Only the runtime closed: it closes what was made from it; items go to the cleaner. */
        RUNTIME_CLOSED,
        /** Nothing closed: the cleaner releases the runtime and everything made from it. */
        NOTHING_CLOSED
    }

    private static final byte[] BYTES = new byte[1024];
    private static final long[] SHAPE = {16, 16};
    private static final float[] FLOATS = new float[256];

    /** Handles to close, last made first closed (only when everything is closed). */
    private static final class Closer {
        final boolean closing;
        final Deque<AutoCloseable> open = new ArrayDeque<>();

        Closer(Ending ending) {
            closing = ending == Ending.CLOSED;
        }

        <T extends AutoCloseable> T keep(T handle) {
            if (closing) {
                open.push(handle);
            }
            return handle;
        }

        void now(AutoCloseable handle) throws Exception {
            if (closing) {
                handle.close();
            }
        }

        void all() throws Exception {
            while (!open.isEmpty()) {
                open.pop().close();
            }
        }
    }

    /** Lives so far; every {@value #SPACE_EVERY}th runs on an address space. */
    private static int born;

    /**
     * One life, on an embedded runtime or, every {@value #SPACE_EVERY}th, on an address space
     * alone in an application of its own (a peer on loopback that looks for no other); returns
     * what its callbacks counted (so that none of it is dead code).
     */
    static long life(Ending ending) throws Exception {
        Closer c = new Closer(ending);
        AtomicLong events = new AtomicLong();
        int n = born++;
        Runtime rt = n % SPACE_EVERY != 0 ? new Runtime()
                : Space.join("life-" + ProcessHandle.current().pid() + "-" + n,
                        Config.peer().listen("tcp/127.0.0.1:0").multicastScouting(false));
        Channel frames = c.keep(rt.channel("life/frames", 8));
        Channel poses = c.keep(rt.channel("life/poses"));
        Queue jobs = c.keep(rt.queue("life/jobs", 16));
        Register state = c.keep(rt.register("life/state", 0));
        Channel found = c.keep(rt.lookupChannel("life/frames", Duration.ZERO));
        assertThrows(StampedeException.NameTaken.class, () -> rt.channel("life/frames"));

        // Callbacks that refer to handles, as callbacks do: they must not keep the runtime
        // reachable when nothing else does.
        c.keep(frames.onArrival(ts -> events.addAndGet(frames.isClosed() ? 0 : 1)));
        c.keep(jobs.onArrival(ts -> events.addAndGet(jobs.isClosed() ? 0 : 1)));
        GarbageHandler reclaimed = (ts, item) -> {
            events.addAndGet(rt.isClosed() ? 0 : 1);
            if (c.closing) {
                item.close();
            }
        };
        frames.onGarbage(reclaimed);
        jobs.onGarbage(reclaimed);

        Task camera = c.keep(rt.task(Stampede.AT_FLOOR, "camera"));
        Task tracker = c.keep(rt.task(Stampede.AT_FLOOR, "tracker"));
        Task fusion = c.keep(rt.task(Stampede.AT_FLOOR, "fusion"));
        Task helper = c.keep(camera.child(camera.virtualTime()));
        ChannelOutput frameOut = c.keep(camera.attachOutput(frames));
        ChannelOutput poseOut = c.keep(helper.attachOutput(poses));
        ChannelInput frameIn = c.keep(tracker.attachInput(found));
        Correlator both = c.keep(new Correlator(
                List.of(fusion.attachInput(frames), fusion.attachInput(poses))));
        QueueOutput jobOut = c.keep(camera.attachOutput(jobs));
        QueueInput jobIn = c.keep(tracker.attachInput(jobs));
        RegisterOutput stateOut = c.keep(tracker.attachOutput(state));
        RegisterInput stateIn = c.keep(fusion.attachInput(state));

        long base = camera.virtualTime();
        long last = base + ITEMS - 1;
        // The last frame is gotten on a virtual thread, which waits on the channel's arrivals.
        long[] seen = new long[1];
        Thread waiter = Thread.ofVirtual().start(() -> {
            try {
                Stamped s = frameIn.get(last);
                seen[0] = s.ts();
                c.now(s);
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        for (int i = 0; i < ITEMS; i++) {
            long ts = base + i;
            switch (i % 4) {
                case 0 -> frameOut.put(ts, BYTES);
                case 1 -> frameOut.put(ts, "frame " + ts);
                case 2 -> {
                    Item a = Item.ofArray(SHAPE, FLOATS);
                    frameOut.put(ts, a);
                    c.now(a);
                }
                default -> {
                    Loan loan = frameOut.loan(BYTES.length);
                    loan.segment().fill((byte) ts);
                    Item l = loan.finish();
                    frameOut.put(ts, l);
                    c.now(l);
                    c.now(frameOut.loanArray(DType.U16, SHAPE));
                }
            }
            Item pose = Item.ofArray(new long[] {3}, new double[] {ts, 0, 1});
            poseOut.put(ts, pose);
            StampedeException again = assertThrows(StampedeException.DuplicateTimestamp.class,
                    () -> poseOut.put(ts, pose));
            assertSame(pose, again.item());
            c.now(pose);

            if (ts != last) {
                Stamped s = frameIn.get(ts);
                Item it = s.item();
                events.addAndGet(it.segment().get(ValueLayout.JAVA_BYTE, 0));
                try (Arena a = Arena.ofConfined()) {
                    events.addAndGet(it.segment(a).byteSize());
                }
                switch (it.kind()) {
                    case TEXT -> events.addAndGet(it.text().length());
                    case ARRAY -> events.addAndGet(it.floats().length + it.shape().length);
                    default -> events.addAndGet(it.bytes().length);
                }
                Item shared = it.share();
                events.addAndGet(shared.buffer().remaining());
                c.now(shared);
                c.now(s);
                assertThrows(StampedeException.Unavailable.class,
                        () -> frameIn.tryGet(Selector.exact(ts + 1)));
            } else {
                waiter.join();
                assertEquals(last, seen[0]);
            }
            frameIn.consume(ts);

            Correlator.CorrelatedSet set = both.get();
            both.consume(set);
            c.now(set);

            jobOut.put(ts, BYTES);
            QueueItem job = jobIn.get();
            jobIn.consume(job);
            c.now(job);

            Item typed = Item.ofTyped("life.Pose", BYTES);
            stateOut.write(typed);
            c.now(typed);
            RegisterValue v = stateIn.read();
            events.addAndGet(v.item().tag() & 1);
            c.now(v);

            for (Task t : List.of(camera, helper, tracker, fusion)) {
                t.setVirtualTime(ts + 1);
            }
        }
        assertThrows(StampedeException.Timeout.class,
                () -> frameIn.get(Selector.NEXT_UNSEEN, Duration.ofMillis(1)));

        rt.collect();
        events.addAndGet(rt.gcStats(0).reclaimed() + rt.floor(0) + frames.stats().puts()
                + jobs.stats().consumed());
        events.addAndGet(rt.explain(0).text().length());
        try (Pacer pacer = new Pacer(Duration.ofNanos(1000), Duration.ofSeconds(1),
                Pacer.LateAction.SKIP)) {
            pacer.sync(0);
            events.addAndGet(pacer.stats().onTime());
        }
        poses.shut();
        StampedeException closed = assertThrows(StampedeException.Closed.class,
                () -> poseOut.put(last + 1, "after the end"));
        c.now(closed.item());

        switch (ending) {
            case CLOSED -> {
                c.all();
                rt.close();
            }
            case RUNTIME_CLOSED -> rt.close();
            case NOTHING_CLOSED -> { }
        }
        return events.get();
    }

    /**
     * {@code n} lives. Left to the cleaner, a runtime is released only once a collection finds
     * it unreachable, and until then its collector thread wakes every 5 ms. The Java heap does
     * not feel that weight, and hundreds of such threads starve the cleaner's one thread, which
     * then falls further behind; so the lives that close nothing collect every
     * {@value #BATCH} lives and let the cleaner release those runtimes, for as long as it makes
     * progress (a runtime that is never released is a leak, which the last reading reports).
     */
    static void lives(Ending ending, int n) throws Exception {
        for (int i = 1; i <= n; i++) {
            life(ending);
            if (ending == Ending.NOTHING_CLOSED && i % BATCH == 0) {
                System.gc();
                long left = NativeMemory.collectorThreads();
                int idle = 0;
                while (left > 0 && idle < 10) {
                    Thread.sleep(20);
                    long now = NativeMemory.collectorThreads();
                    idle = now < left ? 0 : idle + 1;
                    left = now;
                }
            }
        }
    }

    /**
     * Collects until the cleaner has released what it will: until two readings in a row agree
     * and, given a baseline, are within bounds of it, or until the readings have not moved for
     * {@link #STILL} rounds (a leak: what is left will stay). A cleaner that is still releasing
     * a backlog is waited for.
     */
    static NativeMemory settled(NativeMemory base) throws InterruptedException {
        NativeMemory last = NativeMemory.now();
        int still = 0;
        while (true) {
            NativeMemory.collect();
            NativeMemory now = NativeMemory.now();
            boolean steady = now.collectors() == last.collectors()
                    && Math.abs(now.libraryBytes() - last.libraryBytes()) < 4 * 1024
                    && Math.abs(now.arenaBytes() - last.arenaBytes()) < 4 * 1024;
            still = steady ? still + 1 : 0;
            if (steady && (base == null || within(base, now)) || still >= STILL) {
                return now;
            }
            last = now;
        }
    }

    static boolean within(NativeMemory before, NativeMemory after) {
        return after.libraryBytes() - before.libraryBytes() < LIBRARY_BOUND
                && after.arenaBytes() - before.arenaBytes() < ARENA_BOUND
                && after.stubBytes() - before.stubBytes() < STUB_BOUND
                && after.collectors() <= before.collectors()
                && after.rssBytes() - before.rssBytes() < RSS_BOUND;
    }

    public static void main(String[] args) throws Exception {
        Ending ending = Ending.valueOf(args[0]);
        int lives = Integer.parseInt(args[1]);
        NativeMemory.checkSettings();
        lives(ending, WARM_UP);
        NativeMemory before = settled(null);
        long t0 = System.nanoTime();
        lives(ending, lives);
        long ms = (System.nanoTime() - t0) / 1_000_000;
        NativeMemory after = settled(before);
        System.out.printf("%s: %,d lives in %,d ms%n  before: %s%n  after:  %s%n"
                        + "  bounds: C library %d KiB, arenas %d KiB, upcall stubs %d KiB, "
                        + "collector threads 0, RSS %d MiB%n", ending, lives, ms, before,
                after.minus(before), LIBRARY_BOUND / 1024, ARENA_BOUND / 1024, STUB_BOUND / 1024,
                RSS_BOUND >> 20);
        if (!within(before, after)) {
            System.out.println("  LEAK: " + ending + " left native memory behind");
            System.exit(1);
        }
    }
}
