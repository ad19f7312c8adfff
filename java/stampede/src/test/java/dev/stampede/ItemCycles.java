package dev.stampede;

import java.lang.foreign.Arena;
import java.lang.foreign.ValueLayout;

/**
 * Put/get cycles of 1 KiB items, in a JVM of its own with the settings {@link NativeMemory}
 * needs: after 20,000 cycles of warm-up it reads native memory, runs {@code CYCLES} more, lets
 * the cleaner finish and reads again, and exits with status 1 past {@link LifeCycle}'s bounds.
 * One leaked item per cycle would be about 100 MiB; sixteen bytes per cycle, 1.6 MiB. Run by
 * {@link LeakTest}: {@code ItemCycles closed|cleaner CYCLES}.
 */
final class ItemCycles {
    private ItemCycles() {}

    static final int WARM_UP = 20_000;

    /** Each item and what a get returned is closed, or (every view aside) left to the cleaner. */
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

    public static void main(String[] args) throws Exception {
        boolean close = switch (args[0]) {
            case "closed" -> true;
            case "cleaner" -> false;
            default -> throw new IllegalArgumentException("closed or cleaner, not " + args[0]);
        };
        int n = Integer.parseInt(args[1]);
        NativeMemory.checkSettings();
        try (Runtime rt = new Runtime()) {
            cycles(rt, WARM_UP, close);
            NativeMemory before = LifeCycle.settled(null);
            long t0 = System.nanoTime();
            cycles(rt, n, close);
            long ms = (System.nanoTime() - t0) / 1_000_000;
            NativeMemory after = LifeCycle.settled(before);
            System.out.printf("%,d put/get cycles of 1 KiB, items %s, in %,d ms%n  before: %s%n"
                            + "  after:  %s%n", n, close ? "closed" : "left to the cleaner", ms,
                    before, after.minus(before));
            if (!LifeCycle.within(before, after)) {
                System.out.println("  LEAK: put/get cycles left native memory behind");
                System.exit(1);
            }
        }
    }
}
