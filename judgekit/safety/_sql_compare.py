"""The parsed query against its neutralised form, for ``judgekit.safety.sql``: what the real
statements have more of (statements, set operations, queries inside the query, constant and
other conditions, operators and calls), each with the first new node quoted."""

from __future__ import annotations

from collections import Counter

from sqlglot import exp
from sqlglot.errors import ErrorLevel

from judgekit.safety._sql_text import cut

_VALUES = (exp.Neg, exp.Paren, exp.Dot)
"""Operators a value or a name alone may bring (``-5``, ``(5)``, ``a.b.c``): not new structure."""
_QUOTED_NODES = 64
"""A reason quotes only nodes this small (and compares only those, to find which are new)."""
_CONSTANT_NODES = 256
"""A larger comparison is not read as constant: the test walks it, and comparisons nest."""


def compare(real: list[exp.Expression], neutral: list[exp.Expression], dialect: str,
            breaks_quotes: bool = False) -> list[tuple[str, str]]:
    """Kinds the real statements have more of than the neutralised ones. A new condition that
    only narrows (``_narrows``) is no finding unless the stretch ``breaks_quotes``: text that
    closes a quote to add a condition is an injection (a blind probe: ``' AND password LIKE 'a%``)."""
    r, n = _Features(real, dialect), _Features(neutral, dialect)
    found: list[tuple[str, str]] = []
    if len(real) > len(neutral):
        new = r.new(r.statements[::-1], n, n.statements)  # the added statements come last
        found.append(("stacked-query", f"the untrusted text adds {len(real) - len(neutral)} statement(s): {new}"))
    if len(r.set_operations) > len(n.set_operations):
        operation = r.set_operations[-1]
        found.append(("union", f"the untrusted text adds {operation.key.upper()} "
                               f"{r.new([operation.right], n, [])}"))
    if len(r.subqueries) > len(n.subqueries):
        found.append(("subquery", f"the untrusted text adds a query: {r.new(r.subqueries, n, n.subqueries)}"))
    if len(r.constant) > len(n.constant):
        found.append(("tautology", f"the untrusted text adds a condition that is always true or false: "
                                   f"{r.new(r.constant, n, n.constant)}"))
    if len(r.conditions) > len(n.conditions) and (
            breaks_quotes or not all(map(_narrows, r.unmatched(r.conditions, n.conditions)))):
        connectives = [c for c in r.conditions if isinstance(c, (exp.Connector, exp.Not))]
        found.append(("condition", "the untrusted text adds a condition: "
                                   f"{r.new(connectives + r.conditions, n, n.conditions, several=True)}"))
    if r.others - n.others:
        found.append(("expression", f"the untrusted text adds {r.new(r.operations, n, n.operations)}"))
    return found


class _Features:
    """What the comparison counts in a list of statements, and the size of each node (for the
    reasons, which quote only small nodes: rendering every node of a long OR chain is quadratic)."""

    def __init__(self, statements: list[exp.Expression], dialect: str):
        self.dialect = dialect
        self.statements = statements
        self.set_operations: list[exp.Expression] = []
        self.subqueries: list[exp.Expression] = []
        self.conditions: list[exp.Expression] = []
        self.constant: list[exp.Expression] = []
        self.operations: list[exp.Expression] = []
        self.others: Counter[str] = Counter()
        self.size: dict[int, int] = {}
        for statement in statements:
            order = list(statement.walk(bfs=False))  # parents before children
            for node in order:
                self.size[id(node)] = 1
            for node in reversed(order):
                if node is not statement and node.parent is not None and id(node.parent) in self.size:
                    self.size[id(node.parent)] += self.size[id(node)]
            for node in order:
                self._count(node, statement)

    def _count(self, node: exp.Expression, statement: exp.Expression) -> None:
        if isinstance(node, exp.SetOperation):
            self.set_operations.append(node)
        elif isinstance(node, exp.Select) and node is not statement and not isinstance(node.parent, exp.SetOperation):
            self.subqueries.append(node)  # in parentheses, EXISTS, IN, a derived table
        elif isinstance(node, (exp.Predicate, exp.Connector, exp.Not)):
            self.conditions.append(node)
            if self.size[id(node)] <= _CONSTANT_NODES and _constant(node):
                self.constant.append(node)
        elif isinstance(node, (exp.Func, exp.Binary, exp.Unary)) and not isinstance(node, _VALUES):
            self.operations.append(node)
            self.others[node.key] += 1
        if isinstance(node, exp.Connector):
            # A bare value as one side of AND/OR (OR 1, OR TRUE) is a constant condition.
            self.constant += [side for side in (node.left, node.right) if isinstance(side, (exp.Literal, exp.Boolean))]

    def unmatched(self, mine: list[exp.Expression], theirs: list[exp.Expression]) -> list[exp.Expression]:
        """Those of ``mine`` that ``theirs`` has no structural copy of (each copy matched once)."""
        seen = Counter(theirs)
        left = []
        for node in mine:
            if seen[node]:
                seen[node] -= 1
            else:
                left.append(node)
        return left

    def new(self, mine: list[exp.Expression], other: _Features, theirs: list[exp.Expression],
            several: bool = False) -> str:
        """The first of ``mine`` (the first three, when ``several``) that ``other`` has no copy of
        among ``theirs``, as SQL (cut); nodes over ``_QUOTED_NODES`` are neither quoted nor compared."""
        # sqlglot's nodes hash and compare by structure: only the new ones are written out.
        seen = Counter(t for t in theirs if other.size.get(id(t), 0) <= _QUOTED_NODES)
        new: list[str] = []
        for node in mine:
            if self.size.get(id(node), 0) > _QUOTED_NODES:
                continue
            if seen[node]:
                seen[node] -= 1
                continue
            text = _sql(node, self.dialect)
            if text not in new:
                new.append(text)
            if len(new) == (3 if several else 1):
                break
        return cut("; ".join(new)) if new else "(too large to quote)"


def _narrows(node: exp.Expression) -> bool:
    """Whether ``node`` (a new condition) can only narrow what the query reads or changes: a
    comparison or an AND joined by ANDs alone (parentheses aside) to a WHERE or HAVING, or any
    condition inside parentheses that are ANDed there. A filter copied from a ticket (``AND
    status = 'open'``, ``AND (status = 'open' OR status = 'pending')``) is one; an OR or NOT at
    the top of the WHERE, an assignment in SET and a condition in a select list are not."""
    if not isinstance(node, (exp.And, exp.Or, exp.Not, exp.Predicate)):
        return False
    above: list[exp.Expression] = []  # the node's ancestors below the WHERE, nearest first
    top = node
    while top.parent is not None and not isinstance(top.parent, (exp.Where, exp.Having)):
        top = top.parent
        above.append(top)
    if top.parent is None:
        return False
    plain = True  # every ancestor from the WHERE down to here is an AND or parentheses
    for ancestor in reversed(above):
        if plain and isinstance(ancestor, exp.Paren) and isinstance(ancestor.parent, exp.And):
            return True  # inside parentheses ANDed to the rest: (a OR b) AND c only narrows c
        plain = plain and isinstance(ancestor, (exp.And, exp.Paren))
    return plain and isinstance(node, (exp.And, exp.Predicate))


def _constant(node: exp.Expression) -> bool:
    """A comparison of constants (no column, no query) or of one thing with itself."""
    if not isinstance(node, exp.Predicate):
        return False
    if isinstance(node, exp.Binary) and node.left == node.right:
        return True
    return not any(isinstance(n, (exp.Column, exp.Query, exp.Star)) for n in node.walk())


def _sql(node: exp.Expression, dialect: str) -> str:
    try:
        return node.sql(dialect=dialect, comments=False, unsupported_level=ErrorLevel.IGNORE)
    except Exception:  # a node sqlglot cannot write back in that dialect: its generic form
        return node.sql(comments=False, unsupported_level=ErrorLevel.IGNORE)
