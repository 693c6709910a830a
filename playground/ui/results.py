"""Named handler results: one field per output component, so an event lists its outputs once.

A handler with several outputs returns a named tuple whose fields are named after its output
components; the event's ``outputs=`` is built from those fields (``outputs(Result, page.model)``), so
adding an output means adding a field and a component of the same name. The fields' order is the
order an API caller (``gradio_client``) receives them in. ``only(Result, x=...)`` leaves every output
it does not name unchanged (``gr.skip()``).
"""

from __future__ import annotations

from collections import namedtuple

import gradio as gr


def result(name: str, *fields: str) -> type:
    """A named tuple type with these fields (a field may repeat across results: it names a component)."""
    return namedtuple(name, fields)


def only(cls, **values):
    """A ``cls`` with ``values`` set and every other output left as it is."""
    unknown = set(values) - set(cls._fields)
    if unknown:
        raise TypeError(f"{cls.__name__} has no output {sorted(unknown)}")
    return cls(**{name: values.get(name, gr.skip()) for name in cls._fields})


def skipped(cls):
    """A ``cls`` that changes nothing."""
    return only(cls)


def outputs(cls, *holders, **named) -> list:
    """The components of ``cls``'s fields, in order: ``named[field]`` if given, else the attribute of
    that name on the first holder (a tab's components) that has it."""
    found = []
    for field in cls._fields:
        if field in named:
            found.append(named[field])
            continue
        holder = next((h for h in holders if hasattr(h, field)), None)
        if holder is None:
            raise AttributeError(f"{cls.__name__}.{field}: no component of that name")
        found.append(getattr(holder, field))
    return found
