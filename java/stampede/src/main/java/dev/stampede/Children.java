package dev.stampede;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The handles made from a runtime, so that closing the runtime closes them first, in an order
 * the C library accepts: connections and subscriptions, then tasks, then containers.
 */
final class Children {
    static final int CONNECTION = 0;
    static final int TASK = 1;
    static final int CONTAINER = 2;

    private final List<Set<Resource>> ranks = List.of(
            ConcurrentHashMap.newKeySet(), ConcurrentHashMap.newKeySet(),
            ConcurrentHashMap.newKeySet());

    void add(Resource r, int rank) {
        r.parent = this;
        ranks.get(rank).add(r);
    }

    void remove(Resource r) {
        for (Set<Resource> s : ranks) {
            s.remove(r);
        }
    }

    void closeAll() {
        for (Set<Resource> s : ranks) {
            List<Resource> now = new ArrayList<>(s);
            for (Resource r : now) {
                r.run();
            }
        }
    }
}
