"""Analysis: stored judgments -> frame -> calibration, gate, sweep, diagnostics, compare, audit (typed results)."""
