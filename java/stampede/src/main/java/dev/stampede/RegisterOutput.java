package dev.stampede;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.MemorySegment;

/** A task's output connection to a register: writes replace its value. */
public final class RegisterOutput extends Connection<Register> {
    RegisterOutput(MemorySegment ptr, Register register, Task task) {
        super(ptr, Native.OUTPUT_FREE[Kind.REGISTER.ordinal()], "output connection", register,
                task);
    }

    /** Writes {@code item}; returns the write's sequence number. */
    public long write(Item item) {
        MemorySegment p = res.enter();
        MemorySegment it = item.res.enter();
        try (Frame f = Frame.open()) {
            int s = (int) Native.REGISTER_WRITE.invokeExact(p, it, f.mem);
            if (s != 0) {
                throw StampedeException.last(Status.of(s), null, item);
            }
            return f.mem.get(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            item.res.leave();
            res.leave();
        }
    }
}
