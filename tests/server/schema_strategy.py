"""Hypothesis strategies from JSON Schema, for the subset pydantic and MCP tools produce:
objects with properties and required keys, anyOf/oneOf, enums and consts, bounded numbers and
strings, arrays, additionalProperties and $ref into $defs. (hypothesis-jsonschema no longer
works with current hypothesis, and this subset is small.)"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

TEXT = st.text(max_size=30)


def from_schema(schema: dict[str, Any], root: dict[str, Any] | None = None) -> st.SearchStrategy:
    root = root or schema
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return st.deferred(lambda: from_schema(root["$defs"][name], root))
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return st.one_of([from_schema(s, root) for s in schema[key]])
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([from_schema({**schema, "type": k}, root) for k in kind])
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        low = schema.get(
            "minimum",
            schema.get("exclusiveMinimum", -(10**9)) + 1
            if "exclusiveMinimum" in schema
            else -(10**9),
        )
        high = schema.get("maximum", 10**9)
        return st.integers(min_value=int(low), max_value=int(high))
    if kind == "number":
        return st.floats(
            min_value=schema.get("minimum", schema.get("exclusiveMinimum")),
            max_value=schema.get("maximum"),
            allow_nan=False,
            exclude_min="exclusiveMinimum" in schema,
        )
    if kind == "string":
        return st.text(
            min_size=schema.get("minLength", 0), max_size=min(schema.get("maxLength", 40), 40)
        )
    if kind == "array":
        return st.lists(from_schema(schema.get("items", {}), root), max_size=3)
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        required = set(schema.get("required", []))
        fixed = {k: from_schema(v, root) for k, v in properties.items() if k in required}
        optional = {k: from_schema(v, root) for k, v in properties.items() if k not in required}
        extra = schema.get("additionalProperties")
        base = st.fixed_dictionaries(fixed, optional=optional)
        if isinstance(extra, dict):
            return st.tuples(base, st.dictionaries(TEXT, from_schema(extra, root), max_size=2)).map(
                lambda pair: {**pair[1], **pair[0]}
            )
        return base
    return st.one_of(st.none(), st.booleans(), st.integers(), TEXT)  # no type: anything
