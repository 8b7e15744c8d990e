"""Running measurements: the benchmark grid (``semcodec-bench run``), its executors, the task-
feature benchmark, side-by-side pictures and the detector's split-point costs."""
