"""What every state document shares: fields read from a JSON object and written back to one."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, ClassVar, Mapping


class JsonObject:
    """A dataclass mixin. ``from_json`` takes the document's known fields (the others are kept in
    ``extra`` when the class has that field, else dropped); ``to_json`` gives the document back,
    fields in declaration order, a field left at None omitted (absent and null read the same)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]   # a mixin of dataclasses: each subclass is one

    @classmethod
    def json_fields(cls) -> tuple[str, ...]:
        """The names the document carries (``extra`` and other fields with ``json=False`` are not)."""
        return tuple(f.name for f in fields(cls) if f.metadata.get("json", True))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]):
        known = cls.json_fields()
        values = {name: data[name] for name in known if name in data}
        if "extra" in {f.name for f in fields(cls)}:
            values["extra"] = {k: v for k, v in data.items() if k not in known}
        return cls(**values)

    KEEP_NULL: frozenset = frozenset()   # fields written as null rather than left out (the record's required ones)

    def to_json(self) -> Mapping[str, Any]:
        out = {name: _plain(getattr(self, name)) for name in self.json_fields()
               if getattr(self, name) is not None or name in self.KEEP_NULL}
        out.update(getattr(self, "extra", None) or {})
        return out


def _plain(value: Any) -> Any:
    """A nested document as JSON (a list of them included); anything else as it is."""
    if isinstance(value, JsonObject):
        return value.to_json()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
