"""Sphinx directives that render judgekit's reference from the code at build time, so the pages
cannot go stale:

``judgekit-schemas``
    one section per JSON Schema in ``schemas/`` (the committed copies, which the test suite holds
    equal to the pydantic models): its fields, their types, whether required, defaults,
    descriptions; then each definition it refers to.
``judgekit-exit-codes``
    the table of ``judgekit.ci.exit_codes``: every ``EXIT_*`` constant with its ``MEANINGS`` line.
``judgekit-axes``
    the axis registry ``judgekit.axes.AXES``: what each ``Axis`` object says of itself.

What the code leaves out or this renderer cannot show (an exit code without a meaning, an axis
without a description, a schema type or ``$ref`` it does not know) is a warning, so the strict
build (``-W``) fails on it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas"
_LITERAL = re.compile(r"``(.+?)``|`([^`]+)`", re.S)


# --- small builders -------------------------------------------------------------------------------


def inline_text(text: str) -> list[nodes.Node]:
    """``text`` as nodes, its ``literal`` (or `literal`) spans as code."""
    out: list[nodes.Node] = []
    at = 0
    for match in _LITERAL.finditer(text):
        if match.start() > at:
            out.append(nodes.Text(text[at:match.start()]))
        code = match.group(1) or match.group(2)
        out.append(nodes.literal(code, code))
        at = match.end()
    if at < len(text):
        out.append(nodes.Text(text[at:]))
    return out


def paragraph(*parts: nodes.Node | str) -> nodes.paragraph:
    para = nodes.paragraph()
    for part in parts:
        para += inline_text(part) if isinstance(part, str) else part
    return para


def table(header: list[str], rows: list[list[list[nodes.Node] | str]]) -> nodes.table:
    """A table whose cells are strings (with code spans) or lists of inline nodes; the browser
    sizes its columns."""
    group = nodes.tgroup(cols=len(header))
    for _ in header:
        group += nodes.colspec(colwidth=1)
    head = nodes.thead()
    head += _row(header)
    group += head
    body = nodes.tbody()
    for row in rows:
        body += _row(row)
    group += body
    result = nodes.table()
    result += group
    return result


def _row(cells: list) -> nodes.row:
    row = nodes.row()
    for cell in cells:
        entry = nodes.entry()
        entry += paragraph(cell) if isinstance(cell, str) else paragraph(*cell)
        row += entry
    return row


def section(title: str, anchor: str, document: nodes.document) -> nodes.section:
    """A section whose anchor is also a label (``{ref}`schema-rubric```, ``file-formats.md#schema-rubric``)."""
    node = nodes.section(ids=[anchor], names=[anchor])
    node += nodes.title(title, title)
    document.note_explicit_target(node)
    return node


# --- JSON Schemas ---------------------------------------------------------------------------------


def anchor_of(schema: str, definition: str | None = None) -> str:
    return nodes.make_id(f"schema-{schema}" + (f"-{definition}" if definition else ""))


class SchemaPage:
    """Renders one schema file: its top-level object, then its ``$defs``."""

    def __init__(self, name: str, schema: dict[str, Any], document: nodes.document, location: str):
        self.name = name
        self.document = document
        self.schema = schema
        self.defs: dict[str, Any] = schema.get("$defs", {})
        self.location = location

    def render(self) -> nodes.section:
        title = self.schema.get("title", self.name)
        node = section(self.name, anchor_of(self.name), self.document)
        node += paragraph(f"Model ``{title}``; ``judgekit schema {self.name}`` prints this schema, "
                          f"which is also committed as ``schemas/{self.name}.schema.json``.")
        if self.schema.get("description"):
            node += paragraph(self.schema["description"])
        node += self.fields(self.schema)
        for name in sorted(self.defs):
            node += self.definition(name, self.defs[name])
        return node

    def definition(self, name: str, schema: dict[str, Any]) -> list[nodes.Node]:
        heading = nodes.rubric(name, name, ids=[anchor_of(self.name, name)])
        out: list[nodes.Node] = [heading]
        if schema.get("description"):
            out.append(paragraph(schema["description"]))
        if "properties" in schema:
            out.append(self.fields(schema))
        else:
            out.append(paragraph("A value of type ", *self.type_of(schema), "."))
        return out

    def fields(self, schema: dict[str, Any]) -> nodes.Node:
        properties = schema.get("properties", {})
        if not properties:
            return paragraph("An object with no fixed fields: ", *self.type_of(schema), ".")
        required = set(schema.get("required", ()))
        rows = []
        for field, spec in properties.items():
            about = inline_text(spec.get("description", ""))
            if "default" in spec and field not in required:
                about += [nodes.Text(" Default: " if about else "Default: "),
                          nodes.literal("", json.dumps(spec["default"]))]
                about.append(nodes.Text("."))
            rows.append([[nodes.literal(field, field)], self.type_of(spec), "yes" if field in required else "no",
                         about])
        if schema.get("additionalProperties") is False:
            closing = "No other field is allowed."
        else:
            closing = "Other fields are allowed."
        return nodes.container("", table(["Field", "Type", "Required", "Description"], rows),
                               paragraph(closing))

    def type_of(self, spec: dict[str, Any]) -> list[nodes.Node]:
        """A type in words, definitions linked."""
        if "$ref" in spec:
            target = spec["$ref"].rpartition("/")[2]
            if not spec["$ref"].startswith("#/$defs/") or target not in self.defs:
                logger.warning("schema %s: unresolved $ref %r", self.name, spec["$ref"], location=self.location)
                return [nodes.Text(spec["$ref"])]
            link = nodes.reference("", "", internal=True, refid=anchor_of(self.name, target))
            link += nodes.literal(target, target)
            return [link]
        for combiner in ("anyOf", "oneOf"):
            if combiner in spec:
                choices = [choice for choice in spec[combiner] if choice.get("type") != "null"]
                out: list[nodes.Node] = []
                for at, choice in enumerate(choices):
                    if at:
                        out.append(nodes.Text(" or "))
                    out += self.type_of(choice)
                if len(choices) < len(spec[combiner]):
                    out.append(nodes.Text(" or null"))
                return out + self.bounds(spec)
        if "allOf" in spec and len(spec["allOf"]) == 1:
            return self.type_of(spec["allOf"][0])
        if "const" in spec:
            return [nodes.Text("the constant "), nodes.literal("", json.dumps(spec["const"]))]
        if "enum" in spec:
            out = [nodes.Text("one of ")]
            for at, value in enumerate(spec["enum"]):
                if at:
                    out.append(nodes.Text(", "))
                out.append(nodes.literal("", json.dumps(value)))
            return out
        kind = spec.get("type")
        if isinstance(kind, list):
            return [nodes.Text(" or ".join(kind))] + self.bounds(spec)
        if kind == "array":
            if "prefixItems" in spec:
                out = [nodes.Text("a list of exactly: ")]
                for at, item in enumerate(spec["prefixItems"]):
                    if at:
                        out.append(nodes.Text(", "))
                    out += self.type_of(item)
                return out
            items = spec.get("items", {})
            return ([nodes.Text("list of ")] + (self.type_of(items) if items else [nodes.Text("any")])
                    + self.bounds(spec))
        if kind == "object":
            values = spec.get("additionalProperties")
            patterns = spec.get("patternProperties")
            if patterns:
                (pattern, values), *_ = patterns.items()
                keys: list[nodes.Node] = [nodes.Text("keys matching "), nodes.literal("", pattern)]
            else:
                keys = [nodes.Text("string keys")]
            if isinstance(values, dict) and values:
                return [nodes.Text("map of ")] + keys + [nodes.Text(" to ")] + self.type_of(values)
            return [nodes.Text("object")]
        if kind is None:
            return [nodes.Text("any JSON value")]
        if kind not in ("string", "integer", "number", "boolean", "null"):
            logger.warning("schema %s: type %r is not rendered", self.name, kind, location=self.location)
        text = kind + (f" ({spec['format']})" if "format" in spec else "")
        out = [nodes.Text(text)]
        if "pattern" in spec:
            out += [nodes.Text(" matching "), nodes.literal("", spec["pattern"])]
        return out + self.bounds(spec)

    @staticmethod
    def bounds(spec: dict[str, Any]) -> list[nodes.Node]:
        said = []
        for key, words in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"),
                           ("exclusiveMaximum", "<")):
            if key in spec:
                said.append(f"{words} {spec[key]}")
        for key, words in (("minLength", "at least {} characters"), ("maxLength", "at most {} characters"),
                           ("minItems", "at least {} items"), ("maxItems", "at most {} items")):
            if key in spec:
                said.append(words.format(spec[key]))
        return [nodes.Text(f", {', '.join(said)}")] if said else []


class SchemasDirective(SphinxDirective):
    """One section per ``schemas/*.schema.json``, in name order."""

    def run(self) -> list[nodes.Node]:
        files = sorted(SCHEMAS.glob("*.schema.json"))
        if not files:
            logger.warning("no JSON Schema found in %s", SCHEMAS, location=self.get_location())
        out = []
        for path in files:
            self.env.note_dependency(str(path))
            name = path.name.removesuffix(".schema.json")
            schema = json.loads(path.read_text(encoding="utf-8"))
            out.append(SchemaPage(name, schema, self.state.document, self.get_location()).render())
        return out


# --- exit codes -----------------------------------------------------------------------------------


class ExitCodesDirective(SphinxDirective):
    """The table of ``judgekit.ci.exit_codes``."""

    def run(self) -> list[nodes.Node]:
        from judgekit.ci import exit_codes

        self.env.note_dependency(exit_codes.__file__)
        named = sorted((value, name) for name, value in vars(exit_codes).items() if name.startswith("EXIT_"))
        rows = []
        for value, name in named:
            meaning = exit_codes.MEANINGS.get(value)
            if meaning is None:
                logger.warning("exit code %s (%d) has no line in MEANINGS", name, value, location=self.get_location())
                meaning = ""
            rows.append([[nodes.literal("", str(value))], [nodes.literal(name, name)], meaning])
        for value in set(exit_codes.MEANINGS) - {value for value, _ in named}:
            logger.warning("MEANINGS has code %d that no EXIT_* constant names", value, location=self.get_location())
        return [table(["Code", "Constant", "Meaning"], rows)]


# --- axes -----------------------------------------------------------------------------------------


def scored_by(axis) -> str:
    ways = []
    if axis.deterministic:
        ways.append("deterministic checks (no model)")
    if axis.answer is not None:
        ways.append("a judge model" + (" when the rubric asks for one" if axis.deterministic else ""))
    return "; ".join(ways)


class AxesDirective(SphinxDirective):
    """The axis registry, as each axis object describes itself."""

    def run(self) -> list[nodes.Node]:
        from judgekit.axes import AXES

        rows = []
        for axis in AXES.values():
            if not axis.description:
                logger.warning("axis %s has no description", axis.name, location=self.get_location())
            judge_reads = ""
            if axis.answer is not None:
                judge_reads = (" The judge is shown the world's end-state diff."
                               if axis.prompt_reads_world else "")
            rows.append([
                [nodes.literal(axis.name, axis.name)],
                axis.kind,
                f"{axis.figure} (default minimum {axis.default_minimum:g})",
                scored_by(axis) + "." + judge_reads,
                axis.description,
            ])
        return [table(["Axis", "Kind", "The gate reads", "Scored by", "What it measures"], rows)]


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("judgekit-schemas", SchemasDirective)
    app.add_directive("judgekit-exit-codes", ExitCodesDirective)
    app.add_directive("judgekit-axes", AxesDirective)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
