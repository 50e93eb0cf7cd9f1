"""preflight: everything that can fail before GPU money is spent, in one answer.

Each check is ``{"name", "ok", "detail", "fix", "elapsed_s"}`` (plus ``code``
when it failed, ``warning`` when it passed with a caveat, ``data``) under a
stable name. Checks that make later ones impossible stop the run (brev
missing, not logged in, instance unknown / not running / not exec-ready);
otherwise every check is reported, so one run tells the whole truth. ``ok``
is true only when every check passed; warnings do not fail it.

Order: the local checks first (``image_ref``, ``s3``: :mod:`.local`), then ``brev_cli``,
``brev_auth``, ``instance``, ``exec_ready`` (:mod:`.reach`, :mod:`.instance_wait`), then ONE
combined round trip for ``docker``, ``gpu``, ``disk``, ``ngc_auth`` (login + ``docker manifest
inspect``), ``s3_from_instance`` and ``image`` (:mod:`.on_instance` walks the registered units of
:mod:`.units`); ``--pull`` (:mod:`.pull`) and ``--gpu-smoke`` (:mod:`.smoke`) are their own round
trips. Once the instance is exec-ready that is 2 ``brev exec`` calls (the successful probe and the
combined script), plus one ``brev copy`` when an NGC key travels.

Facts relied on: brev-cli behaviour in ``references/brev-exec.md`` (read from brevdev/brev-cli)
(``ls --json`` shape and statuses, RUNNING before sshd, the two-word probe,
>= 600 s for a first exec); the NGC login and entitlement rule of the TAO
skill bank contract (``docker manifest inspect`` failing before any login =
not authenticated, after a successful login = not entitled); Docker CLI
messages classified by :func:`tao_brev.docker_state.docker_error_code`.
"""

from __future__ import annotations

from .docker_gpu import _json_line   # tests/test_real_docker.py reads docker's JSON with it
from .image import image_facts, registry_bytes
from .instance_wait import BROKEN_STATES, INSTANCE_POLL_S, settle_instance
from .ngc import classify_ngc
from .on_instance import combined_script
from .reach import PROBE_INTERVAL_S, _probe_until_ready   # tests/test_transport.py drives the probe
from .report import Check, PreflightRequest
from .units import Answers, S3Target
from .verb import login_only, preflight

__all__ = ["Answers", "BROKEN_STATES", "Check", "INSTANCE_POLL_S", "PROBE_INTERVAL_S", "PreflightRequest",
           "S3Target", "classify_ngc", "combined_script", "image_facts", "login_only", "preflight",
           "registry_bytes", "settle_instance"]
