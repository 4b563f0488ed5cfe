"""The ``geval-spec`` command line: parse arguments, call one service, render, exit with the contract's code.

The command line collects garbage less often than Python's default. Starting a command builds objects that live
as long as the process (modules, pydantic's validators, typer's commands), and with the default thresholds
(a young collection every 700 allocations, promoting survivors into ever larger passes) the collector spends about
6% of a short command such as ``validate`` scanning them again and again (BENCHMARKS.md, validate). A young
collection every 100,000 allocations leaves at most that many objects waiting; importing :mod:`geval_spec` as a
library keeps the interpreter's settings.
"""

import gc

gc.set_threshold(100_000, 10, 10)
