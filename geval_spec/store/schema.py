"""The results database's tables and views, and the migrations between schema versions.

Version 2 keeps each request's successful response once (``answers``, whose
primary key is the request hash: a constraint, not a lookup, keeps a second
answer out), failed attempts apart (``failures``), the split and the reuse
key of every case of a run, and the batches submitted to providers.
``responses`` is a view over both, as version 1's table was. Version 3 keys a
request by the first 128 bits of its SHA-256 (32 hex digits) where version 2
kept all 256: the key indexes a run's sessions load are about half the size
(:func:`~geval_spec.judge.types.request_key`). The views for common questions
are documented in docs/results.md.

The functions here take an open connection; only :mod:`geval_spec.store.db`
opens one.
"""

from __future__ import annotations

import hashlib
from typing import Any

from geval_spec.errors import StoreError
from geval_spec.judge.types import HASH_CHARS

SCHEMA_VERSION = 3
HASHED = ("requests", "answers", "failures", "run_requests")  # the tables that name requests by their hash

TABLES = """
CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR);
CREATE TABLE IF NOT EXISTS runs (
  run_id VARCHAR PRIMARY KEY, kind VARCHAR, spec_name VARCHAR, spec_version INTEGER, spec_ref VARCHAR,
  spec_file VARCHAR, judging_fp VARCHAR, analysis_fp VARCHAR, spec_json VARCHAR, judges_json VARCHAR,
  method VARCHAR, data_path VARCHAR, data_sha256 VARCHAR, tool_version VARCHAR, git_commit VARCHAR,
  options_json VARCHAR, source_file VARCHAR, source_sha256 VARCHAR, started_at VARCHAR, ended_at VARCHAR,
  status VARCHAR, error VARCHAR, pid INTEGER);
CREATE TABLE IF NOT EXISTS run_cases (
  run_id VARCHAR, case_id VARCHAR, position INTEGER, group_id VARCHAR, system_id VARCHAR, category VARCHAR,
  human_json VARCHAR, PRIMARY KEY (run_id, case_id));
CREATE TABLE IF NOT EXISTS requests (
  request_hash VARCHAR PRIMARY KEY, model VARCHAR, body_json VARCHAR, sample INTEGER, n INTEGER,
  created_at VARCHAR);
CREATE TABLE IF NOT EXISTS run_requests (
  run_id VARCHAR, request_hash VARCHAR, case_id VARCHAR, judge VARCHAR, purpose VARCHAR, sample INTEGER,
  position INTEGER, PRIMARY KEY (run_id, request_hash, judge, purpose));
CREATE TABLE IF NOT EXISTS judgments (
  run_id VARCHAR, case_id VARCHAR, judge VARCHAR, method VARCHAR, score DOUBLE, valid BOOLEAN,
  reason VARCHAR, distribution_json VARCHAR, valid_mass DOUBLE, samples_json VARCHAR, spread DOUBLE,
  details_json VARCHAR, PRIMARY KEY (run_id, case_id, judge));
CREATE TABLE IF NOT EXISTS verdicts (
  run_id VARCHAR, case_id VARCHAR, judge VARCHAR, idx INTEGER, statement VARCHAR, verdict VARCHAR,
  reason VARCHAR, support VARCHAR, PRIMARY KEY (run_id, case_id, judge, idx));
CREATE TABLE IF NOT EXISTS findings (
  run_id VARCHAR, case_id VARCHAR, idx INTEGER, kind VARCHAR, message VARCHAR, start_pos INTEGER,
  end_pos INTEGER, text VARCHAR, PRIMARY KEY (run_id, case_id, idx));
"""

# version 2: added to version 1's tables, or new
V2_COLUMNS = (("runs", "shard", "VARCHAR"), ("run_cases", "split", "VARCHAR"), ("run_cases", "case_key", "VARCHAR"),
              ("judgments", "case_key", "VARCHAR"))
V2_TABLES = """
CREATE TABLE IF NOT EXISTS answers (
  request_hash VARCHAR PRIMARY KEY, run_id VARCHAR, attempt INTEGER, body_json VARCHAR, prompt_tokens INTEGER,
  completion_tokens INTEGER, cached_tokens INTEGER, reasoning_tokens INTEGER, cost DOUBLE, latency_ms DOUBLE,
  received_at VARCHAR, batch BOOLEAN);
CREATE TABLE IF NOT EXISTS failures (
  request_hash VARCHAR, run_id VARCHAR, attempt INTEGER, status INTEGER, kind VARCHAR, error VARCHAR,
  received_at VARCHAR, PRIMARY KEY (request_hash, run_id, attempt));
CREATE TABLE IF NOT EXISTS batches (
  batch_id VARCHAR PRIMARY KEY, run_id VARCHAR, spec_name VARCHAR, client VARCHAR, api_base VARCHAR,
  model VARCHAR, input_file_id VARCHAR, output_file_id VARCHAR, error_file_id VARCHAR, status VARCHAR,
  requests INTEGER, created_at VARCHAR, finished_at VARCHAR);
"""
VIEWS = """
CREATE OR REPLACE VIEW responses AS
  SELECT request_hash, run_id, attempt, true AS ok, 200 AS status, NULL AS kind, NULL AS error, body_json,
         prompt_tokens, completion_tokens, cost, latency_ms, received_at FROM answers
  UNION ALL
  SELECT request_hash, run_id, attempt, false, status, kind, error, NULL, NULL, NULL, NULL, NULL, received_at
  FROM failures;
CREATE OR REPLACE VIEW case_results AS
  SELECT c.run_id, c.case_id, c.position, c.split, c.group_id, c.system_id, c.category,
         c.human_json AS human, j.judge, j.method, j.score, j.valid, j.reason AS invalid_reason,
         (SELECT CASE WHEN json_valid(m.content) THEN json_extract_string(m.content, '$.reasoning') END
          FROM run_requests rr JOIN answers a ON a.request_hash = rr.request_hash,
               LATERAL (SELECT json_extract_string(a.body_json, '$.choices[0].message.content') AS content) m
          WHERE rr.run_id = c.run_id AND rr.case_id = c.case_id AND rr.judge = j.judge
          ORDER BY rr.position LIMIT 1) AS reasoning
  FROM run_cases c LEFT JOIN judgments j ON j.run_id = c.run_id AND j.case_id = c.case_id;
CREATE OR REPLACE VIEW run_summary AS
  SELECT r.run_id, r.spec_name, r.spec_version, r.kind, r.status, r.started_at, r.ended_at,
         (SELECT count(*) FROM run_cases c WHERE c.run_id = r.run_id) AS cases,
         (SELECT count(*) FROM judgments j WHERE j.run_id = r.run_id AND j.valid) AS valid,
         (SELECT count(*) FROM answers a WHERE a.run_id = r.run_id) AS answers_received,
         (SELECT sum(cost) FROM answers a WHERE a.run_id = r.run_id) AS cost
  FROM runs r;
"""


VIEWS_DIGEST = hashlib.sha256(VIEWS.encode("utf-8")).hexdigest()[:16]


def _statements(sql: str) -> list[str]:
    return [stmt for stmt in sql.split(";") if stmt.strip()]


def views_current(con: Any) -> bool:
    """Whether the file's views are the ones VIEWS defines (a view can change without a schema version)."""
    row = con.execute("SELECT value FROM meta WHERE key = 'views'").fetchone()
    return row is not None and row[0] == VIEWS_DIGEST


def replace_views(con: Any) -> None:
    con.execute("BEGIN")
    _write_views(con)
    con.execute("COMMIT")


def _script(statements: list[str]) -> str:
    """Statements as one script: DuckDB runs them in order in one call (a new store's tables, columns and views in
    about 5.0 ms, against 5.6 for one call each)."""
    return ";\n".join(statements)


def _write_views(con: Any) -> None:
    """The views, and the record of which (VIEWS_DIGEST), inside the caller's transaction."""
    con.execute(_script(_statements(VIEWS)))
    con.execute("INSERT OR REPLACE INTO meta VALUES ('views', ?)", [VIEWS_DIGEST])


def _new_meta(con: Any, values: dict[str, str]) -> None:
    """Set keys of a new store's ``meta`` (the schema's own constants): deleted (a new store has none) and
    inserted in one script, 1.2 ms, where DuckDB takes about 2.5 ms for each INSERT OR REPLACE. (Not for a store
    that has them: DuckDB 1.1 refuses to insert a key its transaction deleted.)"""
    def literal(text: str) -> str:
        return "'" + text.replace("'", "''") + "'"

    keys = ", ".join(literal(k) for k in values)
    rows = ", ".join(f"({literal(k)}, {literal(v)})" for k, v in values.items())
    con.execute(_script([f"DELETE FROM meta WHERE key IN ({keys})", f"INSERT INTO meta VALUES {rows}"]))


def create_or_migrate(con: Any, found: int | None) -> None:
    """Bring a database at schema ``found`` (None: empty) to SCHEMA_VERSION, in one transaction."""
    con.execute("BEGIN")
    con.execute(_script(_statements(TABLES) + _statements(V2_TABLES)))
    if found == 1:
        _migrate_1_to_2(con)
    if found is None or found < SCHEMA_VERSION:
        con.execute(_script([f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {kind}"
                             for table, column, kind in V2_COLUMNS]))
    if found is not None and found < 3:
        _migrate_2_to_3(con)
    if found is None:
        con.execute(_script(_statements(VIEWS)))
        _new_meta(con, {"views": VIEWS_DIGEST, "schema_version": str(SCHEMA_VERSION)})
    else:
        _write_views(con)
        con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
    con.execute("COMMIT")


def _migrate_1_to_2(con: Any) -> None:
    """Version 1 kept every attempt in ``responses``: its first success per request becomes the answer."""
    if not con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'responses' "
                       "AND table_type = 'BASE TABLE'").fetchone()[0]:
        return
    con.execute("""
        INSERT OR IGNORE INTO answers
        SELECT request_hash, run_id, attempt, body_json, prompt_tokens, completion_tokens, NULL, NULL, cost,
               latency_ms, received_at, false
        FROM (SELECT *, row_number() OVER (PARTITION BY request_hash ORDER BY received_at, run_id, attempt) AS k
              FROM responses WHERE ok) WHERE k = 1""")
    con.execute("""
        INSERT OR IGNORE INTO failures
        SELECT request_hash, run_id, attempt, status, kind, error, received_at FROM responses WHERE NOT ok""")
    con.execute("DROP TABLE responses")


def _migrate_2_to_3(con: Any) -> None:
    """Version 2 named a request by its whole SHA-256: its first HASH_CHARS digits are the hash version 3 gives the
    same request (:func:`~geval_spec.judge.requests.request_hash`), so answers stored before are found again.

    Each table is copied into a new one and the old one dropped: an UPDATE of the key column deletes and inserts
    every row through the key index, which at 100,000 requests ran out of a run's 128 MB session (and took 1.35
    GB without a limit). Two hashes of one table that share their first digits (a store edited by hand) stop the
    migration with a :class:`~geval_spec.errors.StoreError` naming them; nothing is changed then."""
    creates = {stmt.split("(", 1)[0].split()[-1]: stmt for stmt in _statements(TABLES) + _statements(V2_TABLES)}
    for table in HASHED:
        if not con.execute(f"SELECT count(*) FROM {table} WHERE length(request_hash) > {HASH_CHARS}").fetchone()[0]:
            continue
        clash = con.execute(
            f"SELECT left(request_hash, {HASH_CHARS}) AS k, min(request_hash), max(request_hash) FROM {table} "
            "GROUP BY ALL HAVING count(DISTINCT request_hash) > 1 LIMIT 1").fetchone()
        if clash is not None:
            raise StoreError(f"cannot bring this store to schema {SCHEMA_VERSION}: table {table} holds requests "
                             f"{clash[1]} and {clash[2]}, whose first {HASH_CHARS} digits are the same (the store "
                             "was edited by hand?); remove one of them, or use this store with an older geval-spec")
        con.execute(creates[table].replace(f"CREATE TABLE IF NOT EXISTS {table} (", f"CREATE TABLE {table}_v3 (", 1))
        con.execute(f"INSERT INTO {table}_v3 BY NAME "
                    f"SELECT * REPLACE (left(request_hash, {HASH_CHARS}) AS request_hash) FROM {table}")
        con.execute(f"DROP TABLE {table}")
        con.execute(f"ALTER TABLE {table}_v3 RENAME TO {table}")


def not_ours(con: Any) -> str | None:
    """Why a database without geval-spec's schema version is not a results database (tables of its own, or a
    ``meta`` table of another shape), or None when it is empty: a new store."""
    tables = sorted(r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()").fetchall())
    views = sorted(r[0] for r in con.execute(
        "SELECT view_name FROM duckdb_views() WHERE database_name = current_database() AND NOT internal").fetchall())
    if "meta" in views:
        return "its meta is a view, not geval-spec's table"
    if "meta" in tables:
        columns = dict(con.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = current_database() "
            "AND table_name = 'meta'").fetchall())
        if columns.get("key") != "VARCHAR" or columns.get("value") != "VARCHAR":
            return "its table meta is not geval-spec's"
    tables += views
    others = [t for t in tables if t != "meta"]
    if others:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        return f"it holds tables ({shown}) but no geval-spec schema version"
    return None
