"""Named server-side statements per connection, for a connection that talks to PostgreSQL directly.

An unnamed statement is parsed and planned by the server on every call: about 20 µs on a quiet
machine for an append's ``SELECT threadloom_append_message(...)``, 45 µs on a loaded one, more for a
history read. A statement named once per connection skips both from its second call (PostgreSQL
keeps its plan, custom for five calls, then generic if that costs no more). The names are
session state on one server connection, so this is off unless asked for
(``prepared_statements=on`` in the URL, ``THREADLOOM_DB_PREPARED_STATEMENTS``): RDS Proxy pins a
client connection that prepares a statement, and a transaction pooler that does not track them
(PgBouncer before 1.21, or without ``max_prepared_statements``) sends the next call to a server
connection that never saw the name.

Only statements with no plan to choose are named: one call of a Threadloom function whose
arguments are all parameters (``SELECT threadloom_append_message($1, ...)``, ``SELECT ... FROM
threadloom_history($1, $2)``) and the timeouts statements. PostgreSQL switches a named statement to
a generic plan after five calls when its estimate is no worse, and a generic plan of a query over
the tables (a recursive walk written as a join, a search) is chosen without the parameters' values
and, made while a table was small or its statistics stale, was measured at 40 times the custom
plan's time; a function call's plan is the same either way, and the statements inside the function
keep the plans PL/pgSQL caches for them, as without this option. Any other statement is sent
unnamed, as before.

A name is registered when its Parse is sent and forgotten when the round trip that carried it
fails, whatever failed: the next use then sends ``Close`` before ``Parse`` (closing a name that
does not exist is not an error), so a statement parsed before a later message failed is
replaced, never parsed twice under one name.
"""

from __future__ import annotations

import hashlib
import re
import weakref
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from threadloom.storage.postgres.connection import Connection

#: At most this many named statements per connection; past it, statements run unnamed. Every
#: statement Threadloom sends comes from a fixed text, so this bounds memory, not speed.
MAX_PREPARED_PER_CONNECTION: Final = 256


_ARGUMENT: Final = r"(?:CAST\(\$\d+ AS \w+(?:\[\])?\)|\$\d+)"
_FUNCTION_CALL: Final = re.compile(rf"SELECT (?:\w+(?:, \w+)* FROM )?threadloom_\w+\({_ARGUMENT}(?:, {_ARGUMENT})*\)")


def plan_free(statement: str) -> bool:
    """Whether ``statement`` (``$n`` placeholders) is one call of a Threadloom function on parameters alone."""
    return _FUNCTION_CALL.fullmatch(statement) is not None


class PreparedStatements:
    """The statements one connection has named, by their text, and the names of a round trip in flight."""

    __slots__ = ("names", "pending")

    def __init__(self) -> None:
        self.names: dict[str, bytes] = {}
        #: Statements first named in the round trip being sent or read; forgotten if it fails.
        self.pending: list[str] = []

    def name_for(self, statement: str) -> tuple[bytes | None, bool]:
        """The name to bind ``statement`` under and whether it must be parsed first; (None, False) when full."""
        name = self.names.get(statement)
        if name is not None:
            return name, False
        if len(self.names) >= MAX_PREPARED_PER_CONNECTION:
            return None, False
        # The same text always gets the same name, so a Parse after a failed round trip replaces
        # what that round trip may have left (after the Close) instead of leaving it orphaned.
        name = b"threadloom_" + hashlib.blake2b(statement.encode("utf-8"), digest_size=10).hexdigest().encode("ascii")
        self.names[statement] = name
        self.pending.append(statement)
        return name, True

    def settle(self, *, succeeded: bool) -> None:
        """End a round trip: keep its new names if it succeeded, else forget them (they are closed on next use)."""
        if not succeeded:
            for statement in self.pending:
                self.names.pop(statement, None)
        self.pending.clear()


_BY_CONNECTION: Final[weakref.WeakKeyDictionary[Connection, PreparedStatements]] = weakref.WeakKeyDictionary()


def prepared_on(connection: Connection) -> PreparedStatements:
    """The named statements of ``connection`` (a new connection has none)."""
    found = _BY_CONNECTION.get(connection)
    if found is None:
        found = _BY_CONNECTION[connection] = PreparedStatements()
    return found
