"""The name the benchmark gives each iteration in a profiler's trace: ``record_function(
"aorta.iteration#N")`` between the iteration's two ``time.time_ns()`` stamps, a marker both the
trace and the telemetry hold, from which the timeline checks the trace's clock
(:mod:`aorta_core.reports.clock_check`)."""

ITERATION_MARKER = "aorta.iteration#"
