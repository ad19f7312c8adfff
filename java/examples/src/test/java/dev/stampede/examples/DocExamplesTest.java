package dev.stampede.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The Java blocks of docs/java.md and the README compile against the library, and the
 * programs run. */
class DocExamplesTest {
    static final Path ROOT = InteropTest.ROOT;
    static Path classes;

    @BeforeAll
    static void compile() throws IOException {
        String doc = Files.readString(ROOT.resolve("docs/java.md"))
                + Files.readString(ROOT.resolve("README.md"));
        Matcher m = Pattern.compile("```java\\n(.*?)```", Pattern.DOTALL).matcher(doc);
        Path src = Files.createTempDirectory("stampede-doc-src");
        classes = Files.createTempDirectory("stampede-doc-classes");
        List<String> files = new ArrayList<>();
        while (m.find()) {
            Matcher name = Pattern.compile("public class (\\w+)").matcher(m.group(1));
            assertTrue(name.find(), "a java block without a public class");
            Path f = src.resolve(name.group(1) + ".java");
            Files.writeString(f, m.group(1));
            files.add(f.toString());
        }
        assertTrue(files.size() >= 3, "the docs show " + files.size() + " programs");
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        List<String> args = new ArrayList<>(List.of("-Xlint:all", "-Werror", "-cp",
                System.getProperty("java.class.path"), "-d", classes.toString()));
        args.addAll(files);
        assertEquals(0, javac.run(null, null, null, args.toArray(String[]::new)),
                "the examples of docs/java.md do not compile");
    }

    static String runMain(String cls) throws Exception {
        PrintStream was = System.out;
        ByteArrayOutputStream got = new ByteArrayOutputStream();
        try (URLClassLoader l = new URLClassLoader(new URL[] {classes.toUri().toURL()},
                DocExamplesTest.class.getClassLoader())) {
            System.setOut(new PrintStream(got, true, StandardCharsets.UTF_8));
            l.loadClass(cls).getMethod("main", String[].class)
                    .invoke(null, (Object) new String[0]);
        } finally {
            System.setOut(was);
        }
        return got.toString(StandardCharsets.UTF_8);
    }

    @Test
    void the_readme_example_runs() throws Exception {
        assertEquals("0: frame 0", runMain("Hello").strip());
    }

    @Test
    void the_embedded_example_runs() throws Exception {
        String got = runMain("Frames");
        assertTrue(got.startsWith("2 F32 2.0"), got);
    }

    static Process java(String... args) throws IOException {
        List<String> cmd = new ArrayList<>(List.of(
                ProcessHandle.current().info().command().orElse("java"),
                "--enable-native-access=ALL-UNNAMED",
                "-Dstampede.library=" + System.getProperty("stampede.library"), "-cp",
                System.getProperty("java.class.path") + File.pathSeparator + classes));
        cmd.addAll(List.of(args));
        return new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    }

    @Test
    void the_pipe_example_runs_in_two_processes() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
        }
        String endpoint = "tcp/127.0.0.1:" + port;
        Process consumer = java("Pipe", "consumer", endpoint);
        Process producer = java("Pipe", "producer", endpoint);
        assertTrue(producer.waitFor(60, TimeUnit.SECONDS), "the producer did not finish");
        assertTrue(consumer.waitFor(60, TimeUnit.SECONDS), "the consumer did not finish");
        String out = new String(consumer.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, producer.exitValue());
        assertEquals(0, consumer.exitValue(), out);
        assertEquals(10, out.lines().filter(l -> l.startsWith("got ")).count(), out);
    }
}
