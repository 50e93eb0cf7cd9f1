"""submit's plan: the request, what the guards learn about it, and the launch script
(``remote.submit_script``: the spec, the input checks, ``docker run``) built from both.

The same builders make the dry run's script (a placeholder job id, credential files
named by pattern) and the launch's (the minted job id, the copied files), so the
plan a dry run shows is the script a launch sends.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ... import remote, resume, spec_paths, tao_gpus, tao_schema
from ... import s3 as staging
from ...model.answer_types import SubmitAnswer, SubmitAnswerPlanItem
from ...remote import RunSpec
from ...routing import Routing
from ...vocabulary import StorageTier
from .outcome import inputs_check
from .stage import Staging


@dataclass
class SubmitRequest:
    instance: str
    image: str
    network_arch: str
    action: str
    spec: str
    storage_tier: str = StorageTier.A
    results_root: str | None = None
    bucket: str | None = None
    gpus: str = "all"
    env_names: list[str] = field(default_factory=list)
    shm_size: str = "16g"
    inputs: list[str] = field(default_factory=list)
    upload_excludes: list[str] = field(default_factory=list)
    ephemeral: bool = False
    dry_run: bool = False
    retry_of: str | None = None
    resume_from: str | None = None        # continue that train job from its last checkpoint (tao_brev.resume)
    overrides: list[str] = field(default_factory=list)
    price_per_hour: float | None = None   # USD; remembered for the job's cost facts
    allow_bundle_credential_env: bool = False   # --env BREV_API_TOKEN / NGC_KEY reach the container
    start: bool = False                   # `brev start` a STOPPED instance (billing resumes); else refuse
    share_gpus: bool = False              # launch even when a live tao-job container holds the same GPUs
    allow_unknown_arch: bool = False      # skip the network-arch / action list check
    no_spec_check: bool = False           # skip the spec check against TAO's schema (custom images)
    recover: dict | None = None           # --recover N policy, remembered in the sidecar (verbs/recover.py)
    argv: list[str] | None = None         # the script's own arguments: each fix names the exact command
    prog: str = "submit.py"               # the script as it was invoked

    def rerun(self, *, set_flags: dict[str, str] | None = None, env_names: list[str] | None = None,
              to_overrides: tuple[str, ...] = (), add: tuple[str, ...] = (), drop: tuple[str, ...] = (),
              renamed: dict[str, str] | None = None) -> str:
        """This submit's command line, changed: ``set_flags`` replaces (or adds)
        ``--flag value``, ``env_names`` replaces every ``--env`` value, ``to_overrides``
        moves those words after ``--``, ``add`` appends flags, ``drop`` removes flags (with
        their values), ``renamed`` replaces whole words (an override corrected). Built from ``argv``
        (shell-quoted); without it, from the request's main fields."""
        head, tail = self._words()
        if renamed:
            head, tail = [renamed.get(w, w) for w in head], [renamed.get(w, w) for w in tail]
        set_flags = dict(set_flags or {})
        out: list[str] = []
        i = 0
        while i < len(head):
            word = head[i]
            flag = word.split("=", 1)[0] if word.startswith("--") else None
            if flag == "--env" and env_names is not None:
                i += 1 if "=" in word else 2
                continue
            if flag in set_flags or flag in drop:
                if flag in set_flags:
                    out += [flag, set_flags.pop(flag)]
                i += 1 if "=" in word else 2
                continue
            if word not in to_overrides:
                out.append(word)
            i += 1
        for name in env_names or []:
            out += ["--env", name]
        for flag, value in set_flags.items():
            out += [flag, value]
        out += list(add)
        tail = tail + [w for w in to_overrides if w not in tail]
        return shlex.join([self.prog, *out, *(["--", *tail] if tail else [])])

    def _words(self) -> tuple[list[str], list[str]]:
        if self.argv is None:
            head = ["--instance", self.instance, "--image", self.image, "--network-arch", self.network_arch,
                    "--action", self.action, "--spec", self.spec]
            return head + (["--inputs", *self.inputs] if self.inputs else []), list(self.overrides)
        argv = list(self.argv)
        if "--" in argv:
            cut = argv.index("--")
            return argv[:cut], argv[cut + 1:]
        return argv, []

    @property
    def placeholder(self) -> str:
        """The job id of the dry run's script (no record opens before the guards pass)."""
        return f"{self.network_arch}-{self.action}-dryrun"


@dataclass
class Plan:
    """What the guards (:mod:`.guards`) learn about a request, in their order; the launch uses it.
    ``checked``, ``routing`` and ``run`` have no value until their guard sets it (``_schema``,
    ``_where``, ``_script``): read before, they raise AttributeError."""

    image: str = ""                      # bank.resolve_image: the image the versions key names
    arch_warnings: list[str] = field(default_factory=list)
    spec_text: str = ""
    spec_data: dict[str, Any] = field(default_factory=dict)   # the spec's YAML mapping
    checked: tao_schema.SpecCheck = field(init=False)   # spec_check.check's verdict
    gpu_plan: tao_gpus.GpuPlan = field(default_factory=tao_gpus.GpuPlan)
    resumed: resume.ResumePlan | None = None
    secret_values: dict[str, str] = field(default_factory=dict, repr=False)   # the --env values: never shown
    proved_env: list[str] = field(default_factory=list)      # launch.proved_env: the names a later verb proves
    routing: Routing = field(init=False)
    stage: Staging | None = None         # tiers B/C, else None
    mounts: list[tuple[str, str, bool]] = field(default_factory=list)   # the placeholder job's (tier A: instance paths)
    named: list[tuple[str, str]] = field(default_factory=list)   # spec_paths.named: paths the spec reads under /data
    warnings: list[str] = field(default_factory=list)
    run: RunSpec = field(init=False)     # the placeholder job's docker run
    script: str = ""                     # the placeholder job's launch script


def run_spec(req: SubmitRequest, plan: Plan, job_id: str, mounts: Sequence[tuple[str, str, bool]],
             env_file: str | None) -> RunSpec:
    """The ``docker run`` of ``job_id``: image, results dir, GPUs (with the GPU overrides), mounts."""
    gpu_plan, resumed = plan.gpu_plan, plan.resumed
    return RunSpec(job_id=job_id, image=plan.image, network_arch=req.network_arch, action=req.action,
                   results_dir=plan.routing.instance_dir(job_id), gpus=req.gpus, shm_size=req.shm_size,
                   env_file=env_file, mounts=tuple(mounts) + ((resumed.mount(job_id),) if resumed else ()),
                   overrides=(*gpu_plan.overrides, *req.overrides), share_gpus=req.share_gpus,
                   gpu_count_keys=gpu_plan.host_keys, shell_args=(resumed.override(),) if resumed else ())


def extra_checks(resumed: resume.ResumePlan | None, job_id: str, env_file: str | None, carrier_file: str | None,
                 named: list[tuple[str, str]], mounts: Sequence[tuple[str, str, bool]], carrier_image: str) -> str:
    """The launch script's lines after the inputs are in place: the resume checkpoint
    (``tao_brev.resume``), then every path the spec names under an input mount (``spec_paths``)."""
    return "\n".join(filter(None, [resume.checks(resumed, job_id, carrier_image, (env_file, carrier_file),
                                                  carrier_file),
                                    spec_paths.check_lines(named, spec_paths.host_paths(mounts))]))


def script(run: RunSpec, spec_text: str, checks: str) -> str:
    """The launch script: write and verify the spec, run ``checks``, then ``docker run`` (``remote.submit_script``)."""
    return remote.submit_script(run, spec_text, checks)


def placeholder_script(req: SubmitRequest, plan: Plan, env: Mapping[str, str]) -> tuple[RunSpec, str]:
    """The placeholder job's docker run and launch script (no credential file yet): the
    script the guards size and search for known values before a record opens."""
    resumed, job_id = plan.resumed, req.placeholder
    run = run_spec(req, plan, job_id, plan.mounts, None)
    extra = extra_checks(resumed, job_id, None, None, plan.named, plan.mounts, staging.carrier_image(env)
                         if resumed and resumed.source == "s3" else "")
    checks = [inputs_check(plan.mounts) if not plan.stage else "", extra]
    return run, script(run, plan.spec_text, "\n".join(filter(None, checks)))


def launch_parts(req: SubmitRequest, plan: Plan, job_id: str, env_file: str | None, carrier_file: str | None,
                 env: Mapping[str, str]) -> tuple[RunSpec, str]:
    """The launch's docker run and check lines for the minted ``job_id`` and the copied
    credential files (:func:`script` joins them into the launch script)."""
    stage = plan.stage
    mounts = stage.mounts(job_id) if stage else plan.mounts
    run = run_spec(req, plan, job_id, mounts, env_file)
    if stage:
        assert carrier_file is not None, "tiers B/C copied the carrier's credential file first"
        checks = stage.checks(job_id, plan.image, env_file, carrier_file)
    else:
        checks = inputs_check(mounts)
    checks = "\n".join(filter(None, [checks, extra_checks(plan.resumed, job_id, env_file, carrier_file, plan.named,
                                                          mounts, staging.carrier_image(env))]))
    return run, checks


def dry_run(req: SubmitRequest, plan: Plan) -> SubmitAnswer:
    """The answer of ``--dry-run``: every step a launch would take, its script redacted by the CLI."""
    stage, resumed = plan.stage, plan.resumed
    shown = plan.script
    if stage:
        stage.prepare(upload=False)
        job_file = "~/.tao-cred-<job_id>"
        carrier_file = job_file if stage.tier == StorageTier.C else job_file + "-s3"
        shown = script(plan.run, plan.spec_text, "\n".join(filter(None, [
            stage.checks(req.placeholder, plan.image, job_file, carrier_file),
            extra_checks(resumed, req.placeholder, job_file, carrier_file, plan.named, plan.mounts,
                         stage.carrier_image)])))
    answer: SubmitAnswer = {"ok": True, "dry_run": True, "job_id": None, "instance": req.instance, "state": None,
            "backend_ref": None, "image": plan.image, "results_dir": plan.routing.results_dir(req.placeholder),
            "plan": _dry_run_steps(req, plan, shown),
            "storage_tier": req.storage_tier, **(stage.answer() if stage else {}),
            "spec_check": plan.checked.to_json(), **({"resume_from": resumed.to_json()} if resumed else {}),
            "warnings": plan.warnings}
    return answer


def _dry_run_steps(req: SubmitRequest, plan: Plan, shown: str) -> list[SubmitAnswerPlanItem]:
    stage, resumed = plan.stage, plan.resumed
    steps: list[SubmitAnswerPlanItem] = [{"step": "open_record",
                                          "what": "scripts/tao_job_record.py open (mints the job id)"}]
    steps += stage.plan_steps(req.instance) if stage else []
    if resumed and resumed.source == "s3" and not stage:
        steps.append({"step": "copy_s3_credentials", "what": f"brev copy <0600 file with the AWS_* settings, "
                      f"read by the carrier that copies the checkpoint of {req.resume_from}> "
                      f"{req.instance}:.tao-cred-<job_id>-s3-<random>"})
    if resumed and resumed.source == "home":
        steps.append({"step": "copy_checkpoint", "what": f"brev copy <{resumed.chosen['path']} of "
                      f"{resumed.chosen['archive']}> {req.instance}:.tao-resume-<job_id>-<random>.pth"})
    if req.env_names:
        steps.append({"step": "copy_credentials", "what": f"brev copy <0600 file with {', '.join(req.env_names)}> "
                      f"{req.instance}:.tao-cred-<job_id>-<random>"})
    return steps + [{"step": "launch", "command": f"brev exec {req.instance} <script>", "script": shown,
                     "gpu_overrides": plan.gpu_plan.to_json()["overrides"],
                     "lines": remote.readable_lines(shown)},
                    {"step": "mark_running", "backend_ref": f"{req.instance}/<job_id>"}]
