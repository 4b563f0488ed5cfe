"""Shared test helpers: run the CLI in-process or as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"


@dataclass
class Result:
    code: int
    out: str
    err: str


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 300) -> Result:
    """Run ``python -m geval_spec`` as a subprocess (a real process, real exit code)."""
    full_env = dict(os.environ)
    full_env.pop("OPENAI_API_KEY", None)
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-m", "geval_spec", *args], cwd=str(cwd or ROOT), capture_output=True,
                          text=True, env=full_env, timeout=timeout)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def cli(*args: str, cwd: Path | None = None) -> Result:
    """Run the CLI in-process (fast) with typer's runner."""
    from typer.testing import CliRunner

    from geval_spec.cli.main import app

    old = Path.cwd()
    os.chdir(cwd or ROOT)
    try:
        res = CliRunner().invoke(app, list(args), catch_exceptions=False)
    finally:
        os.chdir(old)
    return Result(res.exit_code, res.stdout, res.stderr)


def git(cwd: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.org")
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True,
                          env=env).stdout


@pytest.fixture
def root() -> Path:
    return ROOT
