"""pytest plugin for dev/mutation.py's runs (loaded with -p dev.mutation_plugin).

mutmut forks each mutant's worker from a process that already ran the tests once, so
every functools cache of the package already holds the original code's answers: a
mutant behind a cache (the memos of tao_brev.secrets) would never run. Every cache of every
tao_brev module is emptied before each test."""

import sys


def pytest_runtest_setup(item):
    for name, module in list(sys.modules.items()):
        if not name.startswith("tao_brev"):
            continue
        for value in list(vars(module).values()):
            clear = getattr(value, "cache_clear", None)
            if callable(clear):
                clear()
