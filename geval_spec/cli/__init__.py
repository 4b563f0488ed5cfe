"""The ``geval-spec`` command line: parse arguments, call one service, render, exit with the contract's code."""
