package dev.stampede;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

/**
 * 100,000 put/get cycles leave the native heap where it was: the bytes malloc has handed out
 * and not got back (glibc's {@code mallinfo2}, summed over its arenas), which the Java heap
 * does not blur. {@link LifeCycleLeakTest} runs the face's whole life cycle.
 */
class LeakTest {
    static long nativeKb() {
        return NativeMemory.mallocedBytes() / 1024;
    }

    static void settle() throws InterruptedException {
        for (int i = 0; i < 3; i++) {
            System.gc();
            Thread.sleep(100);
        }
    }

    static void cycles(Runtime rt, int n, boolean close) throws Exception {
        Channel ch = rt.channel();
        try (Task p = rt.task(Stampede.AT_FLOOR); Task c = rt.task(Stampede.AT_FLOOR)) {
            ChannelOutput out = p.attachOutput(ch);
            ChannelInput in = c.attachInput(ch);
            byte[] payload = new byte[1024];
            long base = p.virtualTime();
            for (int i = 0; i < n; i++) {
                long ts = base + i;
                Item item = Item.of(payload);
                out.put(ts, item);
                Stamped s = in.get(ts);
                if (close) {
                    try (Arena a = Arena.ofConfined()) {
                        s.item().segment(a).get(ValueLayout.JAVA_BYTE, 0);
                    }
                } else if (i % 100 == 0) {
                    s.item().segment().get(ValueLayout.JAVA_BYTE, 0);
                }
                in.consume(ts);
                p.setVirtualTime(ts + 1);
                c.setVirtualTime(ts + 1);
                if (close) {
                    item.close();
                    s.close();
                }
            }
        }
        ch.close();
    }

    @Test
    void put_get_cycles_do_not_leak_native_memory() throws Throwable {
        try (Runtime rt = new Runtime()) {
            cycles(rt, 20_000, true); // warm up: per-thread memory, caches, JIT
            settle();
            long before = nativeKb();
            cycles(rt, 100_000, true);
            settle();
            long grown = nativeKb() - before;
            System.out.printf("native heap after 100,000 closed put/get cycles of 1 KiB: %+d KiB%n",
                    grown);
            // One leaked 1 KiB item per cycle would be about 100 MiB.
            assertTrue(grown < 1024, "the native heap grew by " + grown + " KiB");
        }
    }

    @Test
    void items_left_to_the_cleaner_are_released_too() throws Throwable {
        try (Runtime rt = new Runtime()) {
            cycles(rt, 20_000, false);
            settle();
            long before = nativeKb();
            cycles(rt, 100_000, false);
            settle();
            long grown = nativeKb() - before;
            System.out.printf("native heap after 100,000 put/get cycles left to the cleaner: %+d KiB%n",
                    grown);
            assertTrue(grown < 1024, "the native heap grew by " + grown + " KiB");
        }
    }
}
