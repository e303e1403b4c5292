"""Parsing filter text: a SQL-like syntax into an unbound expression (engine.model.expressions).

Layer: engine.model (pure functions; imports the standard library, attrs, engine.errors and
engine.model.expressions). No I/O.

Usage::

    expr = parse_expression("category = 'books' AND price < 10.5 AND ts >= '2024-01-01'")

Text syntax, keywords case-insensitive:

- ``a AND b``, ``a OR b``, ``NOT a``, parentheses; ``true`` and ``false``
- ``col = v``, ``!=`` / ``<>``, ``<``, ``<=``, ``>``, ``>=``; the literal may come first (``5 < col``)
- ``col IS [NOT] NULL``, ``col IS [NOT] NAN``, ``isnan(col)``
- ``col [NOT] IN (v, ...)``, ``col [NOT] BETWEEN v AND w``, ``col [NOT] LIKE 'prefix%'`` (starts-with;
  ``\\`` escapes ``%``, ``_`` and itself; a pattern without ``%`` is an equality)
- a bare column stands for ``col = true``
- literals: ``42``, ``-1.25`` (a Decimal), ``1e3`` (a float), ``'it''s'``, ``true``, ``false``,
  ``X'00ff'`` (bytes), ``DATE '2024-01-02'``, ``TIME '10:00:00'``, ``TIMESTAMP '2024-01-02 10:00:00[+01:00]'``;
  strings compared with date, time, timestamp, uuid and decimal columns are converted when bound
- columns: ``name``, ``a.b`` (nested struct field), ``"any name"`` or ```any name``` (doubled quote escapes)

``str(expr)`` prints this syntax back. An AND or OR chain becomes a balanced tree, and text nested more than
:data:`~engine.model.expressions.MAX_DEPTH` levels deep is refused.
"""

from __future__ import annotations

import datetime
import re
from decimal import Decimal
from typing import Any

import attrs

from engine.errors import ValidationError
from engine.model.expressions import (
    KEYWORDS,
    MAX_DEPTH,
    AlwaysFalse,
    AlwaysTrue,
    And,
    BooleanExpression,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNaN,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    NotEqualTo,
    NotIn,
    NotNaN,
    NotNull,
    NotStartsWith,
    Or,
    Reference,
    StartsWith,
    depth,
)


_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<bytes>[xX]'(?P<hex>[^']*)')
  | (?P<number>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<string>'(?:[^']|'')*')
  | (?P<qname>"(?:[^"]|"")*"|`(?:[^`]|``)*`)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op><=|>=|<>|!=|==|[=<>(),.\-])
""", re.VERBOSE)


@attrs.frozen
class _Token:
    kind: str  # "name", "qname", "number", "string", "bytes", "op", "end"
    value: Any
    pos: int

    def is_word(self, *words: str) -> bool:
        return self.kind == "name" and self.value.lower() in words

    def is_op(self, *ops: str) -> bool:
        return self.kind == "op" and self.value in ops


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValidationError(f"Cannot parse expression: unexpected {text[pos]!r} at position {pos} in {text!r}")
        kind = next(k for k in ("ws", "bytes", "number", "string", "qname", "name", "op") if m.group(k) is not None)
        raw = m.group(kind)
        if kind == "bytes":
            try:
                tokens.append(_Token("bytes", bytes.fromhex(m.group("hex")), pos))
            except ValueError as e:
                raise ValidationError(f"Cannot parse expression: bad hex literal {raw} at position {pos}") from e
        elif kind == "number":
            tokens.append(_Token("number", raw, pos))
        elif kind == "string":
            tokens.append(_Token("string", raw[1:-1].replace("''", "'"), pos))
        elif kind == "qname":
            q = raw[0]
            tokens.append(_Token("qname", raw[1:-1].replace(q + q, q), pos))
        elif kind in ("name", "op"):
            tokens.append(_Token(kind, raw, pos))
        pos = m.end()
    tokens.append(_Token("end", None, len(text)))
    return tokens


_COMPARISONS: dict[str, tuple[type, type]] = {  # operator -> (class, class when the literal comes first)
    "=": (EqualTo, EqualTo), "==": (EqualTo, EqualTo), "!=": (NotEqualTo, NotEqualTo),
    "<>": (NotEqualTo, NotEqualTo), "<": (LessThan, GreaterThan), "<=": (LessThanOrEqual, GreaterThanOrEqual),
    ">": (GreaterThan, LessThan), ">=": (GreaterThanOrEqual, LessThanOrEqual),
}
_NO_VALUE = object()


def parse_expression(text: str) -> BooleanExpression:
    """Parse a SQL-like filter (see the module docstring for the syntax) into an unbound expression.

    An AND or OR chain becomes a balanced tree (``a AND b AND c`` is ``And(And(a, b), c)``).

    :raises ValidationError: naming the position of the first problem, or when parentheses and NOT nest, or the
        expression tree would be, more than :data:`MAX_DEPTH` levels deep
    """
    if not isinstance(text, str):
        raise ValidationError(f"Cannot parse expression: expected a string, got {text!r}")
    try:
        return _Parser(text).parse()
    except RecursionError as e:  # not expected below MAX_DEPTH; never let it escape untyped
        raise ValidationError(f"Cannot parse expression: it is nested too deeply (limit {MAX_DEPTH} levels)") from e


class _Parser:
    def __init__(self, text: str) -> None:
        self._text = text
        self._tokens = _tokenize(text)
        self._i = 0

    # helpers --------------------------------------------------------------------------------------------------

    def _peek(self, ahead: int = 0) -> _Token:
        return self._tokens[min(self._i + ahead, len(self._tokens) - 1)]

    def _next(self) -> _Token:
        tok = self._peek()
        self._i += 1
        return tok

    def _fail(self, what: str, tok: _Token | None = None) -> ValidationError:
        tok = tok or self._peek()
        found = "the end" if tok.kind == "end" else repr(self._text[tok.pos:tok.pos + 20])
        text = self._text if len(self._text) <= 200 else self._text[:200] + f"... ({len(self._text)} characters)"
        return ValidationError(f"Cannot parse expression: {what} at position {tok.pos} ({found}) in {text!r}")

    def _expect_op(self, op: str) -> None:
        if not self._peek().is_op(op):
            raise self._fail(f"expected {op!r}")
        self._next()

    def _expect_word(self, word: str) -> None:
        if not self._peek().is_word(word):
            raise self._fail(f"expected {word.upper()}")
        self._next()

    # grammar --------------------------------------------------------------------------------------------------

    def parse(self) -> BooleanExpression:
        if self._peek().kind == "end":
            raise self._fail("empty expression")
        expr, _ = self._or(0)
        if self._peek().kind != "end":
            raise self._fail("unexpected text")
        return expr

    # Each rule returns the expression and its depth; ``nesting`` counts the parentheses and NOTs around it.
    # A parenthesis costs two Python frames (_or, _unary), so MAX_DEPTH bounds the recursion too.

    def _too_deep(self, tok: _Token | None = None) -> ValidationError:
        return self._fail(f"nested more than the limit of {MAX_DEPTH} levels (parentheses, NOT, and AND / OR "
                          "chains counted as balanced trees)", tok)

    def _or(self, nesting: int) -> tuple[BooleanExpression, int]:
        groups: list[tuple[BooleanExpression, int]] = []
        while True:
            terms = [self._unary(nesting)]
            while self._peek().is_word("and"):
                self._next()
                terms.append(self._unary(nesting))
            groups.append(self._join(And, terms))
            if not self._peek().is_word("or"):
                return self._join(Or, groups)
            self._next()

    def _join(self, cls: type, items: list[tuple[BooleanExpression, int]]) -> tuple[BooleanExpression, int]:
        """The items as a balanced chain of ``cls``, with its depth."""
        if len(items) == 1:
            return items[0]
        mid = (len(items) + 1) // 2
        left, left_depth = self._join(cls, items[:mid])
        right, right_depth = self._join(cls, items[mid:])
        levels = max(left_depth, right_depth) + 1
        if levels > MAX_DEPTH:
            raise self._too_deep()
        return cls(left, right), levels

    def _unary(self, nesting: int) -> tuple[BooleanExpression, int]:
        nots = 0
        while self._peek().is_word("not"):
            nots += 1
            if nesting + nots > MAX_DEPTH:
                raise self._too_deep()
            self._next()
        tok = self._peek()
        if tok.is_op("("):
            if nesting + nots + 1 > MAX_DEPTH:
                raise self._too_deep()
            self._next()
            expr, levels = self._or(nesting + nots + 1)
            self._expect_op(")")
        else:
            expr, levels = self._primary(), 1
            if isinstance(expr, (And, Not)):  # BETWEEN
                levels = depth(expr)
        if levels + nots > MAX_DEPTH:
            raise self._too_deep(tok)
        for _ in range(nots):
            expr = Not(expr)
        return expr, levels + nots

    def _primary(self) -> BooleanExpression:
        tok = self._peek()
        if tok.is_word("isnan") and self._peek(1).is_op("("):
            self._next()
            self._next()
            term = self._term()
            self._expect_op(")")
            return IsNaN(term)
        literal = self._literal_or_none()
        if literal is not _NO_VALUE:
            op = self._peek()
            if op.kind == "op" and op.value in _COMPARISONS:
                self._next()
                if self._literal_or_none() is not _NO_VALUE:
                    raise self._fail("cannot compare two literals", op)
                term = self._term()
                if literal is None:
                    raise self._fail("comparison with null is never true; use IS NULL", tok)
                return _COMPARISONS[op.value][1](term, literal)
            if isinstance(literal, bool):
                return AlwaysTrue() if literal else AlwaysFalse()
            raise self._fail("expected a comparison after the literal", op)
        term = self._term()
        return self._after_term(term)

    def _after_term(self, term: Reference) -> BooleanExpression:
        tok = self._peek()
        if tok.kind == "op" and tok.value in _COMPARISONS:
            self._next()
            value_tok = self._peek()
            literal = self._literal_or_none()
            if literal is _NO_VALUE:
                if value_tok.kind in ("name", "qname"):
                    raise self._fail("comparing two columns is not supported", value_tok)
                raise self._fail("expected a literal", value_tok)
            if literal is None:
                raise self._fail("comparison with null is never true; use IS NULL or IS NOT NULL", value_tok)
            return _COMPARISONS[tok.value][0](term, literal)
        if tok.is_word("is"):
            self._next()
            negated = self._peek().is_word("not")
            if negated:
                self._next()
            if self._peek().is_word("null"):
                self._next()
                return NotNull(term) if negated else IsNull(term)
            if self._peek().is_word("nan"):
                self._next()
                return NotNaN(term) if negated else IsNaN(term)
            raise self._fail("expected NULL or NAN after IS")
        negated = False
        if tok.is_word("not") and self._peek(1).is_word("in", "like", "between"):
            self._next()
            negated = True
            tok = self._peek()
        if tok.is_word("in"):
            self._next()
            literals = self._literal_list()
            return NotIn(term, literals) if negated else In(term, literals)
        if tok.is_word("between"):
            self._next()
            low = self._required_literal()
            self._expect_word("and")
            high = self._required_literal()
            expr = And(GreaterThanOrEqual(term, low), LessThanOrEqual(term, high))
            return Not(expr) if negated else expr
        if tok.is_word("like"):
            self._next()
            pattern_tok = self._next()
            if pattern_tok.kind != "string":
                raise self._fail("expected a string pattern after LIKE", pattern_tok)
            prefix, is_prefix = self._like(pattern_tok)
            if is_prefix:
                return NotStartsWith(term, prefix) if negated else StartsWith(term, prefix)
            return NotEqualTo(term, prefix) if negated else EqualTo(term, prefix)
        if negated:
            raise self._fail("expected IN, LIKE or BETWEEN after NOT")
        # a bare column is a boolean test
        return EqualTo(term, True)

    def _like(self, tok: _Token) -> tuple[str, bool]:
        pattern: str = tok.value
        out: list[str] = []
        i = 0
        while i < len(pattern):
            c = pattern[i]
            if c == "\\" and i + 1 < len(pattern):
                out.append(pattern[i + 1])
                i += 2
                continue
            if c == "%":
                if i != len(pattern) - 1:
                    raise self._fail("only LIKE 'prefix%' patterns are supported (% must come last)", tok)
                return "".join(out), True
            if c == "_":
                raise self._fail("only LIKE 'prefix%' patterns are supported (_ is not)", tok)
            out.append(c)
            i += 1
        return "".join(out), False

    def _term(self) -> Reference:
        parts = [self._name_part()]
        while self._peek().is_op("."):
            self._next()
            parts.append(self._name_part())
        return Reference(".".join(parts))

    def _name_part(self) -> str:
        tok = self._peek()
        if tok.kind == "qname":
            self._next()
            return str(tok.value)
        if tok.kind == "name" and tok.value.lower() not in KEYWORDS:
            self._next()
            return str(tok.value)
        raise self._fail("expected a column name")

    def _literal_list(self) -> tuple[Any, ...]:
        self._expect_op("(")
        items = [self._required_literal()]
        while self._peek().is_op(","):
            self._next()
            items.append(self._required_literal())
        self._expect_op(")")
        return tuple(items)

    def _required_literal(self) -> Any:
        tok = self._peek()
        value = self._literal_or_none()
        if value is _NO_VALUE:
            raise self._fail("expected a literal", tok)
        if value is None:
            raise self._fail("null is not allowed here; use IS NULL", tok)
        return value

    def _literal_or_none(self) -> Any:
        """The literal at the cursor (consumed), or _NO_VALUE when there is none. ``null`` gives None."""
        tok = self._peek()
        if tok.kind == "string":
            self._next()
            return tok.value
        if tok.kind == "bytes":
            self._next()
            return tok.value
        if tok.kind == "number" or (tok.is_op("-") and self._peek(1).kind == "number"):
            sign = 1
            if tok.is_op("-"):
                self._next()
                sign = -1
            raw = self._next().value
            if "e" in raw or "E" in raw:
                return sign * float(raw)
            if "." in raw:
                return sign * Decimal(raw)
            return sign * int(raw)
        if tok.is_word("true", "false"):
            self._next()
            return tok.value.lower() == "true"
        if tok.is_word("null"):
            self._next()
            return None
        if tok.is_word("date", "time", "timestamp", "timestamptz") and self._peek(1).kind == "string":
            self._next()
            text_tok = self._next()
            return self._typed(tok.value.lower(), text_tok)
        return _NO_VALUE

    def _typed(self, kind: str, tok: _Token) -> Any:
        text = str(tok.value).strip()
        try:
            if kind == "date":
                return datetime.date.fromisoformat(text)
            if kind == "time":
                return datetime.time.fromisoformat(text)
            if re.search(r"\.\d{7}", text):
                return text  # nanoseconds, which datetime would cut off: converted for the column when bound
            value = datetime.datetime.fromisoformat(text)
            if kind == "timestamptz" and value.tzinfo is None:
                value = value.replace(tzinfo=datetime.timezone.utc)
            return value
        except ValueError:
            # outside Python's datetime range or a form only value_from_python reads: converted when bound
            return text
