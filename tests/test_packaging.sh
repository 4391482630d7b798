#!/bin/sh
# Packages: `make install PREFIX=tmp` gives a tree where pkg-config and CMake's
# find_package(hakmem) (the target hakmem::hakmem) build a program that runs on
# hakmem, and `make deb` gives a package holding the expected files. The CMake
# part is skipped without cmake, the package part without dpkg-deb.
set -u
build=${HAK_TEST_BUILD:?HAK_TEST_BUILD must name the build folder}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
prefix=$tmp/prefix
make -s -C "$root" --no-print-directory BUILD="$build" install PREFIX="$prefix" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; echo "FAIL: make install"; exit 1; }
for f in lib/libhakmem.a lib/libhakmem.so include/hakmem.h bin/hakmem lib/pkgconfig/hakmem.pc \
    lib/cmake/hakmem/hakmemConfig.cmake lib/cmake/hakmem/hakmemConfigVersion.cmake \
    lib/hakmem/hakmem_tool/cli.py share/man/man1/hakmem.1.gz; do
  [ -e "$prefix/$f" ] || fail "make install did not install $f"
done
soname=$(readelf -d "$prefix/lib/libhakmem.so" 2>/dev/null | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = libhakmem.so.0 ] || fail "SONAME is '$soname', not libhakmem.so.0"
[ -L "$prefix/lib/libhakmem.so.0" ] || fail "no libhakmem.so.0 link"

# The program uses the hak_ API and malloc; HAKMEM_STATS=1 shows that malloc is hakmem's.
cat >"$tmp/app.c" <<'C'
#include <hakmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void) {
  char *p = malloc(100), *q = hak_malloc(64);
  if (!p || !q) return 1;
  strcpy(p, "hakmem"); strcpy(q, p);
  puts(q);
  hak_free(q); free(p);
  return 0;
}
C
# check NAME PROGRAM: it prints "hakmem", exits 0 and is served by the installed library.
check() {
  out=$(HAKMEM_STATS=1 LD_LIBRARY_PATH="$prefix/lib" "$2" 2>"$tmp/$1.err") || fail "$1: exit status $?"
  [ "$out" = hakmem ] || fail "$1: printed '$out'"
  grep -qi hakmem "$tmp/$1.err" || fail "$1: HAKMEM_STATS=1 printed no hakmem report"
  LD_LIBRARY_PATH="$prefix/lib" ldd "$2" | grep -q "$prefix/lib/libhakmem.so.0" ||
    fail "$1: not linked with the installed libhakmem.so.0"
  echo "checked $1"
}
if command -v pkg-config >/dev/null; then
  flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs hakmem) || fail "pkg-config hakmem"
  cc "$tmp/app.c" $flags -o "$tmp/app-pc" && check pkg-config "$tmp/app-pc" || fail "pkg-config: build failed"
else
  echo "SKIP pkg-config: pkg-config is not installed"
fi

if command -v cmake >/dev/null; then
  mkdir "$tmp/cm"; cp "$tmp/app.c" "$tmp/cm/"
  cat >"$tmp/cm/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.13)
project(app C)
find_package(hakmem 0.1 REQUIRED)
add_executable(app app.c)
target_link_libraries(app PRIVATE hakmem::hakmem)
CM
  # A sanitizer build's libhakmem.a needs the sanitizer runtime linked in: shared only there.
  case "$build" in *ubsan*|*asan*) static=0 ;; *) static=1
    printf 'add_executable(app_static app.c)\ntarget_link_libraries(app_static PRIVATE hakmem::hakmem_static)\n' \
      >>"$tmp/cm/CMakeLists.txt" ;;
  esac
  if cmake -S "$tmp/cm" -B "$tmp/cm/b" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/cmake.log" 2>&1 &&
     cmake --build "$tmp/cm/b" >>"$tmp/cmake.log" 2>&1; then
    check cmake "$tmp/cm/b/app"
    if [ "$static" = 1 ]; then
      out=$(HAKMEM_STATS=1 "$tmp/cm/b/app_static" 2>"$tmp/static.err") && [ "$out" = hakmem ] &&
        grep -qi hakmem "$tmp/static.err" && echo "checked cmake hakmem::hakmem_static" ||
        fail "cmake: the hakmem::hakmem_static program did not run on hakmem"
    fi
  else
    tail -n 20 "$tmp/cmake.log"; fail "cmake: find_package(hakmem) project did not build"
  fi
  # A major version this install is not must be refused.
  sed -i 's/hakmem 0.1 REQUIRED/hakmem 1.0 REQUIRED/' "$tmp/cm/CMakeLists.txt"
  if cmake -S "$tmp/cm" -B "$tmp/cm/b1" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/cmake1.log" 2>&1; then
    fail "cmake: find_package(hakmem 1.0) accepted version 0.1.0"
  fi
else
  echo "SKIP cmake: cmake is not installed (apt-get install cmake)"
fi

if command -v dpkg-deb >/dev/null; then
  if make -s -C "$root" --no-print-directory BUILD="$build" DEB_DIR="$tmp/deb" deb >"$tmp/deb.log" 2>&1; then
    deb=$(ls "$tmp"/deb/hakmem_*.deb)
    dpkg-deb -c "$deb" | awk '{print $6}' >"$tmp/contents"
    for f in ./usr/lib/libhakmem.so.0.1.0 ./usr/lib/libhakmem.so.0 ./usr/lib/libhakmem.so ./usr/lib/libhakmem.a \
        ./usr/include/hakmem.h ./usr/lib/pkgconfig/hakmem.pc ./usr/lib/cmake/hakmem/hakmemConfig.cmake \
        ./usr/lib/cmake/hakmem/hakmemConfigVersion.cmake ./usr/bin/hakmem ./usr/lib/hakmem/hakmem_tool/cli.py \
        ./usr/share/man/man1/hakmem.1.gz; do
      grep -qx "$f" "$tmp/contents" || fail "deb: $f missing from the package"
    done
    grep -q '^prefix=/usr$' "$tmp/deb/stage/usr/lib/pkgconfig/hakmem.pc" || fail "deb: hakmem.pc prefix is not /usr"
    [ "$(dpkg-deb -f "$deb" Package)" = hakmem ] || fail "deb: package name"
    echo "checked $(basename "$deb"): $(wc -l <"$tmp/contents") entries"
  else
    tail -n 20 "$tmp/deb.log"; fail "make deb failed"
  fi
else
  echo "SKIP deb: dpkg-deb is not installed"
fi
if [ "$failures" -ne 0 ]; then echo "$failures failures"; exit 1; fi
echo "packaging ok"
