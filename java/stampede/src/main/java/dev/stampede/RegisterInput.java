package dev.stampede;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.MemorySegment;
import java.time.Duration;

/** A task's input connection to a register: reads its current value. */
public final class RegisterInput extends Connection<Register> {
    RegisterInput(MemorySegment ptr, Register register, Task task) {
        super(ptr, Native.INPUT_FREE[Kind.REGISTER.ordinal()], "input connection", register,
                task);
    }

    /** The current value, waiting for a first write as long as it takes. */
    public RegisterValue read() throws InterruptedException {
        return read(Waits.FOREVER);
    }

    /** The current value, waiting at most {@code timeout} for a first write. */
    public RegisterValue read(Duration timeout) throws InterruptedException {
        return read(Waits.millis(timeout));
    }

    /** The current value without waiting; {@link StampedeException.Unavailable} if none was
     * written. */
    public RegisterValue tryRead() {
        try {
            return read(0);
        } catch (InterruptedException e) {
            throw new AssertionError("a read that does not wait was interrupted", e);
        }
    }

    private RegisterValue read(long timeoutMs) throws InterruptedException {
        MemorySegment p = res.enter();
        try (Frame f = Frame.open()) {
            MemorySegment seq = f.mem.asSlice(0, 8);
            MemorySegment item = f.mem.asSlice(8, 8);
            Attempt a = waitMs -> {
                try {
                    return (int) Native.REGISTER_READ.invokeExact(p, waitMs, seq, item);
                } catch (Throwable t) {
                    throw Native.fail(t);
                }
            };
            await(a, timeoutMs, null, res);
            return new RegisterValue(seq.get(JAVA_LONG, 0), Item.adopt(item.get(ADDRESS, 0)));
        } finally {
            res.leave();
        }
    }
}
