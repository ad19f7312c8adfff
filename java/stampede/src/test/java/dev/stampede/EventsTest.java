package dev.stampede;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;

class EventsTest {
    @Test
    void arrival_callbacks_see_every_put_until_closed() throws Exception {
        try (Runtime rt = new Runtime()) {
            Channel ch = rt.channel();
            ChannelOutput out = rt.task(0).attachOutput(ch);
            List<Long> seen = new CopyOnWriteArrayList<>();
            Subscription sub = ch.onArrival(seen::add);
            out.put(1, "a");
            out.put(2, "b");
            sub.close();
            out.put(3, "c");
            assertEquals(List.of(1L, 2L), seen);
            Queue q = rt.queue();
            List<Long> qs = new CopyOnWriteArrayList<>();
            try (Subscription s = q.onArrival(qs::add)) {
                rt.task(0).attachOutput(q).put(4, "d".getBytes());
            }
            assertEquals(List.of(4L), qs);
        }
    }

    @Test
    void a_callback_may_close_its_own_subscription() throws Exception {
        try (Runtime rt = new Runtime()) {
            Channel ch = rt.channel();
            ChannelOutput out = rt.task(0).attachOutput(ch);
            List<Long> seen = new CopyOnWriteArrayList<>();
            Subscription[] own = new Subscription[1];
            own[0] = ch.onArrival(ts -> {
                seen.add(ts);
                own[0].close();
            });
            Thread putter = new Thread(() -> {
                try {
                    out.put(1, "a");
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            putter.start();
            putter.join(Duration.ofSeconds(10).toMillis());
            assertFalse(putter.isAlive(), "a callback closing its own subscription deadlocked");
            out.put(2, "b");
            assertEquals(List.of(1L), seen);
        }
    }

    @Test
    void a_throwing_callback_does_not_unwind_into_the_library() throws Exception {
        try (Runtime rt = new Runtime()) {
            Channel ch = rt.channel();
            ChannelOutput out = rt.task(0).attachOutput(ch);
            try (Subscription s = ch.onArrival(ts -> {
                throw new IllegalStateException("from a callback");
            })) {
                Thread.UncaughtExceptionHandler h = Thread.currentThread().getUncaughtExceptionHandler();
                List<Throwable> reported = new CopyOnWriteArrayList<>();
                Thread.currentThread().setUncaughtExceptionHandler((t, e) -> reported.add(e));
                try {
                    out.put(1, "a");
                } finally {
                    Thread.currentThread().setUncaughtExceptionHandler(h);
                }
                assertEquals(1, reported.size());
            }
        }
    }

    @Test
    void garbage_handlers_get_reclaimed_items() throws Exception {
        try (Runtime rt = new Runtime()) {
            Channel ch = rt.channel();
            List<String> reclaimed = new CopyOnWriteArrayList<>();
            ch.onGarbage((ts, item) -> {
                try (item) {
                    reclaimed.add(ts + ":" + item.text());
                }
            });
            Task p = rt.task(0);
            ChannelOutput out = p.attachOutput(ch);
            out.put(0, "zero");
            out.put(1, "one");
            p.setVirtualTime(Stampede.INFINITY);
            rt.collect();
            assertEquals(List.of("0:zero", "1:one"), reclaimed);
            GcStats gc = rt.gcStats(0);
            assertTrue(gc.reclaimed() >= 2, gc.toString());
            assertTrue(rt.floor(0) > 1);
        }
    }

    @Test
    void explain_names_what_holds_the_watermark() throws Exception {
        try (Runtime rt = new Runtime()) {
            Channel ch = rt.channel();
            Task slow = rt.task(3, "slow");
            slow.attachOutput(ch).put(3, "x");
            WatermarkReport r = rt.explain(0);
            assertEquals(0, r.zone());
            assertEquals(3, r.watermark());
            assertFalse(r.holds().isEmpty());
            assertEquals(Hold.Cause.VIRTUAL_TIME, r.holds().get(0).cause());
            assertTrue(r.text().contains("slow"), r.text());
        }
    }

    @Test
    void correlators_deliver_matching_sets() throws Exception {
        try (Runtime rt = new Runtime()) {
            Channel left = rt.channel();
            Channel right = rt.channel();
            Task p = rt.task(0);
            ChannelOutput l = p.attachOutput(left);
            ChannelOutput r = p.attachOutput(right);
            Task c = rt.task(Stampede.INFINITY);
            try (Correlator cor = new Correlator(
                    List.of(c.attachInput(left), c.attachInput(right)))) {
                l.put(1, "l1");
                l.put(2, "l2");
                r.put(2, "r2");
                try (Correlator.CorrelatedSet set = cor.get(Duration.ofSeconds(1))) {
                    assertEquals(2, set.ts());
                    assertEquals("l2", set.items().get(0).item().text());
                    assertEquals("r2", set.items().get(1).item().text());
                    cor.consumeUntil(set);
                }
                assertEquals(1, cor.skipped());
                Thread feeder = Thread.ofVirtual().start(() -> {
                    try {
                        Thread.sleep(50);
                        l.put(5, "l5");
                        r.put(5, "r5");
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                });
                try (Correlator.CorrelatedSet set = cor.get()) {
                    assertEquals(5, set.ts());
                }
                feeder.join();
            }
        }
    }

    @Test
    void pacers_keep_time_and_count() throws Exception {
        try (Pacer p = new Pacer(Duration.ofMillis(10), Duration.ofMillis(50),
                Pacer.LateAction.SKIP)) {
            long t0 = System.nanoTime();
            for (int vt = 0; vt < 5; vt++) {
                assertEquals(Pacer.Tick.Kind.ON_TIME, p.sync(vt).kind());
            }
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(ms >= 35, "5 ticks of 10 ms took " + ms + " ms");
            Thread.sleep(200);
            Pacer.Tick late = p.sync(5);
            assertEquals(Pacer.Tick.Kind.SKIP, late.kind());
            assertTrue(late.skipTo() > 5);
            assertEquals(5, p.stats().onTime());
        }
    }
}
