"""The ``geval-spec`` command line: parse arguments, call one service, render, exit with the contract's code.

The command line collects garbage less often than Python's default. Starting a command builds objects that live
as long as the process (modules, pydantic's validators, typer's commands), and with the default thresholds
(a young collection every 700 allocations, promoting survivors into ever larger passes) the collector spends about
6% of a short command such as ``validate`` scanning them again and again (BENCHMARKS.md, validate). A young
collection every 100,000 allocations leaves at most that many objects waiting; importing :mod:`geval_spec` as a
library keeps the interpreter's settings.

NumPy's BLAS (OpenBLAS) runs on one thread unless the user says otherwise (``OPENBLAS_NUM_THREADS``,
``GOTO_NUM_THREADS`` or ``OMP_NUM_THREADS``). Loading OpenBLAS starts a thread per core, and they spin as they
start: 0.1-0.2 s of CPU at every command that imports NumPy, a tenth of a 10-case ``run``. The statistics are
NumPy's own loops and einsum, and the system-level bootstrap's one matrix product is small; ``report`` takes the
same time with one BLAS thread (BENCHMARKS.md, scale). Set before anything imports NumPy: OpenBLAS reads it once.
"""

import gc
import os

gc.set_threshold(100_000, 10, 10)
if not any(os.environ.get(name) for name in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")):
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
