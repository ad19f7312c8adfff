package dev.stampede;

import java.io.IOException;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * 100,000 put/get cycles leave native memory where it was, with items closed or left to the
 * cleaner. Each runs {@link ItemCycles} in a JVM of its own, at once: measured inside the test
 * JVM, what earlier tests left to the cleaner was released during the cycles and hid megabytes
 * either way. {@link LifeCycleLeakTest} runs the face's whole life cycle.
 */
class LeakTest {
    static final int CYCLES = 100_000;
    private static final Map<String, NativeMemory.Run> RUNS = new HashMap<>();

    @BeforeAll
    static void start() throws IOException {
        for (String mode : new String[] {"closed", "cleaner"}) {
            RUNS.put(mode, NativeMemory.Run.start(ItemCycles.class, mode, String.valueOf(CYCLES)));
        }
    }

    @AfterAll
    static void stop() throws IOException {
        for (NativeMemory.Run run : RUNS.values()) {
            run.close();
        }
    }

    @Test
    void put_get_cycles_do_not_leak_native_memory() throws Exception {
        RUNS.get("closed").passes();
    }

    @Test
    void items_left_to_the_cleaner_are_released_too() throws Exception {
        RUNS.get("cleaner").passes();
    }
}
