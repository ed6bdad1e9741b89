"""REQ-SEC-SECRET-001: a database password never reaches output. The one set of rules
(`adapters.redaction.redact`; an index location is shown by
`adapters.storage.registry.redacted`) against
every form libpq takes a secret in, and a scan of the code for places that would print an
index location or an environment value without it."""

from __future__ import annotations

import ast
import io
import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters import stderr_log
from adapters.cli.commands.health import environment_overrides
from adapters.postgres.url import split_schema
from adapters.redaction import redact
from adapters.storage.registry import redacted
from domain.errors import QmdError

REPO = Path(__file__).resolve().parents[2]
SECRET = "s3cret"

SHOWN = [
    # (text, what people see)
    ("postgresql://u:s3cret@h:5432/db", "postgresql://u:***@h:5432/db"),
    ("postgresql://u@h/db?password=s3cret&schema=kb", "postgresql://u@h/db?password=***&schema=kb"),
    (
        "postgres://h/db?sslmode=require&sslpassword=s3cret",
        "postgres://h/db?sslmode=require&sslpassword=***",
    ),
    ("postgresql://u:s3cret@h/db?password=s3cret", "postgresql://u:***@h/db?password=***"),
    # libpq decodes a parameter's name: `%70assword` is `password`
    ("postgresql://h/db?%70assword=s3cret", "postgresql://h/db?%70assword=***"),
    # libpq ends the credentials at an `@` before the first `/`, so a `?` belongs to them
    ("postgresql://u:ab?s3cret@h/db", "postgresql://u:***@h/db"),
    ("postgresql://h?user=u@x&password=s3cret", "postgresql://h?user=u@x&password=***"),
    # key=value connection strings, quoted as libpq quotes
    ("host=h password=s3cret dbname=d", "host=h password=*** dbname=d"),
    ("host=h password = 's3 \\' cret' dbname=d", "host=h password = *** dbname=d"),
    ("PGPASSWORD=s3cret qmd status", "PGPASSWORD=*** qmd status"),
    # a URL inside a message, as a driver quotes it
    (
        'in URI: "postgresql://u:s3cret@[::1/db"',
        'in URI: "postgresql://u:***@[::1/db"',
    ),
    ("--index-url=postgresql://u:s3cret@h/db", "--index-url=postgresql://u:***@h/db"),
    ("x https://u:s3cret@mirror.example/m", "x https://u:***@mirror.example/m"),
    # nothing secret: as it was
    ("postgresql://u@h:5432/db?schema=kb", "postgresql://u@h:5432/db?schema=kb"),
    ("/home/me/password=1/index.sqlite", "/home/me/password=1/index.sqlite"),
    ('password authentication failed for user "u"', 'password authentication failed for user "u"'),
]


@pytest.mark.parametrize(("text", "shown"), SHOWN)
def test_every_form_of_a_secret_is_masked(text: str, shown: str) -> None:
    assert redact(text) == shown
    assert redacted(text) == shown
    assert redact(shown) == shown  # masking twice changes nothing


def test_a_secret_libpq_echoes_bare_is_masked_given_its_url() -> None:
    """libpq quotes a value it cannot decode as it found it, with no `password=` beside it."""
    echo = 'invalid percent-encoded token: "s3cret%zz"'
    for url in ("postgresql://u:s3cret%zz@h/db", "postgresql://u@h/db?password=s3cret%zz"):
        assert redact(echo, url) == 'invalid percent-encoded token: "***"'
    # a value that is only part of a word is left alone
    assert redact("s3cret%zzz and xs3cret%zz", "postgresql://u:s3cret%zz@h/db") == (
        "s3cret%zzz and xs3cret%zz"
    )


# what a URL may hold unescaped in a password (`%` escapes are left to the table above)
PASSWORDS = st.text(
    st.characters(codec="ascii", categories=("L", "N", "P", "S"), exclude_characters="/@&#%"),
    min_size=1,
)
TEMPLATES = (
    "postgresql://u:{}@h:5432/db?schema=kb",
    "postgresql://u@h:5432/db?password={}&schema=kb",
    "postgresql://u@h/db?sslpassword={}",
    "host=h password={} dbname=d",
)


@given(PASSWORDS)
def test_each_form_masks_exactly_the_password(password: str) -> None:
    for template in TEMPLATES[:3]:
        url, shown = template.format(password), template.format("***")
        assert redact(url) == shown
        assert redact(f"cannot open {url} (refused)") == f"cannot open {shown} (refused)"
    if "'" not in password and "\\" not in password:
        assert redact(TEMPLATES[3].format(password)) == TEMPLATES[3].format("***")


def test_a_url_python_cannot_read_is_the_users_mistake_without_its_password() -> None:
    from adapters.postgres.url import config_label

    for url in ("postgresql://u:s3cret@[::1/db?schema=x", "postgresql://u:s3cret@h:abc/db"):
        with pytest.raises(QmdError) as caught:
            config_label(url)
        assert caught.value.code == "invalid-argument" and SECRET not in caught.value.message
    with pytest.raises(QmdError):
        split_schema("postgresql://u:s3cret@[::1/db?schema=x")


def test_doctor_lists_index_path_without_its_password() -> None:
    lines = environment_overrides({"INDEX_PATH": "postgresql://u:s3cret@h/db?password=s3cret"})
    assert any("INDEX_PATH=postgresql://u:***@h/db?password=***" in line for line in lines)
    assert SECRET not in "\n".join(lines)


def test_the_log_writer_masks_what_a_record_quotes() -> None:
    """The server's one stderr writer: a driver or pool message quoting a URL is masked."""
    read, write = __import__("os").pipe()
    handler = stderr_log.NonBlockingStderrHandler(fd=write)
    handler.setFormatter(logging.Formatter("%(message)s"))
    record = logging.LogRecord(
        "psycopg.pool", logging.WARNING, __file__, 1, "error connecting to %s", None, None
    )
    record.args = ("postgresql://u:s3cret@h/db?password=s3cret",)
    handler.emit(record)
    assert handler.drain(5)
    written = io.FileIO(read, closefd=True).read(4096).decode()
    __import__("os").close(write)
    assert written == "error connecting to postgresql://u:***@h/db?password=***\n"


# -- the scan: places that would print a location or an environment value as it is -------------

# Names whose value may be an index location, a database URL or an environment value.
LOCATION_NAMES = frozenset(
    {"db_path", "location", "url", "index_url", "src", "dest", "conninfo", "env", "environ"}
)
# Calls that print (log records are not listed: the one stderr writer masks them).
PRINTING = frozenset({"print", "out", "err", "_err", "write", "say"})
# file:expression -> why it may be shown as it is
ALLOWED = {
    "adapters/cli/commands/index.py:args.src": "a file path (a URL never reaches this check)",
    "adapters/http/daemon.py:url": "the server's own listening URL, from its start line",
    "adapters/models/references.py:url": "a model download URL (references refuse credentials)",
    "adapters/models/references.py:env": "the name of an environment variable, not its value",
}


def _terminal(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return _terminal(node.value)
    return None


def shown_as_is(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, expression) of every location-like value put into an f-string or a printing
    call without going through a function first (`redacted(...)`, `app.index_display`)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        values: list[ast.expr] = []
        if isinstance(node, ast.FormattedValue):
            values = [node.value]
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name in PRINTING:
                values = list(node.args)
        found += [
            (value.lineno, ast.unparse(value))
            for value in values
            if _terminal(value) in LOCATION_NAMES
        ]
    return found


def test_no_code_prints_a_location_or_an_environment_value_as_it_is() -> None:
    offences: list[str] = []
    for path in sorted((REPO / "adapters").rglob("*.py")):
        relative = path.relative_to(REPO).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        offences += [
            f"{relative}:{line}: {expression}"
            for line, expression in shown_as_is(tree)
            if f"{relative}:{expression}" not in ALLOWED
        ]
    assert offences == [], (
        "show these through adapters.storage.registry.redacted (REQ-SEC-SECRET-001)"
    )


def test_the_scan_flags_each_form_it_looks_for() -> None:
    source = (
        'f"Index: {app.db_path}"\n'
        'f"  - {name}={env[name]}"\n'
        "print(location)\n"
        "sys.stderr.write(url)\n"
        'f"Index: {app.index_display}"\n'  # shown through the rules: fine
        'f"{redacted(url)}"\n'
        "log.warning('%s', url)\n"  # the log writer masks it
    )
    assert sorted(line for line, _ in shown_as_is(ast.parse(source))) == [1, 2, 3, 4]
