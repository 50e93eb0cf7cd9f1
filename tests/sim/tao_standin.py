"""Stand-in for the TAO 7.3 PyTorch container entrypoint (``nvcr.io/nvidia/tao/tao-toolkit:*-pyt``).

Invoked as ``<network_arch> <action> -e <spec.yaml> [key=value ...]`` inside a simulated
container, it runs the layers the real image runs, each citing its source (tao-pytorch 7.0.1
``nvidia_tao_pytorch/...``, Hydra 1.3, nvidia-tao-core 7.3.0):

1. the network's entrypoint (``core/entrypoint.py`` launch): ``-e`` required and existing
   (``ERROR: ...``, exit 1), ``num_gpus`` / ``gpu_ids`` from the command line or the spec's
   ``<action>`` section (lines 162-204), ``Execution status: PASS`` / ``FAIL`` and exit 0 / 1
   (lines 361-366);
2. Hydra with the network's schema (``core/hydra/hydra_runner.py``): the spec merged with the
   real ``nvidia_tao_core.config.<arch>.default_config.ExperimentConfig`` (Hydra
   config_loader_impl.py ``_load_single_config``: "Error merging 'spec.yaml' with schema"), then the
   ``key=value`` overrides (``_apply_overrides_to_config``: "Could not override 'k'."); a word
   without ``=`` fails Hydra's override parser. Hydra's ``run_and_report`` prints a compact
   message for its own errors and a stripped traceback plus "Set the environment variable
   HYDRA_FULL_ERROR=1 for a complete stack trace." for the task's; exit 1;
3. ``core/decorators/workflow.py`` monitor_status: results dir ``<action>.results_dir`` or
   ``<results_dir>/<action>`` (``core/utilities.py:73-94``), ``experiment.yaml``, status.json with
   STARTED "Starting <Name> <action>.", RUNNING "<Action> finished successfully." at the end (no
   SUCCESS line is ever written), FAILURE lines for the exceptions it catches (then re-raised);
4. dual logging (``core/tlt_logging.py:76-175``): every INFO+ call of TAO's logger is also a
   status line, ERROR and above as ``"status": "FAILURE"`` while the job goes on;
5. the task functions in ``tao_lightning.py`` (train with resume, checkpoints and KPIs; evaluate).

status.json lines are written by nvidia-tao-core's own ``StatusLogger``
(``nvidia_tao_core/loggers/logging.py``) when the package is importable (the simulator's venv),
else by a writer of the same format (the real-Docker tier's image has Python and PyYAML only;
there the spec is not merged with a schema either).

A ``simulate:`` block in the spec (tests only; removed before the schema merge) steers the run:
``exit_code``, ``oom`` (the host's OOM killer: marker + SIGKILL -> 137/OOMKilled, no message),
``cuda_oom`` (``torch.OutOfMemoryError`` after the first epoch, exit 1; TAOExceptionCheckpoint saves
and links a checkpoint first), ``xid`` (NVRM Xid 79 line, exit 1), ``xid_after_epochs: [N]`` (the
same after the N-th epoch of the whole run only, counted from 1: a resumed run meets each once), ``epoch_seconds`` (default 0.05),
``nvml_lost`` (the container loses its GPUs mid-run after a host ``systemctl daemon-reload``,
nvidia-container-toolkit #48: NVML/CUDA "unknown error", exit 1), ``leak_env: [NAMES]`` (each value
leaked in every form, tests/sim/leaky_job.py), ``hang`` (run until killed, after the last epoch), ``hang_after_epoch: N`` (no output at all after N
epochs), ``diverge`` (rising losses), ``log_errors: {EPOCH: MESSAGE}`` (an ERROR-level log call in
that epoch: a FAILURE line, training goes on), ``evaluate_kpis: false`` (an evaluate that writes no
KPIs), ``write_env_hashes: [NAMES]`` (sha256 of each variable's value into ``env_seen.json``, never
the value), ``latest_link`` (``valid`` by default; ``dangling``: the link names a checkpoint that is
not there; ``none``: no link), ``checkpoint_names: epoch`` (older archs' ``model_epoch_EEE.pth``),
``disk_full_at_epoch: N`` (the checkpoint write of epoch N fails as PyTorch's writer reports ENOSPC),
``print_env: [NAMES]`` (each value printed as a careless job would: verbatim, URL-encoded with
lower-case escapes, JSON with ``\\/``, and base64 on stderr), ``long_lines`` (a 40 KiB line, then
tqdm's ``\\r`` progress as the last output).
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import importlib
import json
import logging
import os
import re
import sys
import time
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tao_lightning  # noqa: E402

try:
    from containers import ContainerContext
except ImportError:   # inside a real image (real-Docker tier): no simulator modules there
    ContainerContext = None

TAO_MODULE = "/usr/local/lib/python3.10/dist-packages/nvidia_tao_pytorch"

# The network arches of a TAO 7 PyTorch image: each is an executable on the image's PATH
# (tao-pytorch setup.py console_scripts, plus codetr's entrypoint package). Anything else is
# "not found" by the NGC entrypoint wrapper's `exec "$@"` (exit 127). tests/real_docker/setup.sh
# installs the same list (`python3 tao_standin.py --list-arches`).
TAO_ARCHES = ("action_recognition", "bevfusion", "centerpose", "classification_pyt", "clip", "codetr",
              "deformable_detr", "depth_net", "dino", "grounding_dino", "mae", "mal", "mask2former",
              "mask_grounding_dino", "ml_recog", "nvdinov2", "ocdnet", "ocrnet", "oneformer", "optical_inspection",
              "pointpillars", "pose_classification", "radio", "re_identification", "rtdetr", "segformer",
              "sparse4d", "stylegan_xl", "visual_changenet")
# monitor_status(name=...) of each network's scripts/train.py (e.g. cv/visual_changenet/scripts/train.py:96)
DISPLAY_NAMES = {"bevfusion": "Bevfusion", "clip": "CLIP", "classification_pyt": "Classification", "codetr": "CoDETR",
                 "dino": "DINO", "deformable_detr": "Deformable DETR", "depth_net": "Depth Net",
                 "grounding_dino": "Grounding DINO", "mae": "MAE", "mal": "MAL",
                 "mask_grounding_dino": "Mask Grounding DINO", "mask2former": "Mask2Former",
                 "ml_recog": "Metric Learning Recognition", "nvdinov2": "NVDINOv2", "ocdnet": "OCDNet",
                 "ocrnet": "OCRNet", "oneformer": "OneFormer", "optical_inspection": "Optical Inspection",
                 "pose_classification": "Pose Classification", "rtdetr": "RT-DETR",
                 "re_identification": "ReIdentification", "segformer": "SegFormer", "sparse4d": "Sparse4D",
                 "stylegan_xl": "StyleGAN-XL", "visual_changenet": "Visual ChangeNet"}
WRAPPER = "/opt/nvidia/nvidia_entrypoint.sh"
NGC_BANNER = """
==========
== TAO Toolkit PyTorch ==
==========

NVIDIA Release 7.3.0 (build 0000000)

Copyright (c) 2025, NVIDIA CORPORATION & AFFILIATES. All rights reserved.

This container image and its contents are governed by the NVIDIA Deep Learning Container License.
By pulling and using the container, you accept the terms and conditions of this license:
https://developer.nvidia.com/ngc/nvidia-deep-learning-container-license
"""
HYDRA_FULL_ERROR = "\nSet the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n"
# The console format of TAO's logger (core/tlt_logging.py:47, without the colours)
LOG_FORMAT = "%(asctime)s - [TAO Toolkit] - %(levelname)s - %(message)s (%(filename)s:%(lineno)d)"


class HydraError(Exception):
    """A Hydra CompactHydraException: run_and_report prints its text (and its OmegaConf cause)."""


# -- status.json ---------------------------------------------------------------------------------
class FileStatusLogger:
    """The format of TAO's StatusLogger (nvidia_tao_core/loggers/logging.py BaseLogger.write) for
    images without nvidia-tao-core: date M/D/YYYY, time H:M:S, status, verbosity, message, kpi."""

    def __init__(self, path: Path):
        self.path, self.kpi = path, {}
        path.touch()

    def write(self, data=None, status_level="RUNNING", verbosity_level="INFO", message=None):
        now = _dt.datetime.now()
        record = dict(data or {}, date=f"{now.month}/{now.day}/{now.year}",
                      time=f"{now.hour}:{now.minute}:{now.second}", status=status_level, verbosity=verbosity_level)
        if message:
            record["message"] = message
        if self.kpi:
            record["kpi"] = self.kpi
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")


class Status:
    """The job's status logger: nvidia-tao-core's StatusLogger (is_master=True, verbosity=1 and
    append=True as monitor_status creates it, workflow.py:45-51) or FileStatusLogger."""

    def __init__(self, path: Path):
        # Each write calls the control-plane callback (logging.py:15-28), whose import fails in a model
        # container: it lacks the TAO API server's stack. Here the first failure would import most of it
        # (requests, ...; 0.16 s CPU) before failing; marked absent, it fails at once, as it does there.
        sys.modules.setdefault("nvidia_tao_core.microservices", None)
        try:
            from nvidia_tao_core.loggers import logging as core_logging
        except ImportError:
            core_logging = None
        if core_logging is None:
            self.logger, self.levels = FileStatusLogger(path), None
            return
        # nvidia-tao-core's write also echoes each message on its console logger; the PyTorch
        # container's api_logging.BaseLogger.write does not (it only writes the file).
        logging.getLogger("TAO Toolkit").disabled = True
        self.logger = core_logging.StatusLogger(filename=str(path), is_master=True, verbosity=1, append=True)
        self.levels = core_logging

    @property
    def kpi(self) -> dict:
        return self.logger.kpi

    @kpi.setter
    def kpi(self, value: dict) -> None:
        self.logger.kpi = value

    def write(self, message: str, status: str = "RUNNING", verbosity: str = "INFO", data: dict | None = None,
              **fields):
        """One line; ``fields`` are more data fields (e.g. a loose top-level KPI)."""
        data = {**(data or {}), **fields} or None
        if self.levels is None:
            self.logger.write(data=data, status_level=status, verbosity_level=verbosity, message=message)
            return
        self.logger.write(data=data, status_level=getattr(self.levels.Status, status),
                          verbosity_level=getattr(self.levels.Verbosity, verbosity), message=message)


class StatusLoggerHandler(logging.Handler):
    """core/tlt_logging.py:76-141: each record of TAO's logger also becomes a status line, FAILURE
    for ERROR and above, RUNNING below; the message is the record's (no formatter is set)."""

    def __init__(self, status: Status):
        super().__init__(logging.INFO)   # enable_dual_logging: the handler's level is TAO_LOGGING_LEVEL (INFO)
        self.status = status

    def emit(self, record):
        self.status.write(record.getMessage(), status="FAILURE" if record.levelno >= logging.ERROR else "RUNNING",
                          verbosity=logging.getLevelName(record.levelno))


def tao_logger() -> logging.Logger:
    log = logging.getLogger("nvidia_tao_pytorch.standin")
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
    return log


# -- Hydra: the spec, the schema, the overrides ----------------------------------------------------
def schema_of(arch: str):
    """The network's ExperimentConfig in nvidia-tao-core 7.3.0 (None when the package or the
    network's module is not there)."""
    try:
        module = importlib.import_module(f"nvidia_tao_core.config.{arch}.default_config")
    except ImportError:
        return None
    return getattr(module, "ExperimentConfig", None)


def parse_value(raw: str):
    import yaml

    try:
        return yaml.safe_load(raw) if raw != "" else ""
    except yaml.YAMLError:
        return raw


def compose(arch: str, spec_name: str, spec: dict, overrides: list[str]) -> dict:
    """The task's config as a plain dict: spec merged with the schema, then the overrides.
    Raises HydraError with Hydra's text."""
    for word in overrides:   # hydra/core/override_parser: an override is key=value
        if "=" not in word:
            raise HydraError(f"Error parsing override '{word}'\nmissing EQUAL at '<EOF>'\n"
                             "See https://hydra.cc/docs/1.2/advanced/override_grammar/basic for details")
    schema = schema_of(arch)
    try:
        from omegaconf import OmegaConf
        from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException
    except ImportError:
        schema = None
    if schema is None:   # no schema to merge with: the spec and the overrides as they are
        for word in overrides:
            key, raw = word.split("=", 1)
            node = spec
            for part in key.split(".")[:-1]:
                if not isinstance(node.get(part), dict):
                    node[part] = {}
                node = node[part]
            node[key.split(".")[-1]] = parse_value(raw)
        return spec
    try:   # config_loader_impl.py _load_single_config
        cfg = OmegaConf.merge(OmegaConf.structured(schema), OmegaConf.create(spec))
    except OmegaConfBaseException as exc:
        raise HydraError(f"Error merging '{spec_name}' with schema\n{exc}") from None
    OmegaConf.set_struct(cfg, True)
    for word in overrides:   # config_loader_impl.py _apply_overrides_to_config
        key, raw = word.split("=", 1)
        try:
            try:
                OmegaConf.update(cfg, key, parse_value(raw), merge=True)
            except (ConfigAttributeError, ConfigKeyError) as exc:
                raise HydraError(f"Could not override '{key}'.\nTo append to your config use +{word}\n{exc}") \
                    from None
        except OmegaConfBaseException as exc:
            raise HydraError(f"Error merging override {word}\n{exc}") from None
    return OmegaConf.to_container(cfg, resolve=False)


def experiment_yaml(cfg: dict) -> str:
    import yaml

    return yaml.safe_dump(cfg, sort_keys=False)


def save_experiment(cfg: dict, out_dir: Path) -> None:
    """monitor_status saves the composed config as ``experiment.yaml`` (workflow.py:42)."""
    (out_dir / "experiment.yaml").write_text(experiment_yaml(cfg))


# -- entrypoint -------------------------------------------------------------------------------------
def gpu_request(action: str, spec: dict, overrides: list[str], log: logging.Logger) -> list[int]:
    """core/entrypoint.py:162-204: num_gpus / gpu_ids from the command line, else from the spec's
    ``<action>`` section; a disagreement warns and takes the larger."""
    num_gpus, gpu_ids = 1, [0]
    if action not in ("train", "evaluate", "inference", "distill"):
        return gpu_ids
    args = " " + " ".join(overrides)
    if "num_gpus" in args or "gpu_ids" in args:
        if "num_gpus=" in args:
            num_gpus = int(args.split("num_gpus=")[1].split()[0])
        if "gpu_ids=" in args:
            gpu_ids = list(parse_value(args.split("gpu_ids=")[1].split()[0]))
    else:
        section = spec.get("train" if action == "distill" else action)
        if isinstance(section, dict):
            num_gpus = int(section.get("num_gpus", num_gpus))
            gpu_ids = list(section.get("gpu_ids", gpu_ids))
    if num_gpus != len(gpu_ids):
        log.warning(f"Number of gpus {num_gpus} != len({gpu_ids}).")
        num_gpus = max(num_gpus, len(gpu_ids))
        gpu_ids = list(range(num_gpus)) if len(gpu_ids) != num_gpus else gpu_ids
        log.info(f"Using GPUs {gpu_ids} (total {num_gpus})")
    return gpu_ids


def dataset_paths(node) -> list[str]:
    """Every absolute path under the spec's ``dataset`` section (TAO's data modules read them at start)."""
    if isinstance(node, dict):
        return [p for value in node.values() for p in dataset_paths(value)]
    if isinstance(node, list):
        return [p for value in node for p in dataset_paths(value)]
    if isinstance(node, str) and node.startswith("/"):
        return [node]
    return []


def exc_line(exc: BaseException) -> str:
    kind = type(exc)
    module = "" if kind.__module__ == "builtins" else f"{kind.__module__}."
    return f"{module}{kind.__name__}: {exc}" if str(exc) else f"{module}{kind.__name__}"


def task_traceback(arch: str, action: str, overrides: list[str], exc: BaseException) -> None:
    """Hydra: JobReturn.return_value's "Error executing job with overrides" and run_and_report's
    traceback with the Hydra frames stripped."""
    sys.stderr.write(
        f"Error executing job with overrides: {overrides!r}\n"
        "Traceback (most recent call last):\n"
        f'  File "{TAO_MODULE}/core/decorators/workflow.py", line 58, in _func\n'
        "    runner(cfg, **kwargs)\n"
        f'  File "{TAO_MODULE}/cv/{arch}/scripts/{action}.py", line 101, in main\n'
        "    run_experiment(experiment_config=cfg,\n"
        f"{exc_line(exc)}\n{HYDRA_FULL_ERROR}")
    sys.stderr.flush()


# monitor_status's except clauses (workflow.py:68-109): the FAILURE line's prefix for each kind
CAUGHT = (("MissingMandatoryValue", "Configuration error"), ("NotImplementedError", "Feature not implemented"),
          ("ValueError", "Parameter validation error"), ("TypeError", "Parameter validation error"),
          ("FileNotFoundError", "File system error"), ("PermissionError", "File system error"),
          ("OSError", "File system error"))


def monitor_status(job: tao_lightning.Job, name: str) -> None:
    """core/decorators/workflow.py:32-112 around the task function."""
    job.status.write(f"Starting {name} {job.action}.", status="STARTED")
    try:
        job.log.info("Experiment configuration:\n" + experiment_yaml(job.cfg))   # tlt_logging.py:178-190 obfuscate_logs
        for path in dataset_paths(job.cfg.get("dataset", {})):
            if not job.ctx.host_path(path, job.cwd).exists():
                raise FileNotFoundError(f"[Errno 2] No such file or directory: '{path}'")
        tao_lightning.run(job)
    except Exception as exc:
        kinds = [k.__name__ for k in type(exc).__mro__]
        prefix = next((p for kind, p in CAUGHT if kind in kinds), None)
        if prefix:
            job.status.write(f"{prefix}: {exc}", status="FAILURE")
        raise
    job.status.write(f"{job.action.capitalize()} finished successfully.")


def launch(ctx, arch: str, action: str, rest: list[str]) -> int:
    """core/entrypoint.py launch for one network; returns the container's exit code."""
    log = tao_logger()
    cwd = (ctx.config.get("Config") or {}).get("WorkingDir") or "/"
    spec_path, overrides = None, []
    i = 0
    while i < len(rest):   # the entrypoint's parser: -e; everything else goes to Hydra (parse_known_args)
        if rest[i] in ("-e", "--experiment_spec_file", "--experiment_spec"):
            spec_path = rest[i + 1] if i + 1 < len(rest) else None
            i += 2
        else:
            overrides.append(rest[i])
            i += 1
    if spec_path is None:   # entrypoint.py:118-126
        print(f"ERROR: The subtask `{action}` requires the following argument: -e/--experiment_spec_file", flush=True)
        return 1
    host_spec = ctx.host_path(spec_path, cwd)
    if not host_spec.is_file():   # entrypoint.py:129-135
        print(f"ERROR: The indicated experiment spec file `{spec_path}` doesn't exist!", flush=True)
        return 1
    import yaml

    spec = yaml.safe_load(host_spec.read_text()) or {}
    sim = spec.pop("simulate", None) or {}
    gpu_ids = gpu_request(action, spec, overrides, log)
    os.environ["TAO_VISIBLE_DEVICES"] = str(gpu_ids)[1:-1]   # entrypoint.py:250
    code = run_script(ctx, cwd, arch, action, os.path.basename(spec_path), spec, sim, overrides, gpu_ids, log)
    if code:
        log.warning("Execution status: FAIL")   # entrypoint.py:361-363
        return code
    log.info("Execution status: PASS")
    return 0


def run_script(ctx, cwd, arch, action, spec_name, spec, sim, overrides, gpu_ids, log) -> int:
    """``python <network>/scripts/<action>.py --config-name spec.yaml overrides``: Hydra, then the task."""
    try:
        cfg = compose(arch, spec_name, spec, overrides)
    except HydraError as exc:   # run_and_report: a CompactHydraException's text, exit 1
        sys.stderr.write(f"{exc}\n")
        return 1
    if not ctx.gpus():
        task_traceback(arch, action, overrides, RuntimeError("No CUDA GPUs are available"))
        return 1
    section = cfg.get(action) if isinstance(cfg.get(action), dict) else {}
    top = cfg.get("results_dir")
    own_loop = (arch, action) == ("pointpillars", "train")   # its train.py writes into results_dir itself
    if own_loop and top:
        results_dir = str(top)
    elif section.get("results_dir"):   # core/utilities.py:73-94 update_results_dir
        results_dir = str(section["results_dir"])
    elif top and top != "???":
        results_dir = os.path.join(str(top), action)
    else:
        task_traceback(arch, action, overrides, ValueError(
            "You need to set at least one of following fields: results_dir, {mode}.results_dir"))
        return 1
    if not own_loop:
        print(f"{action.capitalize()} results will be saved at: {results_dir}", flush=True)
    if not ctx.writable(results_dir):
        task_traceback(arch, action, overrides, OSError(f"[Errno 30] Read-only file system: '{results_dir}'"))
        return 1
    out_dir = ctx.host_path(results_dir, cwd)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not own_loop:
        save_experiment(cfg, out_dir)
    status = Status(out_dir / "status.json")
    handler = StatusLoggerHandler(status)
    log.addHandler(handler)   # set_status_logger -> enable_dual_logging (the script's process only)
    side_effects(ctx, cwd, cfg, sim, status)
    job = tao_lightning.Job(arch, action, cfg, results_dir, out_dir, ctx, cwd, sim, status, log, gpu_ids)
    try:
        if own_loop:
            tao_lightning.pointpillars_train(job)
        else:
            monitor_status(job, DISPLAY_NAMES.get(arch, arch))
    except Exception as exc:   # noqa: BLE001 - Hydra reports whatever the task raised
        task_traceback(arch, action, overrides, exc)
        return 1
    finally:
        log.removeHandler(handler)   # the entrypoint's own process writes no status lines
    return finish(sim, action)


def side_effects(ctx, cwd: str, cfg: dict, sim: dict, status: Status) -> None:
    """The knobs that expose the container's environment (secrets tests), before the first epoch."""
    if sim.get("write_env_hashes"):
        seen = {name: (hashlib.sha256(os.environ[name].encode()).hexdigest() if name in os.environ else None)
                for name in sim["write_env_hashes"]}
        top = str(cfg.get("results_dir") or "/results")
        ctx.host_path(top, cwd).joinpath("env_seen.json").write_text(json.dumps(seen, indent=1))
    if sim.get("leak_env"):   # a job leaking its credentials the ways red teams found (tests/sim/leaky_job.py)
        from leaky_job import leak

        leak(list(sim["leak_env"]), os.environ, status)


def print_env(sim: dict) -> None:
    """A job that logs a credential, as jobs do, in several encodings (at the end of its log)."""
    for name in sim.get("print_env") or []:
        value = os.environ.get(name, "")
        print(f"{name}={value}", flush=True)
        lower = re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), quote(value, safe=""))
        print(f"url: https://files.example/get?key={lower}", flush=True)
        print(json.dumps({"config": {name.lower(): value}}).replace("/", "\\/"), flush=True)
        print(f"auth: {base64.b64encode(value.encode()).decode()}", file=sys.stderr, flush=True)


def finish(sim: dict, action: str) -> int:
    """After the task: the ``print_env``, ``hang``, ``exit_code`` and ``long_lines`` knobs."""
    print_env(sim)
    while sim.get("hang"):
        time.sleep(1)
    code = int(sim.get("exit_code", 0))
    if code:
        return code
    long = sim.get("long_lines")
    if long:   # a 40 KiB line (a credential where a 2 KiB cut of its end falls), then tqdm's \r progress last
        value = os.environ.get(long.get("env", ""), "")
        tail = int(long.get("cut_at", 2048)) - (len(value) - len(value) // 2)
        print("A" * (int(long.get("line_bytes", 40960)) - tail - len(value)) + value + "B" * tail, flush=True)
        total, step = 0, 0
        while total < int(long.get("progress_bytes", 8 * 1024 * 1024)):   # one line: no newline until the end
            chunk = f"\rEpoch 1: {step % 100:3d}%|{'#' * (step % 40):<40}| {step}/1000000 [00:01<00:02, 9.9it/s]"
            sys.stdout.write(chunk)
            total, step = total + len(chunk), step + 1
        sys.stdout.flush()   # no newline: the job ends on its last progress state
    return 0


class RealContainer:
    """The context inside a real Docker container (the real-Docker test tier's
    image): container paths are real paths; the GPUs are what the NVIDIA
    ``--gpus`` driver granted (it sets NVIDIA_VISIBLE_DEVICES, moby
    daemon/nvidia_linux.go); an OOM kill is the kernel's, not simulated."""

    config: dict = {"Config": {"WorkingDir": os.getcwd()}}
    oom_marker = Path("/dev/null")

    @staticmethod
    def current():
        return RealContainer() if os.environ.get("TAO_RD_IMAGE") else None   # ENV of the tier's images

    @staticmethod
    def host_path(cpath: str, cwd: str = "/") -> Path:
        return Path(cwd, cpath)

    @staticmethod
    def writable(cpath: str) -> bool:
        path = Path(cpath)
        while not path.exists():
            path = path.parent
        return os.access(path, os.W_OK)

    @staticmethod
    def gpus() -> list[str]:
        visible = os.environ.get("NVIDIA_VISIBLE_DEVICES", "")
        if visible in ("", "void", "none"):
            return []
        # "all": the real-Docker tier's one GPU (tests/real_docker/nvidia-smi lists GPU 0 only)
        return ["NVIDIA A100-SXM4-80GB"] * (1 if visible == "all" else len(visible.split(",")))


def main(argv: list[str]) -> int:
    if argv == ["--list-arches"]:
        print(" ".join(TAO_ARCHES))
        return 0
    ctx = ContainerContext.current() if ContainerContext is not None else None
    if ctx is not None and argv:
        # the simulated image's NGC entrypoint wrapper (the real image has the script):
        # the banner on stdout, then `exec "$@"` - an unknown command ends the container 127
        print(NGC_BANNER, flush=True)
        if argv[0] not in TAO_ARCHES:
            print(f"{WRAPPER}: line 31: exec: {argv[0]}: not found", file=sys.stderr, flush=True)
            return 127
    ctx = ctx or RealContainer.current()
    if ctx is None:
        print("tao_standin: not running inside a simulated container", file=sys.stderr)
        return 2
    if len(argv) < 2 or argv[0].startswith("-"):
        print("usage: <network_arch> <action> -e <experiment_spec> [key=value ...]", file=sys.stderr)
        return 2
    return launch(ctx, argv[0], argv[1], argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
