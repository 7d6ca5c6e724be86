"""Score a model's answer at a replayed step against what the session did there.

At a step whose calls worked (a CALL case) the answer is judged on:

- ``right_tool``: its first call names a tool the session called at that step;
- ``valid_arguments``: it made a call whose arguments are a JSON object fitting the tool's schema
  (any object when the tool has no schema; see ``kindling.eval.tools``);
- ``key_arguments``: the right tool, and the key arguments (the schema's required ones the session
  gave, else all it gave) equal after normalising (case, spacing, numbers written as text);
- ``known_failure``: the call has a shape that only ever failed on the training side (see
  ``FailureIndex``), or repeats a training call that failed;
- ``no_call``: no call at all where one was due;
- ``right_call``: right tool, valid and key arguments, and no known failure.

At a call that failed (a FAILED case) it is judged on ``avoids_failure``: it does not repeat the
failed call (same tool, same key arguments) and does not match a known failure of the same error
class (``error_class``, the one mining groups lessons by). ``good`` is ``right_tool`` for a CALL case and ``avoids_failure`` for a FAILED one: the
figure the verdict is drawn from (choosing the tool is what past examples are shown for; the
other figures say what came with it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from kindling.eval.tools import ToolCatalog
from kindling.mining.lessons import error_class
from kindling.mining.model import OutcomeStatus

__all__ = [
    "CALL",
    "CALL_METRICS",
    "FAILED",
    "FAILED_METRICS",
    "FailureIndex",
    "ModelCall",
    "argument_shape",
    "error_class",
    "normalise",
    "parse_arguments",
    "score_answer",
]

#: Kinds of case: a step whose calls worked (was the same call made?) and a call that failed
#: (was its error avoided?).
CALL = "call"
FAILED = "failed"
#: Metrics of a CALL case and of a FAILED case, in report order; ``good`` is computed for both.
CALL_METRICS = ("right_tool", "valid_arguments", "key_arguments", "known_failure", "no_call", "right_call")
FAILED_METRICS = ("avoids_failure",)

_PLACEHOLDER = re.compile(r"<([a-z][a-z0-9_]*?)_\d+>")
_SPACE = re.compile(r"\s+")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_MISSING = object()


class RecordedCallLike(Protocol):
    """What ``FailureIndex`` reads of a recorded call."""

    @property
    def name(self) -> str: ...

    @property
    def arguments(self) -> Any: ...

    @property
    def status(self) -> OutcomeStatus: ...

    @property
    def error_class(self) -> str | None: ...


def _text_shape(text: str) -> str:
    placeholder = _PLACEHOLDER.fullmatch(text)
    if placeholder is not None:
        return f"<{placeholder.group(1)}>"
    shape = re.sub(r"[A-Za-z]+", "a", re.sub(r"\d+", "9", text))
    return shape[:16]


def argument_shape(value: Any) -> str:
    """Return the shape of an argument value: its keys, types and the character classes of its
    strings ("#W2378156" -> "#a9", "<order_id_1>" -> "<order_id>"), without the values."""
    if isinstance(value, dict):
        inner = ",".join(f"{key}:{argument_shape(value[key])}" for key in sorted(value))
        return "{" + inner + "}"
    if isinstance(value, list):
        return "[" + "|".join(sorted({argument_shape(item) for item in value})) + "]"
    if isinstance(value, bool):
        return "b"
    if isinstance(value, (int, float)):
        return "n"
    if value is None:
        return "null"
    return "s:" + _text_shape(str(value))


def normalise(value: Any) -> Any:
    """Return ``value`` in the form key arguments are compared in: strings folded in case and
    spacing (numbers written as text become numbers), numbers as floats, containers element-wise."""
    if isinstance(value, str):
        text = _SPACE.sub(" ", value).strip().casefold()
        if _NUMBER.fullmatch(text):
            return float(text)
        return text
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, list):
        return [normalise(item) for item in value]
    if isinstance(value, dict):
        return {str(key): normalise(item) for key, item in value.items()}
    return str(value)


def parse_arguments(text: str | None) -> Any:
    """Return the parsed arguments of a call (``None`` when they are not JSON)."""
    if text is None:
        return None
    if not text.strip():
        return {}
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def _key(name: str, arguments: Any) -> bytes:
    return orjson.dumps([name, normalise(arguments)], option=orjson.OPT_SORT_KEYS)


@dataclass
class FailureIndex:
    """The failure classes known on the training side.

    A failure class is a tool, an argument shape and an error class. A call matches one when it
    has a shape that failed on the training side and never worked there (a shape that also worked
    says nothing), or when it repeats, argument for argument, a training call that failed.
    """

    failed_shapes: dict[tuple[str, str], str] = field(default_factory=dict)
    worked_shapes: set[tuple[str, str]] = field(default_factory=set)
    failed_calls: dict[bytes, str] = field(default_factory=dict)

    @classmethod
    def from_calls(cls, calls: Iterable[RecordedCallLike]) -> FailureIndex:
        """Return the index of the training side's ``calls`` (prepared as the held-out ones are)."""
        index = cls()
        for call in calls:
            shape = (call.name, argument_shape(call.arguments))
            if call.status is OutcomeStatus.OK:
                index.worked_shapes.add(shape)
            elif call.status is OutcomeStatus.FAILED and call.error_class is not None:
                index.failed_shapes.setdefault(shape, call.error_class)
                index.failed_calls.setdefault(_key(call.name, call.arguments), call.error_class)
        return index

    def match(self, name: str, arguments: Any) -> str | None:
        """Return the error class a call of ``name`` with ``arguments`` is known to meet, or None."""
        found = self.failed_calls.get(_key(name, arguments))
        if found is not None:
            return found
        shape = (name, argument_shape(arguments))
        if shape in self.worked_shapes:
            return None
        return self.failed_shapes.get(shape)


@dataclass(frozen=True)
class ModelCall:
    """The first call of a model's answer: the tool and the arguments' text as sent."""

    name: str
    arguments: str | None


def _key_arguments_equal(expected: Any, got: Any, required: Sequence[str]) -> bool:
    if not isinstance(expected, Mapping):
        return normalise(expected) == normalise(got) if isinstance(expected, str) else False
    if not isinstance(got, Mapping):
        return not expected
    keys = [key for key in required if key in expected] or list(expected)
    return all(normalise(expected[key]) == normalise(got.get(key, _MISSING)) for key in keys)


def score_answer(
    kind: str,
    expected_calls: Sequence[tuple[str, Any]],
    error: str | None,
    call: ModelCall | None,
    catalog: ToolCatalog,
    failures: FailureIndex,
) -> dict[str, bool]:
    """Return the metrics of one answer (metric name -> met or not).

    ``kind`` is CALL or FAILED; ``expected_calls`` the step's recorded calls (name, arguments; the
    failed call for FAILED); ``error`` the failed call's error class; ``call`` the answer's first
    tool call (None: the answer made none).
    """
    if kind == FAILED:
        name, expected = expected_calls[0]
        if call is None:
            return {"avoids_failure": True, "good": True}
        arguments = parse_arguments(call.arguments)
        repeats = call.name == name and _key_arguments_equal(expected, arguments, catalog.required(name))
        known = failures.match(call.name, arguments)
        avoided = not repeats and (known is None or known != error)
        return {"avoids_failure": avoided, "good": avoided}

    if call is None:
        scores = dict.fromkeys(CALL_METRICS, False)
        scores["no_call"] = True
        scores["good"] = False
        return scores
    arguments = parse_arguments(call.arguments)
    valid = catalog.check(call.name, arguments)
    matching = [expected for name, expected in expected_calls if name == call.name]
    right_tool = bool(matching)
    key_arguments = right_tool and _key_arguments_equal(matching[0], arguments, catalog.required(call.name))
    known_failure = failures.match(call.name, arguments) is not None
    right_call = right_tool and valid and key_arguments and not known_failure
    return {
        "right_tool": right_tool,
        "valid_arguments": valid,
        "key_arguments": key_arguments,
        "known_failure": known_failure,
        "no_call": False,
        "right_call": right_call,
        "good": right_tool,
    }
