"""The JSON Schema of a spec file, generated from :mod:`geval_spec.model`.

``schemas/geval-spec.schema.json`` is this output, committed so editors can
use it through ``# yaml-language-server: $schema=../schemas/geval-spec.schema.json``.
A test fails when the committed file is stale; regenerate it with
``geval-spec schema > schemas/geval-spec.schema.json``.
"""

from __future__ import annotations

import json
from typing import Any

from .model import Spec

SCHEMA_ID = "https://geval-spec.dev/schemas/geval-spec.schema.json"


def build_schema() -> dict[str, Any]:
    schema = Spec.model_json_schema(mode="validation")
    out: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "geval-spec spec file",
    }
    out.update(schema)
    return out


def schema_text() -> str:
    return json.dumps(build_schema(), indent=2, ensure_ascii=False) + "\n"
