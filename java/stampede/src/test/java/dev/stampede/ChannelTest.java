package dev.stampede;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class ChannelTest {
    @Test
    void selectors_pick_items_by_time() throws Exception {
        try (Runtime rt = new Runtime()) {
            Channel ch = rt.channel("frames", 8);
            Task p = rt.task(0, "producer");
            Task c = rt.task(Stampede.INFINITY, "consumer");
            ChannelOutput out = p.attachOutput(ch);
            ChannelInput in = c.attachInput(ch);
            for (long ts : new long[] {3, 1, 2}) {
                out.put(ts, "frame " + ts);
            }
            try (Stamped s = in.get(Selector.OLDEST)) {
                assertEquals(1, s.ts());
                assertEquals("frame 1", s.item().text());
            }
            try (Stamped s = in.get(Selector.NEWEST)) {
                assertEquals(3, s.ts());
            }
            try (Stamped s = in.get(2)) {
                assertEquals("frame 2", s.item().text());
            }
            in.consume(1);
            try (Stamped s = in.get(Selector.OLDEST)) {
                assertEquals(2, s.ts());
            }
            in.consumeUntil(3);
            assertThrows(StampedeException.Unavailable.class, () -> in.tryGet(Selector.OLDEST));
            assertThrows(StampedeException.Gone.class, () -> in.get(2));
            ChannelStats st = ch.stats();
            assertEquals(3, st.puts());
            assertEquals(1, st.connections());
            assertTrue(ch.isLocal());
            assertEquals("frames", ch.name());
        }
    }

    @Test
    void next_unseen_streams_in_order_and_newest_unseen_skips() throws Exception {
        try (Runtime rt = new Runtime()) {
            Channel ch = rt.channel();
            ChannelOutput out = rt.task(0).attachOutput(ch);
            ChannelInput a = rt.task(Stampede.INFINITY).attachInput(ch);
            ChannelInput b = rt.task(Stampede.INFINITY).attachInput(ch);
            for (long ts = 0; ts < 5; ts++) {
                out.put(ts, new byte[] {(byte) ts});
            }
            for (long ts = 0; ts < 5; ts++) {
                try (Stamped s = a.get(Selector.NEXT_UNSEEN)) {
                    assertEquals(ts, s.ts());
                    assertArrayEquals(new byte[] {(byte) ts}, s.item().bytes());
                }
            }
            try (Stamped s = b.get(Selector.NEWEST_UNSEEN)) {
                assertEquals(4, s.ts());
            }
            assertEquals(4, ch.stats().skipped());
        }
    }

    @Test
    void a_timed_get_reports_the_nearest_timestamps() throws Exception {
        try (Runtime rt = new Runtime()) {
            Channel ch = rt.channel();
            ChannelOutput out = rt.task(0).attachOutput(ch);
            ChannelInput in = rt.task(Stampede.INFINITY).attachInput(ch);
            out.put(10, "a");
            out.put(30, "b");
            long t0 = System.nanoTime();
            StampedeException.Timeout e = assertThrows(StampedeException.Timeout.class,
                    () -> in.get(Selector.exact(20), Duration.ofMillis(150)));
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(ms >= 140, "returned after " + ms + " ms");
            assertEquals(10L, e.below());
            assertEquals(30L, e.above());
            assertEquals(Status.TIMEOUT, e.status());
            StampedeException.Unavailable u = assertThrows(StampedeException.Unavailable.class,
                    () -> in.tryGet(Selector.exact(40)));
            assertEquals(30L, u.below());
            assertNull(u.above());
        }
    }

    @Test
    void a_failed_put_hands_the_item_back() throws Exception {
        try (Runtime rt = new Runtime(); Item item = Item.of("again")) {
            Channel ch = rt.channel(null, 1);
            ChannelOutput out = rt.task(0).attachOutput(ch);
            out.put(0, item);
            StampedeException.DuplicateTimestamp d =
                    assertThrows(StampedeException.DuplicateTimestamp.class, () -> out.put(0, item));
            assertSame(item, d.item());
            assertEquals(0L, d.timestamp());
            StampedeException.Full f =
                    assertThrows(StampedeException.Full.class, () -> out.tryPut(1, item));
            assertSame(item, f.item());
            assertThrows(StampedeException.Full.class,
                    () -> out.put(1, item, Duration.ofMillis(50)));
            assertEquals("again", f.item().text());
            assertEquals(2, ch.stats().full(), "the timed put counts once as full");
        }
    }

    @Test
    void virtual_time_rules_hold() throws Exception {
        try (Runtime rt = new Runtime()) {
            Channel ch = rt.channel();
            Task t = rt.task(5);
            ChannelOutput out = t.attachOutput(ch);
            assertEquals(5, t.virtualTime());
            assertEquals(5, t.visibility());
            StampedeException e = assertThrows(StampedeException.BelowVisibility.class,
                    () -> out.put(4, "late"));
            assertEquals("late", e.item().text());
            assertThrows(StampedeException.BelowVisibility.class, () -> t.setVirtualTime(3));
            t.setVirtualTime(9);
            assertEquals(9, t.virtualTime());
            try (Task child = t.child(12)) {
                assertEquals(12, child.virtualTime());
            }
            assertThrows(StampedeException.BelowVisibility.class, () -> t.child(1));
        }
    }

    @Test
    void a_shut_channel_refuses_puts_and_drains() throws Exception {
        try (Runtime rt = new Runtime()) {
            Channel ch = rt.channel();
            ChannelOutput out = rt.task(0).attachOutput(ch);
            ChannelInput in = rt.task(Stampede.INFINITY).attachInput(ch);
            out.put(0, "last");
            ch.shut();
            StampedeException.Closed e =
                    assertThrows(StampedeException.Closed.class, () -> out.put(1, "more"));
            assertEquals("more", e.item().text());
            try (Stamped s = in.get(0)) {
                assertEquals("last", s.item().text());
            }
        }
    }

    @Test
    void names_are_registered_and_looked_up() throws Exception {
        try (Runtime rt = new Runtime()) {
            rt.channel("cam/0");
            rt.queue("work");
            assertThrows(StampedeException.NameTaken.class, () -> rt.channel("cam/0"));
            Channel found = rt.lookupChannel("cam/0", Duration.ofSeconds(1));
            assertEquals("cam/0", found.name());
            assertThrows(StampedeException.WrongKind.class,
                    () -> rt.lookupChannel("work", Duration.ofMillis(10)));
            assertThrows(StampedeException.NotFound.class,
                    () -> rt.lookupQueue("nothing", Duration.ofMillis(50)));
        }
    }

    @Test
    void closed_handles_fail_cleanly() throws Exception {
        Runtime rt = new Runtime();
        Channel ch = rt.channel();
        Task t = rt.task(0);
        ChannelOutput out = t.attachOutput(ch);
        rt.close();
        assertTrue(out.isClosed() && t.isClosed() && ch.isClosed());
        assertThrows(IllegalStateException.class, () -> out.put(0, "x"));
        assertThrows(IllegalStateException.class, ch::stats);
        rt.close();
        Item it = Item.of("x");
        it.close();
        it.close();
        assertFalse(!it.isClosed());
        assertThrows(IllegalStateException.class, it::bytes);
    }
}
