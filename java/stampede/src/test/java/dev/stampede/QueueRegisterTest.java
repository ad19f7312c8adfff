package dev.stampede;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class QueueRegisterTest {
    @Test
    void each_queue_item_goes_to_one_getter_and_returns_if_unconsumed() throws Exception {
        try (Runtime rt = new Runtime()) {
            Queue q = rt.queue("jobs", 4);
            QueueOutput out = rt.task(0).attachOutput(q);
            QueueInput a = rt.task(Stampede.INFINITY).attachInput(q);
            Task bt = rt.task(Stampede.INFINITY);
            QueueInput b = bt.attachInput(q);
            long t1 = out.put(0, "one".getBytes());
            long t2 = out.put(1, "two".getBytes());
            assertNotEquals(t1, t2);
            QueueItem x = a.get();
            QueueItem y = b.get(Duration.ofSeconds(1));
            assertEquals(0, x.ts());
            assertEquals(1, y.ts());
            a.consume(x);
            x.close();
            assertThrows(StampedeException.UnknownTicket.class, () -> a.consume(x.ticket()));
            bt.close(); // y was held by b: it goes back to the queue
            y.close();
            try (QueueItem again = a.get(Duration.ofSeconds(1))) {
                assertEquals(1, again.ts());
                assertEquals("two", new String(again.item().bytes()));
            }
            QueueStats st = q.stats();
            assertEquals(2, st.puts());
            assertEquals(1, st.redelivered());
            assertThrows(StampedeException.Timeout.class, () -> a.get(Duration.ofMillis(30)));
        }
    }

    @Test
    void a_full_queue_hands_the_item_back() throws Exception {
        try (Runtime rt = new Runtime(); Item item = Item.of("x")) {
            Queue q = rt.queue(null, 1);
            QueueOutput out = rt.task(0).attachOutput(q);
            out.put(0, item);
            StampedeException e = assertThrows(StampedeException.Full.class, () -> out.tryPut(1, item));
            assertEquals(item, e.item());
        }
    }

    @Test
    void a_register_holds_the_latest_write() throws Exception {
        try (Runtime rt = new Runtime()) {
            Register r = rt.register("pose", 0);
            RegisterOutput w = rt.task(0).attachOutput(r);
            RegisterInput in = rt.task(0).attachInput(r);
            assertThrows(StampedeException.Unavailable.class, in::tryRead);
            assertThrows(StampedeException.Timeout.class, () -> in.read(Duration.ofMillis(30)));
            long s1 = w.write(Item.of("a"));
            long s2 = w.write(Item.of("b"));
            assertTrue(s2 > s1);
            try (RegisterValue v = in.read()) {
                assertEquals(s2, v.seq());
                assertEquals("b", v.item().text());
            }
            assertEquals(Kind.REGISTER, r.kind());
        }
    }
}
