"""submit: open the record, then launch the TAO container on the instance, once.

Order (record-then-launch, from the TAO bank contract):
1. validate every input locally (names, spec, image, credentials) - bad input
   never opens a record;
2. ``records.open`` mints the job id and writes PENDING; the sidecar names the
   instance and marks the launch as in progress (with this process's pid);
3. credentials, if any, travel in a 0600 file (``credentials.push``);
4. ONE ``brev exec`` writes the spec, checks the inputs, and runs
   ``docker inspect <id> || docker run -d --name <id> --label tao-job=<id> ...``
   (never ``--rm``); it is never blindly repeated;
5. the record is marked RUNNING with backend ref ``<instance>/<id>``.

Storage tiers B and C (``staging``; ``references/storage.md``): before the
record opens, local inputs are uploaded to a content-addressed S3 prefix
(nothing twice); the S3 credentials travel in their own 0600 file and the
launch round trip first copies every input from S3 to
``~/tao-jobs/<id>/inputs/<NAME>`` with the AWS CLI carrier container, checks
the copy, then launches with the inputs mounted read-only at ``/data/<NAME>``.
Tier C also hands the S3 credentials (and the input / result URIs) to the job
container itself through ``--env-file``; tier B never does.

An ambiguous launch (the transport failed, so the container may or may not
exist) is reconciled by asking the instance for the container named after the
job id: one -> adopt it; none -> mark ERROR (ERR_INFRA), a new submit with
``--retry-of`` is safe; no answer -> the record stays PENDING and the next
``poll_status.py`` reconciles it.

The package, one job per module: :mod:`.plan` (the request, what the guards learn, the
launch script), :mod:`.guards` and :mod:`.spec_guards` (every check before a record opens,
in order), :mod:`.stage` (tiers B/C), :mod:`.launch` (record, credentials, the one
``brev exec``), :mod:`.outcome` (that round trip's answer, read), :mod:`.verb` (``submit``).
This module hands on the names scripts and other modules use.
"""

from __future__ import annotations

from .launch import REFUSED_BEFORE_RUN, STAGE_TIMEOUT_S, USER_ERRORS, interrupted_fix
from .plan import Plan, SubmitRequest
from .spec_guards import MAX_SPEC_BYTES, _read_spec, _refuse_interpolated_secrets, _refuse_secret_overrides
from .stage import Staging
from .verb import submit

__all__ = ["MAX_SPEC_BYTES", "Plan", "REFUSED_BEFORE_RUN", "STAGE_TIMEOUT_S", "Staging", "SubmitRequest", "USER_ERRORS",
           "interrupted_fix", "submit",
           # reached by tests of other modules (test_known_secrets, test_bounded_reads)
           "_read_spec", "_refuse_interpolated_secrets", "_refuse_secret_overrides"]
