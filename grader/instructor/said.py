"""A message said by id: its value, how it is said in a language, and how it is kept as data.

Grading makes a message with :func:`said` (``said("shape", got="(2, 3)", expected="(3, 3)")``): a
:class:`Message`, whose text is its English from :data:`~grader.instructor.messages.MESSAGES`, so everything
that writes a message as text (grades.csv, junit.xml, the gradebook's ``message``) writes the English it always
did.  :func:`message_in` says it in another language, its parameters too: a parameter is a value or a name (kept
as it is, in every language), anything a learner wrote (an exception's text: shown, like all of a message,
through the report's ``inert`` and clip rules), or a message itself (``not run: … failed with: <message>``).
:func:`message_data` and :func:`message_from_data` keep a message's id and parameters as JSON data (the
gradebook, a Ray worker's reply), so a report can be written later in any language.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Union

from grader.instructor.messages import MESSAGES

__all__ = ["JOINED", "Message", "message_data", "message_from_data", "message_in", "parameters", "said"]

Param = Union[str, int, float, tuple["Param", ...]]  # noqa: UP007 - a recursive alias, evaluated at run time
"""A message's parameter: a value or a text (a :class:`Message` is one), or a tuple of them (a list: :data:`JOINED`)."""


class Message(str):
    """A message said by id: its text is its English (what grades.csv, junit.xml and the gradebook write), and
    it keeps its ``id`` and ``params`` to be said in another language (:func:`message_in`).  Frozen.

    ``text`` is the English it was said in where that is known (a message read back from the gradebook keeps the
    English it was recorded with); else it is rendered from :data:`MESSAGES`.
    """

    id: str
    params: Mapping[str, Param]

    def __new__(cls, id: str, params: Mapping[str, Any] | None = None, text: str | None = None) -> Message:
        kept = MappingProxyType({str(k): _kept(v) for k, v in (params or {}).items()})
        self = super().__new__(cls, _fill(MESSAGES[id]["en"], kept, "en") if text is None else text)
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "params", kept)
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a Message is frozen")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("a Message is frozen")

    def __reduce__(self) -> tuple[Any, ...]:
        return Message, (self.id, dict(self.params), str(self))

    def __copy__(self) -> Message:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Message:
        return self


def said(id: str, /, **params: Any) -> Message:
    """The message ``id`` of :data:`MESSAGES` with its parameters (a KeyError for an id not in the table)."""
    return Message(id, params)


def _kept(value: Any) -> Param:
    if isinstance(value, (str, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        return tuple(_kept(v) for v in value)
    return str(value)


JOINED = {"zh": "、"}
"""How a language joins a list of things (a tuple parameter): ", " where it is not here."""


def _shown(value: Param, lang: str) -> Any:
    if isinstance(value, tuple):
        return JOINED.get(lang, ", ").join(str(_shown(v, lang)) for v in value)
    if isinstance(value, Message):
        return message_in(value, lang)
    return value


def _fill(template: str, params: Mapping[str, Param], lang: str) -> str:
    return template.format_map({name: _shown(value, lang) for name, value in params.items()})


def parameters(template: str) -> set[str]:
    """The names of a template's ``{parameters}``."""
    return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}


def message_in(message: str, lang: str | None) -> str:
    """``message`` in ``lang``: a :class:`Message` from its template (its parameters rendered in ``lang`` too), its
    English text where the table has no template for it; any other text as it is."""
    if not isinstance(message, Message) or lang in (None, "", "en"):
        return str(message)
    template = MESSAGES.get(message.id, {}).get(str(lang))
    if template is None:
        return str(message)
    try:
        return _fill(template, message.params, str(lang))
    except (KeyError, IndexError, ValueError):  # recorded with other parameters than the table's template has now
        return str(message)


# --- kept as data (the gradebook, a Ray worker's reply) --------------------------------------------------------


def message_data(message: str) -> dict[str, Any] | None:
    """A message's id and parameters as JSON data (``{"id", "params"}``, a parameter that is a message nested the
    same way), or None for text that was not said by id."""
    if not isinstance(message, Message):
        return None
    return {"id": message.id, "params": {name: _data(value) for name, value in message.params.items()}}


def _data(value: Param) -> Any:
    if isinstance(value, Message):
        return message_data(value)
    if isinstance(value, tuple):
        return [_data(v) for v in value]
    return value


def message_from_data(data: Any, text: str) -> str:
    """The message recorded as ``data`` (:func:`message_data`) with its English ``text``; ``text`` itself where there
    is no data, or none this table can say (an id or a parameter it no longer has)."""
    if not data:
        return text
    try:
        return Message(data["id"], {str(k): _param(v) for k, v in data["params"].items()}, text)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        return text


def _param(value: Any) -> Param:
    if isinstance(value, dict):
        return Message(value["id"], {str(k): _param(v) for k, v in value["params"].items()})
    if isinstance(value, list):
        return tuple(_param(v) for v in value)
    if isinstance(value, (str, int, float)):
        return value
    raise ValueError(f"not a message's parameter: {type(value).__name__}")


# --- a report's results in its language -----------------------------------------------------------------------
