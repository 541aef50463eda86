"""The query as text and tokens, for ``judgekit.safety.sql``: the neutralised forms of a query
(an untrusted stretch as one value), what the template's text leaves open before the stretch,
and what the real query's tokens show in the stretch."""

from __future__ import annotations

import bisect
import re

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.tokens import Token, TokenType

TIME_DELAY = frozenset({"sleep", "pg_sleep", "pg_sleep_for", "pg_sleep_until", "benchmark"})
COMMANDS = frozenset({"xp_cmdshell", "sp_oacreate", "sp_oamethod", "sys_exec", "sys_eval"})
REASON_CHARS = 120

_STRINGS = frozenset({TokenType.STRING, TokenType.NATIONAL_STRING, TokenType.HEX_STRING,
                      TokenType.BIT_STRING, TokenType.BYTE_STRING, TokenType.RAW_STRING,
                      TokenType.HEREDOC_STRING, TokenType.UNICODE_STRING})


def neutralised(sql: str, span: tuple[int, int], dialect: str = "") -> list[str]:
    """The query with ``sql[span]`` as one value, in the forms worth parsing, likeliest first.

    Where the template's text before the stretch leaves a quote open, the stretch is escaped
    inside it (and closed, in case the stretch took the template's closing quote); in a comment,
    it is kept from ending the comment; elsewhere it becomes one string literal, or a quoted
    name, or is escaped in the quote it opens (the stretch took the template's opening quote)."""
    start, end = span
    before, text, after = sql[:start], sql[start:end], sql[end:]
    mysql = dialect == "mysql"
    state = _open_at_end(before, mysql)
    if state in ("--", "#"):
        return [before + text.replace("\n", " ").replace("\r", " ") + after]
    if state == "/*":
        return [before + text.replace("*/", "* /") + after]
    if state:
        inside = _escape(text, state, mysql)
        return [before + inside + after, before + inside + state + after]
    name_quote = "`" if mysql else '"'
    forms = [before + "'" + _escape(text, "'", mysql) + "'" + after,
             before + name_quote + _escape(text, name_quote, mysql) + name_quote + after]
    if text[0] in "'\"`":
        q, rest = text[0], _escape(text[1:], text[0], mysql)
        forms += [before + q + rest + after, before + q + rest + q + after]
    return forms


def _escape(text: str, quote: str, mysql: bool) -> str:
    if mysql and quote != "`":
        text = text.replace("\\", "\\\\")
    return text.replace(quote, quote + quote)


_OPENERS = re.compile(r"'|\"|`|--|/\*")
_OPENERS_MYSQL = re.compile(r"'|\"|`|--|/\*|#")
_CLOSERS_MYSQL = {"'": re.compile(r"\\|'"), '"': re.compile(r'\\|"')}


def _open_at_end(text: str, mysql: bool) -> str:
    """What ``text`` leaves open at its end: a quote (``'``, ``"``, a backtick), a comment
    (``--``, ``#``, ``/*``), or nothing (""). One pass."""
    openers = _OPENERS_MYSQL if mysql else _OPENERS
    pos = 0
    while True:
        m = openers.search(text, pos)
        if m is None:
            return ""
        opener, pos = m.group(), m.end()
        if opener in ("--", "#"):
            newline = text.find("\n", pos)
            if newline < 0:
                return opener
            pos = newline + 1
        elif opener == "/*":
            close = text.find("*/", pos)
            if close < 0:
                return opener
            pos = close + 2
        else:
            closer = _CLOSERS_MYSQL.get(opener) if mysql else None
            while True:
                if closer is not None:
                    c = closer.search(text, pos)
                    at = -1 if c is None else c.start()
                    if c is not None and c.group() == "\\":
                        pos = at + 2
                        continue
                else:
                    at = text.find(opener, pos)
                if at < 0:
                    return opener
                if text.startswith(opener, at + 1):  # a doubled quote is one quote
                    pos = at + 2
                    continue
                pos = at + 1
                break


def tokens_of(dialect: Dialect, sql: str) -> list[Token] | None:
    try:
        return dialect.tokenize(sql)
    except Exception:  # hostile text may trip any error in a third-party tokenizer: "does not read"
        return None


def parse(dialect: Dialect, sql: str, tokens: list[Token] | None = None) -> list[exp.Expression] | None:
    """The statements of ``sql``, or None where it does not parse (RecursionError included)."""
    try:
        if tokens is None:
            tokens = dialect.tokenize(sql)
        return [s for s in dialect.parser().parse(tokens, sql) if s is not None and not isinstance(s, exp.Semicolon)]
    except Exception:  # as in tokens_of; RecursionError is an Exception too
        return None


def within_one_token(tokens: list[Token], span: tuple[int, int]) -> bool:
    """Whether the stretch lies inside one token (a string literal, a number, a name): such a
    stretch changed no structure, whatever the neutralised form would say. A dangerous call's
    name is never passed over so."""
    start, end = span
    at = bisect.bisect_right(tokens, start, key=lambda t: t.start) - 1  # the last token from before the stretch
    if at < 0:
        return False
    token = tokens[at]
    return end <= token.end + 1 and token.text.lower() not in TIME_DELAY | COMMANDS


def breaks_quotes(sql: str, tokens: list[Token], span: tuple[int, int]) -> bool:
    """Whether the stretch starts or ends inside a quoted token (a string literal, a quoted
    name) of the query and is not wholly inside it: it closed a quote the template opened, or
    opened one the template closes (``Bo Chen' AND password LIKE 'a%``)."""
    start, last = span[0], span[1] - 1
    for token in tokens:
        if token.start > last:
            break
        quoted = "STRING" in token.token_type.name or (token.token_type == TokenType.IDENTIFIER
                                                       and sql[token.start:token.start + 1] in "\"`[")
        if not quoted or token.end < start:
            continue
        inside_start = token.start < start <= token.end
        inside_end = token.start <= last < token.end
        if (inside_start or inside_end) and not (inside_start and inside_end):
            return True
    return False


def depth(tokens: list[Token]) -> int:
    depth = deepest = 0
    for token in tokens:
        if token.token_type == TokenType.L_PAREN:
            depth += 1
            deepest = max(deepest, depth)
        elif token.token_type == TokenType.R_PAREN:
            depth -= 1
    return deepest


def lexical(sql: str, tokens: list[Token], span: tuple[int, int]) -> list[tuple[str, str]]:
    """Kinds the tokens of the real query show in the stretch, outside quotes: dangerous calls,
    a comment that runs past the stretch over the template's text, a semicolon with a statement
    after it, a set operation. (The last two are used only where no neutralised form parses.)"""
    start, end = span
    found: list[tuple[str, str]] = []
    inside = [i for i, t in enumerate(tokens) if t.start < end and t.end >= start]
    for i in inside:
        token = tokens[i]
        if token.token_type in _STRINGS:
            continue
        word = token.text.lower()
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        if word in TIME_DELAY and following is not None and following.token_type == TokenType.L_PAREN:
            found.append(("time-delay", f"the untrusted text calls {token.text}(...)"))
        elif word == "waitfor" and following is not None and following.text.lower() in ("delay", "time"):
            found.append(("time-delay", f"the untrusted text runs WAITFOR {following.text}"))
        elif word in COMMANDS:
            found.append(("command-exec", f"the untrusted text calls {token.text}"))
        elif token.token_type == TokenType.SEMICOLON and following is not None:
            found.append(("stacked-query", "the untrusted text ends the statement and starts another"))
        elif token.token_type in (TokenType.UNION, TokenType.INTERSECT, TokenType.EXCEPT):
            found.append(("union", f"the untrusted text adds {token.text.upper()}"))
    # A comment lies between two tokens: one that starts in the stretch and covers the template's text after it.
    edges = [-1] + [t.end for t in tokens]
    nexts = [t.start for t in tokens] + [len(sql)]
    for gap_start, gap_end in zip(edges, nexts):
        gap_start += 1
        if gap_end <= start or gap_start >= end:
            continue
        text = sql[gap_start:gap_end]
        stripped = len(text) - len(text.lstrip())
        begins = gap_start + stripped
        if start <= begins < end and gap_end > end and sql[end:gap_end].strip():
            hidden = sql[end:gap_end].strip()
            found.append(("comment", f"a comment in the untrusted text hides the query's {cut(hidden)!r}"))
    return found


def cut(text: str) -> str:
    """``text`` on one line, cut to ``REASON_CHARS``."""
    text = " ".join(text.split())
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS] + "..."
