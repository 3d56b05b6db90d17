"""Every function in ``schema.sql`` stays small enough to read: at most ``MAX_PARAMETERS`` parameters (IN, OUT and
INOUT alike) and ``MAX_LINES`` lines of body. State that several steps share travels as one composite value
(``queue_claim_state``, ``queue_claim_rounds``), not as parallel arrays, and a long function is split where a
step has a name of its own (docs/queue.md, "Changing the schema")."""

from __future__ import annotations

import re
from dataclasses import dataclass

from book_assets.settings import PROJECT_ROOT

SCHEMA = PROJECT_ROOT / "book_assets" / "sql" / "schema.sql"
MAX_PARAMETERS = 8
MAX_LINES = 60
_FUNCTION = re.compile(
    r"^CREATE FUNCTION public\.(\w+)\((.*?)\) RETURNS .*?\bAS \$\$\n(.*?)^(?:END )?\$\$;$", re.MULTILINE | re.DOTALL
)


@dataclass(frozen=True)
class Function:
    name: str
    parameters: int
    lines: int


def _parameters(signature: str) -> int:
    """The parameters of a pg_dump signature: its commas outside parentheses, plus one."""
    depth, count = 0, 1 if signature.strip() else 0
    for char in signature:
        depth += {"(": 1, ")": -1}.get(char, 0)
        count += char == "," and depth == 0
    return count


def functions(schema: str) -> list[Function]:
    """Each function of a schema dump with its number of parameters and of body lines."""
    found = [
        Function(name, _parameters(signature), len(body.splitlines()) + 1)
        for name, signature, body in _FUNCTION.findall(schema)
    ]
    assert found, "no function found in schema.sql: has pg_dump's format changed?"
    return found


def test_counting_reads_parameters_and_body_lines_of_a_dumped_function() -> None:
    dumped = (
        "CREATE FUNCTION public.f_v1(p_a numeric(10,2), INOUT s public.t, OUT x integer) RETURNS record\n"
        "    LANGUAGE plpgsql\n    AS $$\nBEGIN\n    x := 1;\nEND $$;\n"
    )
    assert functions(dumped) == [Function("f_v1", 3, 3)]


def test_no_function_in_schema_sql_takes_more_than_8_parameters_or_runs_over_60_lines() -> None:
    too_big = [
        f"{f.name}: {f.parameters} parameters, {f.lines} lines"
        for f in functions(SCHEMA.read_text(encoding="utf-8"))
        if f.parameters > MAX_PARAMETERS or f.lines > MAX_LINES
    ]
    assert not too_big, (
        f"functions over {MAX_PARAMETERS} parameters or {MAX_LINES} lines: {too_big}; carry shared state in a "
        "composite type and split a long function where a step has a name of its own"
    )
