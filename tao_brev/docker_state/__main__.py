"""python -m tao_brev.docker_state --markdown"""

import sys

from .tables import markdown

if sys.argv[1:] != ["--markdown"]:
    sys.exit("usage: python -m tao_brev.docker_state --markdown")
sys.stdout.write(markdown())
