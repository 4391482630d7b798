#!/bin/sh
# The options table in the code and the one in README.md name the same
# options, and `hakmem options` prints them all.
set -u
build=${HAK_TEST_BUILD:?HAK_TEST_BUILD must name the build folder}
root=$(cd "$(dirname "$0")/.." && pwd)
code=$(HAKMEM_PRINT_OPTIONS=1 LD_PRELOAD="$build/libhakmem.so" /bin/true 2>&1 | grep -o '^HAKMEM_[A-Z0-9_]*' | sort)
docs=$(grep -o '^| `HAKMEM_[A-Z0-9_]*`' "$root/README.md" | tr -d '|` ' | sort)
[ -n "$code" ] || { echo "FAIL: HAKMEM_PRINT_OPTIONS=1 printed no options"; exit 1; }
if [ "$code" != "$docs" ]; then
  echo "FAIL: options in the code and in README.md differ:"
  printf 'code:\n%s\nREADME:\n%s\n' "$code" "$docs"
  exit 1
fi
echo "$(echo "$code" | wc -l) options documented"
