#!/bin/sh
# Compiles and runs every ```c block of README.md and docs/*.md as a whole program, with the
# flags and library of the C tests:
#
#   tests/c/doc_examples.sh OUT_DIR CC "C_FLAGS" C_LIB "C_LIBS"
#
# Run from the repository's root (`make test-c` does). Prints TAP, naming each block by the
# file and line of its opening fence; exits non-zero when a block does not compile, fails
# when run, or is not terminated.
set -u

if [ $# -ne 5 ] || [ -z "$1" ]; then
    echo "usage: $0 OUT_DIR CC C_FLAGS C_LIB C_LIBS" >&2
    exit 2
fi
out=$1 cc=$2 cflags=$3 lib=$4 libs=$5
rm -rf "$out" && mkdir -p "$out" || exit 1

# Each block goes to OUT_DIR/<n>.c; OUT_DIR/index lists "<n> <file>:<line>".
blocks=0
for md in README.md docs/*.md; do
    blocks=$(awk -v md="$md" -v out="$out" -v n="$blocks" '
        in_block && /^```[ \t]*$/ { in_block = 0; close(file); next }
        in_block { print > file; next }
        /^```[ \t]*c[ \t]*$/ {
            in_block = 1; start = NR; n++
            file = out "/" n ".c"
            # Compiler messages name the markdown file and line.
            printf "#line %d \"%s\"\n", NR + 1, md > file
            print n, md ":" NR >> (out "/index")
            next
        }
        END {
            if (in_block) {
                printf "%s:%d: the code block is not terminated\n", md, start > "/dev/stderr"
                exit 1
            }
            print n
        }
    ' "$md") || exit 1
done

failed=0
echo "1..$blocks"
[ "$blocks" -eq 0 ] && exit 0
while read -r n where; do
    bin=$out/$n
    # shellcheck disable=SC2086 # the flags are separate words
    if ! $cc $cflags "$bin.c" "$lib" $libs -o "$bin" >"$bin.log" 2>&1; then
        echo "not ok $n - $where does not compile"
        sed 's/^/# /' "$bin.log"
        failed=$((failed + 1))
    elif ! "$bin" >"$bin.log" 2>&1; then
        echo "not ok $n - $where fails when run"
        sed 's/^/# /' "$bin.log"
        failed=$((failed + 1))
    else
        echo "ok $n - $where"
    fi
done <"$out/index"
echo "# doc examples: passed=$((blocks - failed)) failed=$failed total=$blocks"
[ "$failed" -eq 0 ]
