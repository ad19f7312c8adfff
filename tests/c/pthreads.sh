#!/bin/sh
# The pthreads face: its own test, then CableS' PN, PC and PIPE built as plain pthreads
# programs and against <stampede/pthread.h>, the latter across three address spaces; each
# must succeed, print the plain build's result, with three address spaces taking part.
#
#   tests/c/pthreads.sh C_DIR      (run from the repository's root; `make test-c` does)
set -u
dir=$1
fail=0
STAMPEDE_SPACES=3 timeout 120 "$dir/test_pthread" || fail=1
for args in "pn 100000 6" "pc 300" "pipe 60 3"; do
    set -- $args
    prog=$1
    shift
    plain=$(timeout 60 "$dir/pthreads/${prog}_native" "$@") || { echo "not ok - $prog (plain pthreads)"; fail=1; continue; }
    out=$(STAMPEDE_SPACES=3 STAMPEDE_REPORT=1 timeout 120 "$dir/pthreads/$prog" "$@" 2>"$dir/pthreads/$prog.err")
    rc=$?
    if [ $rc -eq 0 ] && [ "$out" = "$plain" ] && grep -q "^stampede: 3 address spaces;" "$dir/pthreads/$prog.err"; then
        echo "ok - $prog across 3 address spaces: $out"
        grep "^stampede: " "$dir/pthreads/$prog.err" | sed 's/^/# /'
    else
        echo "not ok - $prog across 3 address spaces (exit $rc): $out; plain: $plain"
        sed 's/^/# /' "$dir/pthreads/$prog.err"
        fail=1
    fi
done
exit $fail
