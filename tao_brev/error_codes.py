"""The error table: every code the bundle reports, its exit code, what it means and the default fix
(``errors.TaoBrevError`` raises them; ``references/error-codes.md`` is generated from it)."""

from __future__ import annotations

from collections import namedtuple

# A named tuple, not a dataclass: every script imports this module at start (--help too).
Code = namedtuple("Code", ["exit_code", "meaning", "fix"])
Code.__doc__ = "One error code: its exit code, what it means and the default fix."


# Stable names: add, never rename. Grouped by exit code.
CODES: dict[str, Code] = {
    # -- 2: bad input -------------------------------------------------------
    "BAD_ARGUMENT": Code(2, "A flag or argument is missing or malformed.",
                         "Run the script with --help and correct the call."),
    "BAD_JOB_ID": Code(2, "The job id is not of the form ^[A-Za-z0-9][A-Za-z0-9._-]*$.",
                       "Pass the id printed by submit.py (job_id), e.g. visual_changenet-train-1a2b3c."),
    "UNKNOWN_JOB": Code(2, "No job record exists for this id.",
                        "List the known jobs with scripts/tao_job_record.py list."),
    "CORRUPT_RECORD": Code(2, "A job record or sidecar file is not valid JSON, misses required fields, or (a "
                              "record) has a field of the wrong type or one its schema does not have.",
                           "A damaged job record is moved, bytes intact, to jobs/quarantine/ (named in the message) "
                           "and blocks no other job; teardown.py JOB_ID removes the job's container and closes it. "
                           "A damaged sidecar: restore the file named in the message (it is JSON) from a backup. "
                           "The job may still run: check its instance (brev exec NAME \"docker ps -a --filter "
                           "label=tao-job\") before submitting again."),
    "BAD_NAME": Code(2, "A name that reaches the remote shell holds characters outside [A-Za-z0-9._-].",
                     "Use only letters, digits, '.', '_' and '-' (instance, network arch, action, env names)."),
    "SPEC_NOT_FOUND": Code(2, "The spec file does not exist or cannot be read.",
                           "Pass --spec with the path of an existing TAO spec YAML on this machine."),
    "BAD_SPEC": Code(2, "The spec file is not valid YAML, or the spec or an override does not merge with TAO's "
                        "schema of the image's version (nvidia-tao-core): an unknown key, a value of the wrong "
                        "type, an override without '='. The answer's findings name file:line:column (or the "
                        "override), the key path and the closest valid key, never a value; nothing was sent.",
                     "Fix the spec (or the override) where the finding says, then run the same command; for a "
                     "custom image with its own schema add --no-spec-check."),
    "UNKNOWN_VERSIONS_KEY": Code(2, "The image is neither an image URI nor a key of versions.yaml.",
                                 "Use a full image URI, or one of the image keys the answer lists: those of the versions.yaml "
                                 "actually read (the message names it: $TAO_SKILL_BANK_PATH's when set, else the bundle's own)."),
    "VERSIONS_FILE": Code(2, "versions.yaml is missing or unreadable.",
                          "Point TAO_SKILL_BANK_PATH at a TAO skill bank (or unset it to use this bundle's own)."),
    "BAD_STATE_DIR": Code(2, "TAO_STATE_DIR is set but empty, relative, or not a directory.",
                          "Unset TAO_STATE_DIR or set it to an absolute directory path."),
    "UNSAFE_STATE_PATH": Code(2, "A file or directory inside TAO_STATE_DIR is a symbolic link, not a regular "
                                 "file or directory, or a key file this bundle did not write: nothing is read, "
                                 "written or chmod-ed through it.",
                              "Move the path the message names away (look at what it pointed to), then run the same "
                              "command again."),
    "VALUE_TOO_LONG": Code(2, "An --env value, the argument list or a file the bundle reads exceeds its size cap "
                              "(an --env value: 64 KiB; all arguments: 1 MiB).",
                           "Pass large data as a file (an input, --inputs) and a credential of ordinary length; "
                           "split a long override list into the spec."),
    "SECRET_IN_COMMAND": Code(2, "A spec, override or command the bundle was about to send holds a credential: "
                              "the value of a secret this process knows, or a literal the lint recognises.",
                              "Pass credentials only as environment variable names (--env NAME), never as values."),
    "SECRET_IN_IDENTIFIER": Code(2, "A name the bundle stores (instance, network arch, action, results root, "
                                 "bucket, input name) contains the value of a known secret.",
                                 "Choose names that are not (and do not contain) a credential's value; if the "
                                 "variable the error names holds no credential, unset it (`unset VAR`)."),
    "SECRET_TOO_SHORT": Code(2, "An --env value or one of the bundle's credentials is shorter than the minimum "
                             "length the redactor searches for (8 characters).",
                             "Use a credential of at least 8 characters, or unset the variable."),
    "BUNDLE_CREDENTIAL_ENV": Code(2, "--env names one of the bundle's own credentials (BREV_API_TOKEN, NGC_KEY, "
                                  "NGC_API_KEY), which never reach a container by default.",
                                  "Drop that --env; if the container really needs it, add "
                                  "--allow-bundle-credential-env (docker inspect on the instance then shows it)."),
    "TERMINAL_STATE": Code(2, "The job already ended; its terminal state cannot change.",
                           "Submit a new job (with --retry-of JOB_ID to link it) instead of changing this one."),
    "MISSING_CREDENTIAL": Code(2, "A credential the step needs is not set in the environment.",
                               "Export the named variable in the environment that runs the script (never on the command line)."),
    "RESUME_NOT_POSSIBLE": Code(2, "submit.py --resume-from names a job this submit cannot continue: not a train job "
                                   "of the same network, not ended yet, a spec or override that sets "
                                   "train.resume_training_checkpoint_path itself, or results out of reach (on "
                                   "another instance only, not verified in S3, or deleted with their instance).",
                                "Follow the message's fix: poll or tear the job down first, resume on the instance "
                                "that holds its results, or upload them (poll_status.py JOB_ID) - nothing was recorded."),
    "SPEC_INPUT_UNKNOWN": Code(2, "A spec key (or override) names a path under /data/NAME, but no input is mounted "
                                  "at /data/NAME; nothing was recorded.",
                               "Add the input (--inputs SRC=NAME) or correct the key's path; --no-spec-check skips "
                               "the check."),
    # -- 1: the verb ran, the answer is a failure --------------------------
    "GPU_IDS_UNKNOWN": Code(1, "--gpus names a GPU id the instance does not have (nvidia-container-cli: unknown device).",
                            "Use --gpus all, or ids from 0 to count-1 (preflight.py reports the GPU count)."),
    "SPEC_PATH_MISSING": Code(1, "A path the spec names under an input mount (/data/NAME/...) is not in the staged "
                                 "inputs on the instance (checked in the launch round trip); nothing was launched.",
                              "Correct the spec key the message names or stage the missing files, then submit "
                              "again; --no-spec-check skips the check."),
    "RESUME_CHECKPOINT_MISSING": Code(1, "submit.py --resume-from found no usable checkpoint of that job (no "
                                         "*_latest.pth target nor model_epoch_*.pth in its results dir on the "
                                         "instance, or the copy from S3 did not match its verified sha256); nothing "
                                         "was launched.",
                                      "Look at that job's results (poll_status.py JOB_ID); train from the start "
                                      "without --resume-from."),
    "INPUT_NOT_FOUND": Code(1, "A tier A input path does not exist on the instance; nothing was launched.",
                            "Copy the data there first (brev copy DIR NAME:DIR), and quote ~ in --inputs "
                            "('~/data=NAME') so your local shell does not expand it."),
    "MULTI_NODE_UNSUPPORTED": Code(2, "The spec or an override asks for more than one node; Brev runs one instance "
                                      "per job and has no multi-node launcher.",
                                   "Set num_nodes to 1 and use the GPUs of one instance (up to 8: --gpus all, "
                                   "num_gpus=N)."),
    "GPUS_BUSY": Code(1, "A live tao-job container on the instance holds GPUs this submit asks for; nothing was launched "
                         "(busy_job names it, busy_eta_s its time left by its last poll's ETA, null when none).",
                      "Wait for that job (poll_status.py JOB_ID --wait --timeout S) or cancel it (teardown.py JOB_ID), then submit "
                      "again; or pass --share-gpus to share them on purpose, or --gpus with free GPU ids."),
    "SPEC_NOT_WRITTEN": Code(1, "The spec did not reach the instance intact (its write failed, or its size or sha256 "
                                "there differ from the local file); nothing was launched.",
                             "Check the instance's disk (brev exec NAME 'df -h ~' </dev/null), free space, then submit "
                             "again with --retry-of JOB_ID."),
    "SUBMIT_REFUSED": Code(1, "The launch was refused on the instance (docker run failed).",
                           "Read the message (docker's own words); fix the image, flags or instance, then resubmit."),
    "JOB_FAILED": Code(1, "The job ended in ERROR.",
                       "Read the logs (poll_status.py JOB_ID --logs 200); see references/failure-classes.md."),
    "JOB_CANCELED": Code(1, "The job ended CANCELED.",
                         "Resubmit if the cancel was not intended."),
    "WAIT_TIMEOUT": Code(1, "--wait reached --timeout before the job ended and its last poll could not read the job "
                            "(the instance did not answer). A wait that runs out on a job it reads is no failure: "
                            "ok: true, waited_out: true, exit 0.",
                         "Wait again (poll_status.py JOB_ID --wait --timeout S, S below your tool-call limit); the "
                         "job keeps running."),
    "RECOVERY_LIMIT": Code(1, "poll_status.py --wait --recover N: the job ended by an infrastructure failure again "
                              "and all N recovery attempts are used; the chain stops (attempts lists each one).",
                           "Read the causes in attempts; if the instance is at fault use another one: rerun with a "
                           "higher --recover N and --fallback-instance NAME (it continues the same chain)."),
    "RECOVERY_BUDGET_EXHAUSTED": Code(1, "poll_status.py --wait --recover N --budget-s S: the chain of attempts has "
                                         "billed S seconds; the running attempt was stopped (results kept), nothing "
                                         "more is resubmitted.",
                                      "Rerun with a larger --budget-s to continue the same chain from its last "
                                      "checkpoint, or keep the results as they are."),
    "RECOVERY_NOT_POSSIBLE": Code(1, "poll_status.py --wait --recover N: the job ended by an infrastructure failure "
                                     "but no next attempt could start (the instance gone or unhealthy and no usable "
                                     "fallback, the checkpoints out of reach, the resubmit refused).",
                                  "Act on the message (it names the cause and the refusal), e.g. pass "
                                  "--fallback-instance NAME, then rerun the same command: it continues the chain."),
    "JOB_STALLED": Code(1, "--wait stopped: the job is RUNNING but wrote no status line and no log output for "
                           "longer than the stall threshold (a heuristic: it may still be alive).",
                        "Read stall.advice and poll_status.py JOB_ID --logs 50; teardown.py JOB_ID stops the billing; "
                        "to tear a stalled job down automatically: poll_status.py JOB_ID --wait --teardown "
                        "--stall-after SECONDS --timeout S."),
    "REMOTE_COMMAND_FAILED": Code(1, "A command on the instance exited non-zero.",
                                  "Read the message (the remote stderr, redacted) and fix the instance."),
    "PREFLIGHT_FAILED": Code(1, "At least one required preflight check failed.",
                             "Apply the fix of every check with ok=false, then run preflight.py again."),
    "INSTANCE_NOT_RUNNING": Code(1, "The instance exists but is not RUNNING.",
                                 "Start it with the official Brev skill (brev start NAME) or pass --start to preflight.py "
                                 "or submit.py (billing resumes)."),
    "UNKNOWN_INSTANCE": Code(1, "brev ls --json does not list this instance.",
                             "Check the name with `brev ls`; provision it with the official Brev agent skill."),
    "IMAGE_NOT_PULLED": Code(1, "The image is not on the instance; submit does not pull inside the GPU run.",
                             "Run preflight.py --instance NAME --image IMAGE --pull first (a pull is billed idle time otherwise)."),
    "DOCKER_DAEMON_DOWN": Code(1, "The Docker daemon on the instance does not answer.",
                               "On the instance: sudo systemctl restart docker (brev exec NAME \"sudo systemctl restart docker\"), then retry."),
    "NVIDIA_RUNTIME_MISSING": Code(1, "Docker on the instance cannot give containers a GPU "
                                      "(could not select device driver \"\" with capabilities: [[gpu]]).",
                                   "Install/configure the NVIDIA Container Toolkit on the instance "
                                   "(sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker), "
                                   "or use a Brev GPU instance image that ships it."),
    "SHM_EXHAUSTED": Code(1, "The job's shared memory ran out (/dev/shm, docker --shm-size): torch DataLoader workers "
                             "died of a bus error or could not write their shared-memory files; not the instance disk.",
                          "Resubmit with a larger --shm-size (twice the job's, e.g. 32g for the default 16g) or fewer "
                          "num_workers, with --resume-from JOB_ID; the same settings fail again, so it is not recovered."),
    "GPU_UNHEALTHY": Code(1, "The GPU is in a failed state (an Xid such as 79 'fallen off the bus', NVML 'GPU is lost' / "
                             "'Unknown Error', a driver/library version mismatch): the NVIDIA runtime refuses new containers.",
                          "Reset the GPU: brev stop NAME, then brev start NAME, if its type can stop (else brev answers "
                          "`does not support stop`: replace it, brev delete NAME, it bills until deleted) or use another "
                          "instance, then submit again with --retry-of JOB_ID; reinstalling the toolkit does not help."),
    "IMAGE_PULL_UNAUTHORIZED": Code(1, "The registry refused the image pull (unauthorized / denied).",
                                    "Export NGC_KEY and run preflight.py --image IMAGE (it logs in safely and tells "
                                    "NOT_AUTHENTICATED from NOT_ENTITLED)."),
    "REGISTRY_UNREACHABLE": Code(1, "The instance cannot reach the image registry (dial tcp: lookup HOST ... no such host, "
                                    "connection refused, i/o timeout); nothing was pulled.",
                                 "Check the instance's DNS and network: brev exec NAME \"getent hosts nvcr.io || cat "
                                 "/etc/resolv.conf\" </dev/null; fix its resolver or proxy (or wait for the outage to "
                                 "end), then rerun preflight.py."),
    "DOCKER_NOT_ON_PATH": Code(1, "docker is installed on the instance but not on the PATH of non-interactive ssh "
                                  "shells (brev exec runs `ssh HOST 'command'`, which reads no login profile).",
                               "Link it where non-interactive shells look: brev exec NAME \"sudo ln -s DOCKER_PATH "
                               "/usr/local/bin/docker\" </dev/null (preflight.py names DOCKER_PATH), or export its "
                               "directory in PATH at the top of ~/.bashrc (before its non-interactive return); then "
                               "rerun preflight.py."),
    "IMAGE_NOT_FOUND": Code(1, "The registry has no such image or tag.",
                            "Check the image URI / versions key; list tags with `ngc registry image info`."),
    "DISK_FULL": Code(1, "The instance ran out of disk space (no space left on device).",
                      "Free space (docker image prune -a, old results) or use an instance with a larger disk."),
    "DOCKER_NOT_FOUND": Code(1, "docker is not installed on the instance (command not found).",
                             "Use a Brev GPU instance whose machine image ships Docker and the NVIDIA Container "
                             "Toolkit (the default Brev GPU images do), or install both on the instance."),
    "GPU_ACCESS_LOST": Code(1, "A container lost its GPUs while the host's GPUs are fine (`Failed to initialize "
                               "NVML: Unknown Error`, `RuntimeError: CUDA error: unknown error`): a `systemctl "
                               "daemon-reload` on the host cuts running containers off their GPU devices "
                               "(nvidia-container-toolkit issue #48). Not the spec's fault.",
                            "A new container gets the GPUs again: rerun the step (preflight.py --instance NAME "
                            "--gpu-smoke), or for a job resubmit with --resume-from JOB_ID (checkpoints in the "
                            "results dir survive). If it repeats, the host reloads systemd while jobs run: replace "
                            "the instance with the official Brev agent skill."),
    "GPU_DRIVER_NOT_LOADED": Code(1, "The instance's NVIDIA kernel driver is not loaded (`nvml error: driver not "
                                     "loaded`; nvidia-smi: couldn't communicate with the NVIDIA driver), e.g. a "
                                     "kernel upgraded without its driver. The container toolkit is not the cause.",
                                  "Reboot the instance's host so the driver loads again (brev exec NAME --host "
                                  "\"sudo reboot\" </dev/null, after preflight.py --login), then rerun "
                                  "preflight.py --instance NAME --gpu-smoke; if nvidia-smi still fails, replace the "
                                  "instance with the official Brev agent skill (a CPU instance has no NVIDIA "
                                  "driver: TAO training needs a GPU instance)."),
    "INSTANCE_STOPPED": Code(1, "The job's instance is STOPPED: nothing runs on it, its disk (results, checkpoints) "
                                "is kept. A read-only verb never starts it (brev exec would: "
                                "brev-cli pkg/cmd/util/ssh.go StartWorkspaceIfStopped).",
                             "Read it once started: the same command with --start (billing resumes), e.g. "
                             "poll_status.py JOB_ID --start; its files are safe while it stays stopped."),
    "INSTANCE_AMBIGUOUS": Code(1, "Several instances carry this name in `brev ls --json` (an API key lists the "
                                  "whole org, teammates' instances included); brev addresses an instance by name.",
                               "Rename or delete the other instance (the message lists every id), or use an "
                               "instance whose name is unique in the org."),
    "INSTANCE_BUILDING": Code(3, "The instance is RUNNING but its build is not COMPLETED / its shell not READY "
                                 "(`brev ls --json` build_status, shell_status) within the wait.",
                              "Wait for Brev to finish building the instance, then rerun preflight.py (it waits "
                              "up to --exec-timeout); a build that FAILED needs a new instance."),
    "GPU_NOT_FOUND": Code(1, "nvidia-smi fails or lists no GPU on the instance.",
                          "Use a Brev GPU instance whose NVIDIA driver is loaded (nvidia-smi on the instance "
                          "must list its GPUs); a CPU instance cannot run TAO training."),
    "NGC_NOT_AUTHENTICATED": Code(1, "nvcr.io refused the NGC key (no key, or a wrong one).",
                                  "Export a valid NGC_KEY (an NGC API key, nvapi-...) in the shell that runs the script."),
    "NGC_KEY_NOT_DELIVERED": Code(3, "The NGC key file reached the instance empty, so docker login had no key to "
                                     "send (docker: Cannot perform an interactive login from a non TTY device).",
                                  "NGC_KEY itself was not checked: rerun preflight.py (the key is copied again); if "
                                  "it repeats, check free space in the instance's home (brev exec NAME \"df -h "
                                  "~\" </dev/null) and that brev copy works."),
    "NGC_NOT_ENTITLED": Code(1, "The NGC key was accepted but its org is not entitled to this image.",
                             "Use a key from an NGC org entitled to TAO, or accept the image's terms on ngc.nvidia.com."),
    "NEVER_LAUNCHED": Code(1, "The job's launch never happened (reconciled: no container under its id).",
                           "Nothing runs under this id: submit again with --retry-of JOB_ID."),
    "LAUNCH_IN_PROGRESS": Code(3, "A launch of this job still holds its lock on the instance; its outcome is not known yet.",
                               "Run poll_status.py JOB_ID again in a minute: it adopts the container or closes the "
                               "launch. Do not resubmit yet."),
    "INSTANCE_LOST": Code(1, "The job's instance was deleted or stopped while the job ran.",
                          "Results not yet uploaded are lost (deleted) or frozen (stopped); continue a train job from its last "
                          "checkpoint: submit.py ... --resume-from JOB_ID (its results on the same instance, or "
                          "verified in S3); --retry-of JOB_ID only links a fresh start."),
    "CONTAINER_GONE": Code(1, "The job's container no longer exists on the instance (removed outside this tool; "
                              "docker answered: no such container).",
                           "Its state cannot be read any more; close it with teardown.py JOB_ID, then continue a train job from "
                           "its last checkpoint: submit.py ... --resume-from JOB_ID (--retry-of only links a fresh start)."),
    "INSTANCE_DELETE_REFUSED": Code(1, "The instance was not deleted: a job on it is still live or has results "
                                       "not verified in S3.",
                                    "Wait for the jobs / verify the results (poll_status.py JOB_ID --wait --teardown --timeout S), "
                                    "or pass --force to delete anyway and lose them."),
    "INSTANCE_STOP_REFUSED": Code(1, "teardown.py JOB_ID --stop-instance did not stop the instance: another job on it "
                                     "is still live, or results on it are not verified in S3 yet.",
                                  "Wait for those jobs (poll_status.py JOB_ID --wait) and rerun teardown.py JOB_ID "
                                  "--stop-instance; a stop never kills a live job."),
    "RESULTS_ONLY_ON_INSTANCE": Code(1, "The instance was not deleted: results that exist only on its disk (no "
                                        "bucket, no TAO_RESULTS_ROOT) could not be copied back and verified "
                                        "(sha256) first; it still runs and bills.",
                                     "Rerun the same teardown (it copies them back, verifies, then deletes), or "
                                     "teardown.py JOB_ID --delete-instance --discard-results to delete anyway and "
                                     "lose them."),
    "NOT_AN_ORPHAN": Code(1, "An instance named for deletion with teardown.py --orphans --delete is not an orphan this "
                             "bundle may delete: in use, not found, or never used by this bundle (someone else's).",
                          "Run teardown.py --orphans to see why (kept, ours). Unasked it deletes only instances made "
                          "for its jobs (--ephemeral); named, an idle RUNNING one it ran a job on; any other instance "
                          "belongs to whoever created it, who can run brev stop NAME (if its type can stop) or brev delete NAME."),
    "INTERNAL_ERROR": Code(1, "An unexpected exception: a bug in tao-run-on-brev.",
                           "Report it with the stderr output; records already written are intact."),
    "INTERRUPTED": Code(130, "The script was interrupted (Ctrl-C / SIGINT / SIGTERM); the answer names the job "
                             "it worked on (job_id), if any.",
                        "Run the answer's next: the same command again for preflight, poll_status and teardown "
                        "(safe to repeat); after an interrupted submit, never a resubmit but poll_status.py with "
                        "the job id (the answer names it: job_id, with its last known state)."),
    # -- S3 (storage.py) ---------------------------------------------------

    # -- 1: the verb ran, the answer is a failure --------------------------
    "S3_NO_SUCH_BUCKET": Code(1, "The S3 bucket does not exist at this endpoint.",
                              "Check S3_BUCKET_NAME / --bucket and AWS_ENDPOINT_URL (a bucket lives on one store); create the bucket first."),
    "S3_ACCESS_DENIED": Code(1, "The S3 credentials are valid but not allowed to use this bucket or prefix.",
                             "Grant s3:ListBucket, s3:GetObject, s3:PutObject and s3:DeleteObject on the bucket/prefix, or choose a prefix the key may write."),
    "S3_REQUEST_FAILED": Code(1, "An S3 request failed with an error no other code covers.",
                              "Read the store's error code and message; retry transient ones (SlowDown, InternalError, RequestTimeout)."),
    "S3_VERIFY_FAILED": Code(1, "Objects in S3 are missing or differ from the local manifest.",
                             "Run the upload again (objects that already match are skipped), verify again, and never delete the source before verification passes."),
    "INPUT_STAGING_FAILED": Code(1, "Copying the inputs from S3 onto the instance failed before the launch; nothing was launched.",
                                 "Read the carrier's message (aws s3 sync on the instance): check the prefix, that the instance "
                                 "reaches AWS_ENDPOINT_URL, and its free disk; then submit again (uploaded inputs are reused)."),
    "RESULTS_UPLOAD_FAILED": Code(1, "Uploading the results dir from the instance to S3 failed (aws s3 sync on the instance).",
                                  "Read the carrier's message; fix the cause (endpoint reachable from the instance, "
                                  "bucket permissions, credentials), then poll_status.py JOB_ID or teardown.py JOB_ID uploads again."),
    # -- 3: the backend could not be reached -------------------------------
    "S3_AUTH_FAILED": Code(3, "The S3 store rejected the credentials (unknown access key, wrong secret, bad or expired session token).",
                           "Export the AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN if temporary) that belong to this endpoint; never put them on the command line."),
    "S3_UNREACHABLE": Code(3, "The S3 endpoint could not be reached (DNS, connection refused, TLS, timeout).",
                           "Check AWS_ENDPOINT_URL (scheme, host, port) and the network; unset it to use AWS S3."),
    # -- 3: the backend could not be reached -------------------------------
    "BREV_NOT_FOUND": Code(3, "The brev CLI is not on PATH.",
                           "Install the Brev CLI (https://docs.nvidia.com/brev) and make sure `brev` is on PATH."),
    "PYTHON_ENV_MISSING": Code(3, "The script cannot run: the bundle's environment (.venv, made by install.sh) is "
                                  "missing or broken, and the Python that started it is older than 3.9 (reported by "
                                  "scripts/_bootstrap.py, before any import).",
                               "Run bash <bundle>/install.sh --local (with --python PY for a Python >= 3.9 when "
                               "python3 is older); the message names the bundle and the Python found; the answer's "
                               "next is that command with the bundle's absolute path."),
    "DEPENDENCIES_MISSING": Code(3, "The script cannot run: the bundle's environment (.venv, made by install.sh) is "
                                    "missing or broken, and the Python >= 3.9 that started it cannot import a "
                                    "dependency (PyYAML, jsonschema, boto3 or one of theirs) - e.g. a checkout "
                                    "used without install.sh. Nothing was done.",
                                 "Run bash <bundle>/install.sh --local (the answer's next is that command with the "
                                 "bundle's absolute path), then the same command again."),
    "BREV_NOT_LOGGED_IN": Code(3, "brev is not logged in (or its token expired) and neither BREV_API_TOKEN nor "
                                  "BREV_API_KEY is set.",
                               "Export BREV_API_KEY (a Brev API key, bak-...) or BREV_API_TOKEN (headless) in the "
                               "shell that runs the scripts, then run preflight.py --login; never type a token "
                               "into a command."),
    "BREV_LOGIN_FAILED": Code(3, "brev login --token with BREV_API_TOKEN failed.",
                              "Create a fresh token in the Brev console, export it as BREV_API_TOKEN, retry."),
    "BREV_API_UNREACHABLE": Code(3, "The Brev API did not answer (EOF, connection reset, timeout, HTTP 5xx or "
                                    "429) through every retry; brev's login is not in question.",
                                 "Wait a minute and rerun the same command (read-only verbs are safe to repeat); "
                                 "do not log in again."),
    "BREV_NVIDIA_LOGIN_REQUIRED": Code(3, "This Brev account was migrated to NVIDIA sign-in: brev started `brev login "
                                          "--auth nvidia`, which waits for a browser (brev-cli "
                                          "pkg/cmd/cmderrors/cmderrors.go); a headless run cannot finish it.",
                                       "Run `brev login --auth nvidia` yourself in a terminal with a browser, or "
                                       "export a Brev API key (bak-...) as BREV_API_KEY for headless runs; then "
                                       "rerun the same command."),
    "BREV_API_KEY_REJECTED": Code(3, "brev still reports an auth failure with the Brev API key (BREV_API_KEY, or a "
                                     "bak- key in BREV_API_TOKEN) in its environment.",
                                  "Create a new API key in the Brev console and export it as BREV_API_KEY (a brev "
                                  "that reads it: brev-cli PR #464; upgrade brev if needed); never pass it to "
                                  "brev login on a command line."),
    "TRANSPORT_FAILED": Code(3, "brev exec did not deliver a complete answer (ssh or brev failed).",
                             "Check the instance with preflight.py --instance NAME; read-only verbs are safe to retry."),
    "TRANSPORT_TIMEOUT": Code(3, "brev exec did not answer within its timeout.",
                              "Run preflight.py --instance NAME; raise --exec-timeout on a fresh instance (>= 600 s)."),
    "SSH_KEY_REJECTED": Code(3, "The instance's sshd refuses brev's ssh key (Permission denied (publickey)): not a "
                                "boot delay, waiting does not help.",
                             "Refresh brev's ssh config and key (brev refresh), or log in again as the account that "
                             "owns the instance (export that account's BREV_API_KEY or BREV_API_TOKEN, then "
                             "preflight.py --login: no brev login typed by hand), then check by hand: brev exec NAME "
                             "\"echo ok\" </dev/null; rerun preflight.py."),
    "INSTANCE_DELETE_PENDING": Code(3, "brev delete failed (after one fresh login): the instance was NOT deleted and "
                                       "still bills; cleanup is pending.",
                                    "Delete it yourself: brev delete NAME (after preflight.py --login logged brev in), or "
                                    "rerun the same teardown once brev answers; teardown.py --orphans lists it until "
                                    "it is deleted."),
    "NOT_EXEC_READY": Code(3, "The readiness probe never proved a command ran on the instance within its budget.",
                           "Wait for the instance to finish booting, then rerun preflight.py with a larger --exec-timeout."),
    "BREV_FAILED": Code(3, "A brev command (ls, delete, copy, start) failed.",
                        "Read brev's message in the error; retry once the Brev service answers."),
}
