"""Writes ``tao_brev/model/answer_types/``: the scripts' answers as ``TypedDict`` classes, one
module per JSON Schema of ``references/schemas/`` that describes an answer (or a part of one).

The schemas are the authority (the answers are checked against them, tests/test_answers.py);
the classes are made from them, so code that builds or reads an answer is type-checked against
the same fields (``tests/test_types.py`` runs mypy over the package). Every class is
``total=False``: an answer carries the keys its case needs.

    python dev/gen_answer_types.py           # write the modules
    python dev/gen_answer_types.py --check   # exit 1 when a module differs from what it would write

Mapping: string/integer/number/boolean/null -> str/int/float/bool/None (a type list or an enum
is their union; an enum or a const of strings is ``str``); an array -> ``list[item]``; an object
with properties -> a class (a ``$defs`` entry named after it, an inline one after its parent and
key); an object without -> ``dict[str, VALUE]`` (``additionalProperties``' type, else ``Any``); an
object with no properties of its own and one ``allOf`` ``$ref`` -> the class of that object.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "references" / "schemas"
OUT = ROOT / "tao_brev" / "model" / "answer_types"
# schema file -> (module, the class of its root object); common's root has no properties
ROOTS = {"common": None, "cost": "CostFacts", "error": "ErrorAnswer", "teardown": "TeardownAnswer",
         "submit": "SubmitAnswer", "preflight": "PreflightAnswer", "poll_status": "PollAnswer",
         "job_record": "RecordDocument"}   # the TAO bank's job record as stored (model.JobRecord makes one)
# a $defs entry whose class name would say too little
DEF_NAMES = {("common", "error"): "ErrorObject", ("common", "input"): "InputStaged", ("teardown", "stop"): "StopFacts"}
SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None"}


def camel(word: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in word.replace("-", "_").split("_"))


class Generator:
    def __init__(self) -> None:
        self.docs = {p.name.split(".")[0]: json.loads(p.read_text(encoding="utf-8"))
                     for p in sorted(SCHEMAS.glob("*.schema.json")) if p.name.split(".")[0] in ROOTS}
        self.classes: dict[str, list[str]] = {m: [] for m in ROOTS}   # module -> class texts, in order
        self.named: dict[tuple[str, str], str] = {}                    # (module, json pointer) -> class
        self.owner: dict[str, str] = {}                                # class -> module
        self.uses: dict[str, set[str]] = {m: set() for m in ROOTS}     # module -> classes of other modules

    def resolve(self, module: str, ref: str) -> tuple[str, str, dict]:
        file, _, pointer = ref.partition("#")
        target = file.split(".")[0] if file else module
        node = self.docs[target]
        for part in [p for p in pointer.split("/") if p]:
            node = node[part]
        return target, pointer, node

    def type_of(self, module: str, schema: dict, name: str, pointer: str) -> str:
        if "$ref" in schema:
            target, ref_pointer, node = self.resolve(module, schema["$ref"])
            if ref_pointer == "" and ROOTS.get(target):   # another answer, whole
                return self.use(module, self.object_class(target, node, ROOTS[target], ""))
            default = DEF_NAMES.get((target, ref_pointer.rsplit("/", 1)[-1]), camel(ref_pointer.rsplit("/", 1)[-1]))
            return self.use(module, self.type_of(target, node, default, ref_pointer))
        for key in ("oneOf", "anyOf"):
            if key in schema:
                return union(self.type_of(module, s, name, f"{pointer}/{key}/{i}")
                             for i, s in enumerate(schema[key]))
        if "enum" in schema or "const" in schema:
            values = schema.get("enum", [schema.get("const")])
            return union(SCALARS[json_type(v)] for v in values)
        types = schema.get("type")
        if isinstance(types, list):
            return union(self.type_of(module, {**schema, "type": t}, name, pointer) for t in types)
        if types == "array":
            item = self.type_of(module, schema.get("items", {}), name + "Item", pointer + "/items")
            return f"list[{item}]"
        if schema.get("properties") == {} and len(schema.get("allOf", [])) == 1:   # the same object as another
            return self.type_of(module, schema["allOf"][0], name, pointer)
        if types == "object" or (types is None and "properties" in schema):
            if "properties" in schema:
                return self.object_class(module, schema, name, pointer)
            extra = schema.get("additionalProperties")
            value = self.type_of(module, extra, name + "Value", pointer) if isinstance(extra, dict) else "Any"
            return f"dict[str, {value}]"
        return SCALARS.get(types, "Any") if isinstance(types, str) else "Any"

    def use(self, module: str, type_text: str) -> str:
        """``type_text``, its classes of other modules noted for ``module``'s imports."""
        for word in type_text.replace("[", " ").replace("]", " ").replace("|", " ").replace(",", " ").split():
            if self.owner.get(word) and self.owner[word] != module:
                self.uses[module].add(word)
        return type_text

    def object_class(self, module: str, schema: dict, name: str, pointer: str) -> str:
        if (module, pointer) in self.named:
            return self.named[(module, pointer)]
        assert name not in self.owner, f"two classes named {name}"
        self.named[(module, pointer)], self.owner[name] = name, module
        props = dict(schema.get("properties", {}))
        for part in schema.get("allOf", []):
            props.update(self.resolve(module, part["$ref"])[2].get("properties", {}) if "$ref" in part else {})
        lines = []
        for key, sub in props.items():
            assert key.isidentifier(), f"{name}.{key} is no identifier"
            lines.append(f"    {key}: {self.type_of(module, sub, name + camel(key), f'{pointer}/properties/{key}')}")
        title = schema.get("title") or schema.get("description") or ""
        doc = f'    """{first_words(title)}"""\n' if title else ""
        self.classes[module].append(f"class {name}(TypedDict, total=False):\n{doc}" + "\n".join(lines) + "\n")
        return name

    def modules(self) -> dict[str, str]:
        for module, root in ROOTS.items():
            doc = self.docs[module]
            if root:
                self.object_class(module, doc, root, "")
            for key, node in doc.get("$defs", {}).items():
                if "properties" in node:
                    self.type_of(module, node, DEF_NAMES.get((module, key), camel(key)), f"/$defs/{key}")
        texts = {}
        for module, classes in self.classes.items():
            imports = sorted(self.uses[module])
            by_module: dict[str, list[str]] = {}
            for cls in imports:
                by_module.setdefault(self.owner[cls], []).append(cls)
            head = [f'"""The types of references/schemas/{module}.schema.json (made by dev/gen_answer_types.py:',
                    'do not edit; change the schema and run it again)."""', "", "from __future__ import annotations", "",
                    "from typing import Any, TypedDict" if any("Any" in c for c in classes) else "from typing import TypedDict"]
            head += [""] * bool(by_module) + [wrapped(f"from .{m} import ", sorted(c)) for m, c in sorted(by_module.items())]
            texts[f"{module}.py"] = "\n".join(head) + "\n\n\n" + "\n\n".join(classes) + \
                "\n\n__all__ = [" + ", ".join(repr(c.split("(")[0][6:]) for c in classes) + "]\n"
        names = sorted(self.owner)
        texts["__init__.py"] = ('"""The scripts\' answers as TypedDicts, made from references/schemas/ by '
                                'dev/gen_answer_types.py."""\n\n' + "".join(
                                    wrapped(f"from .{m} import ", sorted(c for c in names if self.owner[c] == m)) + "\n"
                                    for m in ROOTS if any(self.owner[c] == m for c in names)) +
                                "\n__all__ = [" + ", ".join(repr(n) for n in names) + "]\n")
        return texts


def first_words(text: str, width: int = 88) -> str:
    """A description's first sentence, cut at a word within ``width`` characters."""
    text = text.split(": ")[0].split(". ")[0].rstrip(".").replace('"', "'")
    return text if len(text) <= width else text[:width].rsplit(" ", 1)[0] + " ..."


def wrapped(start: str, names: list[str], width: int = 110) -> str:
    """``from .x import a, b`` within ``width`` characters a line (parenthesised when longer)."""
    if len(start) + len(", ".join(names)) <= width:
        return start + ", ".join(names)
    lines, line = [], "   "
    for name in names:
        if len(line) + len(name) + 2 > width:
            lines.append(line.rstrip())
            line = "   "
        line += f" {name},"
    return start + "(\n" + "\n".join(lines + [line.rstrip()]) + "\n)"


def json_type(value) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}[type(value)]


def union(types) -> str:
    seen: list[str] = []
    for t in types:
        for part in t.split(" | "):
            if part not in seen:
                seen.append(part)
    if "Any" in seen:
        return "Any"
    if "None" in seen:   # None last: "str | None"
        seen = [t for t in seen if t != "None"] + ["None"]
    return " | ".join(seen)


def main(argv: list[str]) -> int:
    texts = Generator().modules()
    if "--check" in argv:
        stale = [n for n, t in texts.items() if not (OUT / n).is_file() or (OUT / n).read_text(encoding="utf-8") != t]
        stale += [p.name for p in OUT.glob("*.py") if p.name not in texts]
        if stale:
            print(f"stale: {', '.join(sorted(stale))}: run python dev/gen_answer_types.py", file=sys.stderr)
            return 1
        return 0
    OUT.mkdir(exist_ok=True)
    for name, text in texts.items():
        (OUT / name).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
