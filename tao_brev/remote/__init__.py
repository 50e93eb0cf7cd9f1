"""Remote shell commands, built and quoted in one place (the remote layer).

Every string that reaches the instance's shell is assembled in this package from validated
names and :func:`shlex.quote`-d values, so an injection attempt in an instance name, network
arch, action, path, env name or extra argument is rejected or quoted, never executed. Scripts
are POSIX sh (the remote user's login shell parses them, see ``references/brev-exec.md``).
Each module keeps a command next to the reader of its answer:

- ``quoting``: names, instance paths (``~/x`` -> ``"$HOME"/'x'``), sections and their parser;
- ``files``: a file written verbatim (heredoc) and its check; a script as readable lines;
- ``containers``: one container's state, logs, removal, results; the job containers of an instance;
- ``launch``: ``docker run`` (:class:`RunSpec`), the submit script, the GPU guard, the launch lock;
- ``images``: an image present, pulled, in its registry; the GPU smoke run and its reader;
- ``progress``: TAO's ``status.json`` and every job container, in one round trip.

Callers import the package (``from tao_brev import remote``); it hands on every public name.
"""

from __future__ import annotations

from .quoting import (NAME_RE, ENV_NAME_RE, GPUS_RE, SHM_RE, JOBS_ROOT, RESULTS_ROOT, CONTAINER_JOB_DIR,
                      CONTAINER_RESULTS_DIR, CONTAINER_DATA_DIR, check_name, check_env_name, rpath, join,
                      job_dir, Section, section, new_token, parse_sections)  # noqa: F401
from .files import (WRITE_FAILED_EXIT, heredoc_file, READABLE_WIDTH, readable_lines, verify_file)  # noqa: F401
from .containers import (inspect_state, logs_tail, logs_if_exited, remove_container, own_results,
                         archive_results, LIVE_CONTAINER_STATES,
                         list_job_containers, live_job_containers, instance_now, last_log_line)  # noqa: F401
from .launch import (GPUS_BUSY_EXIT, GPU_COUNT, gpus_flag, RunSpec, NO_GPUS_EXIT, check_gpu_key, count_gpus,
                     DOCKER_MISSING, submit_script, GPUS_LABEL, gpus_free, ABANDONED, LAUNCH_LOCK_WAIT_S,
                     launch_lock, abandon_launch, reconcile_launch, discard_job_credentials)  # noqa: F401
from .progress import (STATUS_FILE, MAX_STATUS_LINE, PROGRESS_LINES, PROGRESS_BYTES, METRICS_BYTES,
                       TAIL_LINES, TAIL_BYTES, progress_functions, read_progress, read_all_jobs)  # noqa: F401
from .images import (image_size, manifest_inspect, pull_image, gpu_smoke, lists_gpu)  # noqa: F401
