"""A mypy plugin (pyproject.toml ``[tool.mypy] plugins``): ``.get("KEY")`` on a TypedDict that has
no such key is an error, as ``d["KEY"]`` already is (mypy itself types it ``object`` and says
nothing, so a misspelt answer key would read as absent: tests/test_types.py)."""

from __future__ import annotations

from typing import Callable

from mypy.plugin import MethodContext, Plugin
from mypy.plugins.default import typed_dict_get_callback
from mypy.typeops import try_getting_str_literals
from mypy.types import Type, TypedDictType, get_proper_type


def _get(ctx: MethodContext) -> Type:
    owner = get_proper_type(ctx.type)
    if isinstance(owner, TypedDictType) and ctx.args and len(ctx.args[0]) == 1:
        for key in try_getting_str_literals(ctx.args[0][0], ctx.arg_types[0][0]) or []:
            if key not in owner.items:
                ctx.api.fail(f'TypedDict "{owner.fallback.type.name}" has no key "{key}" (.get)', ctx.context)
    return typed_dict_get_callback(ctx)


class AnswerKeys(Plugin):
    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        return _get if fullname == "typing.Mapping.get" else None


def plugin(version: str) -> type[Plugin]:
    return AnswerKeys
