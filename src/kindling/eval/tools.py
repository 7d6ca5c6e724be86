"""The tools a replayed model is offered, and the argument schemas its calls are checked against.

Recorded sessions rarely keep their tool definitions. When a session does (``metadata["tools"]``,
OpenAI tool definitions), those are used as they are. Otherwise a source's tools are the ones its
agent called, and each tool's schema is inferred from the calls that worked: every argument seen,
with the JSON types seen, required when every call that worked gave it, nothing else allowed. A tool
with no call that worked and no definition has no schema: its arguments are only checked to be a
JSON object, and the report counts those checks as "no schema".
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

__all__ = ["ToolCatalog", "infer_schema", "json_type"]


def json_type(value: Any) -> str:
    """Return the JSON Schema type name of a JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _type_entry(types: Counter[str]) -> dict[str, Any]:
    names = set(types)
    if "number" in names:
        names.discard("integer")
    ordered = sorted(names)
    return {"type": ordered[0] if len(ordered) == 1 else ordered}


def infer_schema(calls: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Return a JSON schema fitting every argument object in ``calls`` (None when there is none).

    Properties are the keys seen with the types seen; a key is required when every call gave it;
    no other key is allowed (the tool's interface as its successful calls show it).
    """
    seen = 0
    types: dict[str, Counter[str]] = defaultdict(Counter)
    present: Counter[str] = Counter()
    for arguments in calls:
        seen += 1
        for key, value in arguments.items():
            types[key][json_type(value)] += 1
            present[key] += 1
    if not seen:
        return None
    return {
        "type": "object",
        "properties": {key: _type_entry(types[key]) for key in sorted(types)},
        "required": sorted(key for key, count in present.items() if count == seen),
        "additionalProperties": False,
    }


@dataclass
class ToolCatalog:
    """The tools of one source (one agent set-up): their names, schemas and how each was found.

    ``schemas`` maps a tool to its JSON schema (None: no schema); ``defined`` names the tools whose
    schema came from a recorded definition rather than from inference.
    """

    schemas: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    defined: set[str] = field(default_factory=set)
    _validators: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def infer(
        cls,
        worked: Mapping[str, Sequence[Mapping[str, Any]]],
        called: Iterable[str],
        definitions: Iterable[Mapping[str, Any]] = (),
    ) -> ToolCatalog:
        """Return the catalog for tools ``called`` (plus every definition given).

        ``worked`` maps a tool to the argument objects of its calls that worked; ``definitions``
        are OpenAI tool definitions recorded with the sessions (their schemas win).
        """
        catalog = cls()
        for name in sorted(set(called)):
            catalog.schemas[name] = infer_schema(worked.get(name, ()))
        for definition in definitions:
            function = definition.get("function", definition)
            if not isinstance(function, Mapping):
                continue
            defined = function.get("name")
            if not isinstance(defined, str) or not defined:
                continue
            parameters = function.get("parameters")
            catalog.schemas[defined] = dict(parameters) if isinstance(parameters, Mapping) else None
            catalog.defined.add(defined)
        return catalog

    @property
    def names(self) -> list[str]:
        """The tool names, sorted."""
        return sorted(self.schemas)

    def required(self, name: str) -> list[str]:
        """The required arguments of ``name`` (empty when unknown or schemaless)."""
        schema = self.schemas.get(name)
        required = schema.get("required") if schema else None
        return [str(key) for key in required] if isinstance(required, list) else []

    def definitions(self) -> list[dict[str, Any]]:
        """The tools as a chat-completions ``tools`` array (a schemaless tool takes any object)."""
        return [
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": "",
                    "parameters": self.schemas[name] or {"type": "object"},
                },
            }
            for name in self.names
        ]

    def check(self, name: str, arguments: Any) -> bool:
        """Return whether a call of ``name`` with parsed ``arguments`` is valid.

        A call of a tool outside the catalog is invalid; arguments that are not a JSON object are
        invalid; with a schema they must fit it; without one any object is valid.
        """
        if name not in self.schemas or not isinstance(arguments, dict):
            return False
        schema = self.schemas[name]
        if schema is None:
            return True
        validator = self._validators.get(name)
        if validator is None:
            try:
                validator = Draft202012Validator(schema)
                Draft202012Validator.check_schema(schema)
            except SchemaError:
                # A recorded definition with a broken schema: checked as having none.
                self.schemas[name] = None
                return True
            self._validators[name] = validator
        return bool(validator.is_valid(arguments))
