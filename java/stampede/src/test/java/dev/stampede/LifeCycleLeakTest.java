package dev.stampede;

import java.io.IOException;
import java.util.EnumMap;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The face's whole life cycle leaves no native memory behind, however it ends: each ending
 * runs {@link LifeCycle} in a JVM of its own, with the settings its figures need (see
 * {@link NativeMemory}), for {@code -Dstampede.leak.lives} lives (300 by default;
 * {@code make leak-java} runs more). The three JVMs run at once: each measures only itself.
 */
class LifeCycleLeakTest {
    static final int LIVES = Integer.getInteger("stampede.leak.lives", 300);

    private static final Map<LifeCycle.Ending, NativeMemory.Run> RUNS =
            new EnumMap<>(LifeCycle.Ending.class);

    @BeforeAll
    static void start() throws IOException {
        for (LifeCycle.Ending ending : LifeCycle.Ending.values()) {
            RUNS.put(ending, NativeMemory.Run.start(LifeCycle.class, ending.name(),
                    String.valueOf(LIVES)));
        }
    }

    @AfterAll
    static void stop() throws IOException {
        for (NativeMemory.Run run : RUNS.values()) {
            run.close();
        }
    }

    @Test
    void lives_that_close_everything_leave_nothing_behind() throws Exception {
        RUNS.get(LifeCycle.Ending.CLOSED).passes();
    }

    @Test
    void lives_that_close_only_the_runtime_leave_nothing_behind() throws Exception {
        RUNS.get(LifeCycle.Ending.RUNTIME_CLOSED).passes();
    }

    @Test
    void lives_left_to_the_cleaner_leave_nothing_behind() throws Exception {
        RUNS.get(LifeCycle.Ending.NOTHING_CLOSED).passes();
    }
}
