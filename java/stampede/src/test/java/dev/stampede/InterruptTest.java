package dev.stampede;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/** Blocking calls end within half a second of Thread.interrupt(), on platform and virtual
 * threads, and virtual threads waiting in them leave their carriers free. */
class InterruptTest {
    interface Blocking {
        void run() throws Exception;
    }

    /** Runs {@code op} on a thread of {@code builder}, interrupts it after 100 ms and returns
     * how long it took to throw InterruptedException after that. */
    static long interruptAfter(Thread.Builder builder, Blocking op) throws Exception {
        AtomicReference<Throwable> thrown = new AtomicReference<>();
        AtomicLong ended = new AtomicLong();
        CountDownLatch started = new CountDownLatch(1);
        Thread t = builder.start(() -> {
            started.countDown();
            try {
                op.run();
            } catch (Throwable e) {
                thrown.set(e);
            }
            ended.set(System.nanoTime());
        });
        started.await();
        Thread.sleep(100);
        long at = System.nanoTime();
        t.interrupt();
        t.join(5000);
        assertTrue(!t.isAlive(), "still blocked 5 s after the interrupt");
        assertTrue(thrown.get() instanceof InterruptedException, "threw " + thrown.get());
        return (ended.get() - at) / 1_000_000;
    }

    static List<Thread.Builder> builders() {
        return List.of(Thread.ofPlatform(), Thread.ofVirtual());
    }

    @Test
    void a_blocked_get_ends_on_interrupt() throws Exception {
        try (Runtime rt = new Runtime()) {
            Channel ch = rt.channel();
            for (Thread.Builder b : builders()) {
                ChannelInput in = rt.task(Stampede.INFINITY).attachInput(ch);
                long ms = interruptAfter(b, () -> in.get(Selector.NEXT_UNSEEN));
                assertTrue(ms < 500, b + ": " + ms + " ms");
                QueueInput q = rt.task(Stampede.INFINITY).attachInput(rt.queue());
                ms = interruptAfter(b, () -> q.get());
                assertTrue(ms < 500, b + ": " + ms + " ms");
                RegisterInput r = rt.task(0).attachInput(rt.register());
                ms = interruptAfter(b, () -> r.read());
                assertTrue(ms < 500, b + ": " + ms + " ms");
            }
        }
    }

    @Test
    void a_put_blocked_on_a_full_container_ends_on_interrupt_and_keeps_its_item()
            throws Exception {
        try (Runtime rt = new Runtime()) {
            for (Thread.Builder b : builders()) {
                Channel ch = rt.channel(null, 1);
                ChannelOutput out = rt.task(0).attachOutput(ch);
                out.put(0, "first");
                long ms = interruptAfter(b, () -> out.put(1, "second"));
                assertTrue(ms < 500, b + ": " + ms + " ms");
                assertEquals(1, ch.stats().items(), "the interrupted put stored nothing");
                Queue q = rt.queue(null, 1);
                QueueOutput qo = rt.task(0).attachOutput(q);
                qo.put(0, "first".getBytes());
                ms = interruptAfter(b, () -> qo.put(1, "second".getBytes()));
                assertTrue(ms < 500, b + ": " + ms + " ms");
            }
        }
    }

    @Test
    void a_pacer_sleep_ends_on_interrupt() throws Exception {
        for (Thread.Builder b : builders()) {
            try (Pacer p = new Pacer(Duration.ofSeconds(10), Duration.ofMillis(10),
                    Pacer.LateAction.CONTINUE)) {
                p.sync(0);
                long ms = interruptAfter(b, () -> p.sync(1));
                assertTrue(ms < 500, b + ": " + ms + " ms");
            }
        }
    }

    @Test
    void an_interrupted_thread_does_not_start_waiting() throws Exception {
        try (Runtime rt = new Runtime()) {
            ChannelInput in = rt.task(Stampede.INFINITY).attachInput(rt.channel());
            Thread.currentThread().interrupt();
            try {
                in.get(Selector.OLDEST);
                throw new AssertionError("no InterruptedException");
            } catch (InterruptedException expected) {
                assertTrue(!Thread.currentThread().isInterrupted());
            }
        }
    }

    @Test
    void many_virtual_threads_wait_without_holding_carriers() throws Exception {
        int n = 60; // a channel accepts 64 input connections; two carriers are far fewer
        try (Runtime rt = new Runtime()) {
            Channel ch = rt.channel();
            Queue results = rt.queue();
            List<Thread> waiting = new ArrayList<>();
            CountDownLatch ready = new CountDownLatch(n);
            for (int i = 0; i < n; i++) {
                ChannelInput in = rt.task(Stampede.INFINITY).attachInput(ch);
                QueueOutput res = rt.task(0).attachOutput(results);
                long want = i;
                waiting.add(Thread.ofVirtual().start(() -> {
                    ready.countDown();
                    try (Stamped s = in.get(want)) {
                        res.put(s.ts(), s.item());
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }));
            }
            assertTrue(ready.await(10, TimeUnit.SECONDS));
            // Every carrier would be held by a waiting get if waits pinned them: the producer,
            // itself a virtual thread, could then never run.
            AtomicReference<Throwable> failed = new AtomicReference<>();
            Thread producer = Thread.ofVirtual().start(() -> {
                try (Task p = rt.task(0)) {
                    ChannelOutput out = p.attachOutput(ch);
                    for (int i = 0; i < n; i++) {
                        out.put(i, "item " + i);
                    }
                } catch (Throwable e) {
                    failed.set(e);
                }
            });
            producer.join(10_000);
            assertEquals(null, failed.get());
            for (Thread t : waiting) {
                t.join(10_000);
                assertTrue(!t.isAlive());
            }
            assertEquals(n, results.stats().puts());
        }
    }
}
