# Sourced by script tests that run the build's own programs, so that they
# run under HAK_TEST_EMULATOR too (make test-aarch64: qemu-user). The
# first two replace the calling shell (exec: no shell is left to report a
# signal), so they are called in a subshell.
#   emulated PROG ARGS...          PROG under the emulator, or as it is
#   preloaded LIB PROG ARGS...     the same with LD_PRELOAD=LIB for PROG only
#                                  (qemu's -E: the emulator itself is a host
#                                  program, which the library cannot enter)
#   drop_emulator_lines FILE       takes qemu's report of a guest's fatal
#                                  signal off a captured stderr
emulated() {
  if [ -n "${HAK_TEST_EMULATOR:-}" ]; then exec $HAK_TEST_EMULATOR "$@"; else exec "$@"; fi
}
preloaded() {
  preload_lib=$1; shift
  if [ -n "${HAK_TEST_EMULATOR:-}" ]; then exec $HAK_TEST_EMULATOR -E "LD_PRELOAD=$preload_lib" "$@"
  else LD_PRELOAD=$preload_lib exec "$@"; fi
}
drop_emulator_lines() {
  [ -z "${HAK_TEST_EMULATOR:-}" ] || sed -i '/^qemu: uncaught target signal/d' "$1"
}
