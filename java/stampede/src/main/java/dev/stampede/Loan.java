package dev.stampede;

import static java.lang.foreign.ValueLayout.ADDRESS;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.ref.Cleaner;

/**
 * Memory lent for one item ({@link ChannelOutput#loan}): fill {@link #segment()}, then
 * {@link #finish()} it into the item to put. The segment is invalid after finish or close (and
 * once the loan is unreachable), so it is never written after the memory is given back.
 */
public final class Loan implements AutoCloseable {
    /** What the cleaner gives back; holds no reference to the loan. */
    private static final class State implements Runnable {
        final Resource res;
        final Arena arena = Arena.ofShared();
        boolean done;

        State(MemorySegment loan) {
            res = new Resource(loan, Native.LOAN_FREE, "loan");
        }

        @Override
        public synchronized void run() {
            if (!done) {
                done = true;
                arena.close();
                res.run();
            }
        }
    }

    private final State state;
    private final Cleaner.Cleanable cleanable;
    private final MemorySegment data;

    Loan(MemorySegment loan, MemorySegment data, long len) {
        state = new State(loan);
        cleanable = Handle.CLEANER.register(this, state);
        this.data = data.reinterpret(len, state.arena, null);
    }

    /** The lent memory, writable until the loan is finished or closed. */
    public MemorySegment segment() {
        return data;
    }

    /** Whether the memory is shared with the channel's owner (the put copies nothing). */
    public boolean inPlace() {
        MemorySegment p = state.res.enter();
        try {
            return (boolean) Native.LOAN_IN_PLACE.invokeExact(p);
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            state.res.leave();
        }
    }

    /** Turns the filled memory into an item without copying (the loan is used up). */
    public Item finish() {
        synchronized (state) {
            if (state.done) {
                throw new IllegalStateException("the loan is finished");
            }
            state.done = true;
            state.arena.close();
            MemorySegment p = state.res.enter();
            try (Frame f = Frame.open()) {
                int s = (int) Native.LOAN_FINISH.invokeExact(p, f.mem);
                Status.check(s);
                return Item.adopt(f.mem.get(ADDRESS, 0));
            } catch (Throwable t) {
                throw Native.fail(t);
            } finally {
                state.res.leave();
                // The C library took the loan over, whatever the outcome.
                state.res.forget();
            }
        }
    }

    /** Gives the memory back unused (nothing if already finished). */
    @Override
    public void close() {
        cleanable.clean();
    }
}
