"""What a script's run needs once it does more than print its ``--help``: the answer's shape
(``answers``), the ``next`` step (``nextstep``), the sweep of credential files killed runs left
here, and the refusal of a credential's value on the command line.

``cli`` imports this module where a run starts working or answers (and ``context`` where a verb
asks for ``cli.Context``): a ``--help`` prints argparse's text and needs none of it; importing
it with ``cli`` would cost more than the whole ``--help`` budget (ARCHITECTURE.md).
"""

from __future__ import annotations

from . import answers, nextstep  # noqa: F401  (handed on)
from .credentials import sweep_local  # noqa: F401  (handed on)
from .secrets.guard import refuse_in_argv  # noqa: F401  (handed on)
