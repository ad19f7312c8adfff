package dev.stampede;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Two address spaces of one application in this JVM: a router and a client. */
class SpaceTest {
    static Space router;
    static Space client;

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    @BeforeAll
    static void join() throws Exception {
        String endpoint = "tcp/127.0.0.1:" + freePort();
        String app = "jtest" + ProcessHandle.current().pid();
        Duration t = Duration.ofSeconds(5);
        router = Space.join(app, Config.router(endpoint).timeouts(t, t, t));
        client = Space.join(app, Config.client(endpoint).timeouts(t, t, t));
    }

    @AfterAll
    static void leave() {
        client.close();
        router.close();
    }

    @Test
    void one_program_reaches_a_channel_another_space_owns() throws Exception {
        Channel owned = router.channel("sp/frames", 16);
        assertTrue(owned.isLocal());
        Channel ch = client.lookupChannel("sp/frames", Duration.ofSeconds(5));
        assertFalse(ch.isLocal());
        // The application's zones are shared: a task starts at the floor they reached.
        try (Task p = client.task(Stampede.AT_FLOOR); Task c = client.task(Stampede.INFINITY)) {
            ChannelOutput out = p.attachOutput(ch);
            ChannelInput in = c.attachInput(ch);
            long base = p.virtualTime();
            for (long ts = base; ts < base + 20; ts++) {
                out.put(ts, Item.ofArray(new long[] {2}, new float[] {ts, -ts}));
                try (Stamped s = in.get(Selector.NEXT_UNSEEN, Duration.ofSeconds(5))) {
                    assertEquals(ts, s.ts());
                    assertEquals((float) -ts, s.item().floats()[1]);
                }
                in.consume(ts);
                p.setVirtualTime(ts + 1); // lets the owner reclaim what is consumed
            }
            out.flush();
        }
        SpaceStats st = client.stats();
        assertTrue(st.putsSent() >= 20, st.toString());
        assertTrue(router.stats().served() > 0);
        assertNotEquals(router.id(), client.id());
    }

    @Test
    void containers_made_elsewhere_and_arrivals_cross_spaces() throws Exception {
        Queue q = router.queue("sp/jobs");
        Queue remote = client.lookupQueue("sp/jobs", Duration.ofSeconds(5));
        List<Long> arrived = new CopyOnWriteArrayList<>();
        try (Subscription s = remote.onArrival(arrived::add);
             Task p = router.task(Stampede.AT_FLOOR); Task c = client.task(Stampede.INFINITY)) {
            QueueInput in = c.attachInput(remote);
            long at = p.virtualTime() + 7;
            p.attachOutput(q).put(at, "job".getBytes());
            // A virtual thread waits on the remote queue without holding a carrier.
            Thread v = Thread.ofVirtual().start(() -> {
                try (QueueItem it = in.get(Duration.ofSeconds(5))) {
                    in.consume(it);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            v.join(10_000);
            long deadline = System.nanoTime() + 5_000_000_000L;
            while (arrived.isEmpty() && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertEquals(List.of(at), arrived);
            assertEquals(1, q.stats().consumed());
        }
        Register r = client.register("sp/pose", 0);
        Register rr = router.lookupRegister("sp/pose", Duration.ofSeconds(5));
        try (Task w = router.task(Stampede.AT_FLOOR); Task rd = client.task(Stampede.AT_FLOOR)) {
            long seq = w.attachOutput(rr).write(Item.of("here"));
            try (RegisterValue v = rd.attachInput(r).read(Duration.ofSeconds(5))) {
                assertEquals(seq, v.seq());
                assertEquals("here", v.item().text());
            }
        }
    }

    @Test
    void virtual_threads_put_and_get_across_spaces() throws Exception {
        // A zone of its own: this test moves its floor, which the others' tasks must not see.
        router.channel("sp/virtual", 4, 1);
        Channel ch = client.lookupChannel("sp/virtual", Duration.ofSeconds(5));
        Channel owned = router.lookupChannel("sp/virtual", Duration.ofSeconds(5));
        java.util.concurrent.atomic.AtomicReference<Throwable> failed =
                new java.util.concurrent.atomic.AtomicReference<>();
        try (Task p = client.task(Stampede.AT_FLOOR, 1, "vp");
             Task c = router.task(Stampede.AT_FLOOR, 1, "vc")) {
            ChannelOutput out = p.attachOutput(ch);
            ChannelInput in = c.attachInput(owned);
            long base = Math.max(p.virtualTime(), c.virtualTime());
            // The producer fills the bounded channel and waits for room off its carrier.
            Thread producer = Thread.ofVirtual().start(() -> {
                try {
                    for (long ts = base; ts < base + 40; ts++) {
                        out.put(ts, "v" + ts);
                    }
                    out.flush();
                } catch (Throwable e) {
                    failed.set(e);
                }
            });
            Thread consumer = Thread.ofVirtual().start(() -> {
                try {
                    for (long ts = base; ts < base + 40; ts++) {
                        try (Stamped s = in.get(Selector.NEXT_UNSEEN, Duration.ofSeconds(10))) {
                            assertEquals("v" + ts, s.item().text());
                        }
                        in.consume(ts);
                        c.setVirtualTime(ts + 1);
                        p.setVirtualTime(Math.max(p.virtualTime(), ts + 1));
                    }
                } catch (Throwable e) {
                    failed.set(e);
                }
            });
            producer.join(30_000);
            consumer.join(30_000);
            assertEquals(null, failed.get());
            assertFalse(producer.isAlive() || consumer.isAlive());
        }
    }

    @Test
    void names_are_checked() {
        assertThrows(StampedeException.InvalidName.class, () -> client.channel("a/*"));
        assertThrows(StampedeException.InvalidName.class, () -> client.queue(""));
    }

    @Test
    void join_errors_are_typed() {
        assertThrows(StampedeException.ConfigError.class,
                () -> Space.join("bad", Config.client("not an endpoint")));
        assertThrows(StampedeException.InvalidName.class,
                () -> Space.join("a/b", Config.peer()));
    }
}
