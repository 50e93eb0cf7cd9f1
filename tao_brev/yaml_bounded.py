"""YAML parsing of untrusted specs, bounded, with errors that never echo input.

``safe_load`` alone is not enough for a spec a user (or an attacker) hands in:

* aliases share nodes, so a few lines (``&a [*b, *b, ...]`` nested: the
  "billion laughs") expand to billions of nodes for whoever walks the result;
  recursive aliases (``&a [*a]``) never end;
* PyYAML's error text quotes the offending line, which may be a credential
  (``wandb_key: "<value>`` with no closing quote).

:func:`load` composes the document first, then counts the nodes the document
expands to (each alias counted as the whole subtree it stands for) and refuses
more than MAX_NODES, or any alias that refers to a node containing itself,
before constructing anything: BAD_SPEC in milliseconds, never minutes and
gigabytes. Errors give the file, line and column, never the text there.
"""

from __future__ import annotations

from .errors import TaoBrevError

MAX_NODES = 100_000      # expanded nodes of one spec (a large real TAO spec has a few hundred)
MAX_DEPTH = 200          # nesting of collections


def _problem(label: str, what: str, mark=None) -> TaoBrevError:
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return TaoBrevError("BAD_SPEC", f"{label}: {what}{where} (the text there is not repeated here)",
                        "Fix the YAML at that line and column of the spec file.")


def _expanded_size(root) -> int:
    """Nodes the document expands to; raises ValueError past MAX_NODES / MAX_DEPTH or on a cycle."""
    import yaml

    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node, depth: int) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in active:
            raise ValueError("a recursive alias (an anchor used inside itself)")
        if depth > MAX_DEPTH:
            raise ValueError(f"nesting deeper than {MAX_DEPTH} levels")
        active.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = []
        for child in children:
            total += size(child, depth + 1)
            if total > MAX_NODES:
                raise ValueError(f"more than {MAX_NODES} nodes once aliases are expanded")
        active.discard(key)
        sizes[key] = total
        return total

    return size(root, 0)


def load(text: str, label: str):
    """The YAML document in ``text`` (``yaml.safe_load`` semantics), or
    BAD_SPEC naming ``label`` with line and column only."""
    import yaml

    try:
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            try:
                _expanded_size(node)
            except ValueError as exc:
                raise _problem(label, f"refused: {exc}", getattr(node, "start_mark", None)) from None
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise _problem(label, f"is not valid YAML ({type(exc).__name__})", mark) from None
    except yaml.YAMLError as exc:
        raise _problem(label, f"is not valid YAML ({type(exc).__name__})") from None
    except RecursionError:
        raise _problem(label, f"is nested too deeply (more than {MAX_DEPTH} levels)") from None
