#!/bin/sh
# The differential fuzzer as a plain program (plain_fuzz, never linked with
# hakmem): under LD_PRELOAD=libhakmem.so, then under glibc's malloc (the model
# must hold there too; the 25% bound on usable sizes is hakmem's promise only:
# glibc's realloc grown in place breaks it). Fixed seeds, a few seconds.
set -u
build=${HAK_TEST_BUILD:?HAK_TEST_BUILD must name the build folder}
status=0
LD_PRELOAD="$build/libhakmem.so" "$build/tests/plain_fuzz" --seed 11 --ops 60000 || status=1
LD_PRELOAD="$build/libhakmem.so" "$build/tests/plain_fuzz" --seed 12 --ops 60000 --threads 2 || status=1
"$build/tests/plain_fuzz" --seed 13 --ops 60000 || status=1
exit $status
