package dev.stampede;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.EnumMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
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

    private static final Map<LifeCycle.Ending, Process> RUNS =
            new EnumMap<>(LifeCycle.Ending.class);
    private static final Map<LifeCycle.Ending, Path> OUTPUTS =
            new EnumMap<>(LifeCycle.Ending.class);

    @BeforeAll
    static void start() throws IOException {
        for (LifeCycle.Ending ending : LifeCycle.Ending.values()) {
            Path out = Files.createTempFile("stampede-life-cycle", ".txt");
            ProcessBuilder pb = new ProcessBuilder(
                    ProcessHandle.current().info().command().orElse("java"),
                    "--enable-native-access=ALL-UNNAMED", "-XX:NativeMemoryTracking=summary",
                    // A heap of fixed size, touched at the start, so that RSS shows the rest.
                    "-Xms128m", "-Xmx128m", "-XX:+AlwaysPreTouch",
                    "-Dstampede.library=" + System.getProperty("stampede.library"),
                    "-cp", System.getProperty("java.class.path"),
                    LifeCycle.class.getName(), ending.name(), String.valueOf(LIVES))
                    .redirectErrorStream(true).redirectOutput(out.toFile());
            String tunables = pb.environment().get("GLIBC_TUNABLES");
            pb.environment().put("GLIBC_TUNABLES", (tunables == null ? "" : tunables + ":")
                    + "glibc.malloc.tcache_count=0");
            OUTPUTS.put(ending, out);
            RUNS.put(ending, pb.start());
        }
    }

    @AfterAll
    static void stop() throws IOException {
        for (Process p : RUNS.values()) {
            p.destroyForcibly();
        }
        for (Path out : OUTPUTS.values()) {
            Files.deleteIfExists(out);
        }
    }

    static void lives(LifeCycle.Ending ending) throws Exception {
        Process p = RUNS.get(ending);
        boolean ended = p.waitFor(10, TimeUnit.MINUTES);
        String got = Files.readString(OUTPUTS.get(ending));
        System.out.print(got);
        assertTrue(ended, "the life cycle did not end within 10 minutes:\n" + got);
        assertEquals(0, p.exitValue(), got);
    }

    @Test
    void lives_that_close_everything_leave_nothing_behind() throws Exception {
        lives(LifeCycle.Ending.CLOSED);
    }

    @Test
    void lives_that_close_only_the_runtime_leave_nothing_behind() throws Exception {
        lives(LifeCycle.Ending.RUNTIME_CLOSED);
    }

    @Test
    void lives_left_to_the_cleaner_leave_nothing_behind() throws Exception {
        lives(LifeCycle.Ending.NOTHING_CLOSED);
    }
}
