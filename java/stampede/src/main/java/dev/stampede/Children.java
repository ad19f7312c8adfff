package dev.stampede;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * What was made from a runtime, so that releasing the runtime (closed, or unreachable and
 * cleaned) releases it first, in an order the C library accepts: connections, correlators and
 * subscriptions, then tasks, then containers; and then forgets the runtime's garbage handlers.
 * It holds no reference to the runtime, so the runtime's cleaning action can hold it.
 */
final class Children {
    static final int CONNECTION = 0;
    static final int TASK = 1;
    static final int CONTAINER = 2;

    private final List<Set<Runnable>> ranks = List.of(
            ConcurrentHashMap.newKeySet(), ConcurrentHashMap.newKeySet(),
            ConcurrentHashMap.newKeySet());
    private final Set<Long> garbageKeys = ConcurrentHashMap.newKeySet();

    void add(Resource r, int rank) {
        r.parent = this;
        ranks.get(rank).add(r);
    }

    /** {@code close} ends something that is not a {@link Resource} (a subscription). */
    void addCloser(Runnable close, int rank) {
        ranks.get(rank).add(close);
    }

    void remove(Runnable r) {
        for (Set<Runnable> s : ranks) {
            s.remove(r);
        }
    }

    /** A garbage handler of this runtime's containers, registered under {@code key}. */
    void addGarbageKey(long key) {
        garbageKeys.add(key);
    }

    private void closeAll() {
        for (Set<Runnable> s : ranks) {
            List<Runnable> now = new ArrayList<>(s);
            for (Runnable r : now) {
                r.run();
            }
        }
    }

    /** What releases the runtime {@code runtime}: its handle's close and cleaning action. */
    Runnable releasing(Resource runtime) {
        return () -> {
            closeAll();
            runtime.run();
            // The runtime is gone: a handler call still under way finds nobody to tell.
            for (Long key : garbageKeys) {
                Upcalls.forgetGarbageHandler(key);
            }
        };
    }
}
