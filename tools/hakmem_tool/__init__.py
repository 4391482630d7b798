"""hakmem — run programs on the hakmem allocator, compare it with other allocators,
and decide tuning changes by paired A/B runs.

  hakmem run [--stats[=json:PATH]] [--lib PATH] -- CMD ARGS...
  hakmem options [--lib PATH]
  hakmem bench [--quick] [--suite bench|programs|all] [--runs N] [--bench NAME]...
               [--program NAME]... [--alloc NAME]... [--lib NAME=PATH]...
  hakmem ab [--a 'ENV=VAL ...'] [--b '...'] [--a-lib LIB] [--b-lib LIB] [--pairs N]
            [--metric auto|wall|cpu|throughput] [--seed S] -- CMD ARGS...
  hakmem ab --aa [--trials N] [--pairs N] -- CMD ARGS...
  hakmem pairs [--lib NAME|PATH|NAME=PATH]...
  hakmem chart RESULTS_DIR

Standard library only; matplotlib (chart) is used when present, gnuplot as the fallback.
See docs/benchmarks.md for the method.

Modules, one job each: cli (command line), runner (one run, measured), stats (statistics
and the A/B decision), allocators (finding hakmem, glibc and the peers), machine (the
machine and the results folder), suites (the bench/ table), bench (running the suites),
report (Markdown tables), chart, ab, pairs, programs (the program suite)."""
