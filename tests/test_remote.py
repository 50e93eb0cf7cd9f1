"""tao_brev.remote: what reaches the instance's shell. The guards refuse every name that
is not plain before anything is built; paths are quoted so the instance's shell expands
only ``~``; sections come back by their token; the file writer and its check, the GPU
guard and the launch lock run here under a local POSIX sh (docker stood in for by a
shell function where the script asks it something), as they run on the instance."""

import hashlib
import shlex
import subprocess

import pytest

from tao_brev import remote
from tao_brev.errors import TaoBrevError


def sh(script, home, stdin=None):
    """Run ``script`` with the POSIX sh, HOME=home; (exit status, stdout+stderr)."""
    done = subprocess.run(["sh", "-c", script], cwd=home, env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
                          input=stdin, capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout + done.stderr


# -- names -----------------------------------------------------------------------------
GOOD_NAMES = ["a", "Z", "0", "box-1", "visual_changenet", "v1.2", "a" * 128, "9_x.y-z"]
BAD_NAMES = ["", "-x", ".x", "_x", "a" * 129, "a b", "a;b", "a/b", "a$b", "a`b", "a\nb", "a\n", "é", "a:b", "a=b",
             None, 7, ["a"]]


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_plain_names_pass(name):
    assert remote.check_name(name, "network arch") == name


@pytest.mark.parametrize("name", BAD_NAMES)
def test_other_names_are_bad_name(name):
    with pytest.raises(TaoBrevError) as failed:
        remote.check_name(name, "network arch")
    assert failed.value.code == "BAD_NAME" and "invalid network arch" in failed.value.message


@pytest.mark.parametrize("name", ["A", "_", "_x", "HF_TOKEN", "x1", "A" * 128])
def test_env_names_pass(name):
    assert remote.check_env_name(name) == name


@pytest.mark.parametrize("name", ["", "1A", "A-B", "A.B", "A B", "A;B", "A" * 129, "a\n", None, 3])
def test_bad_env_names_are_bad_name(name):
    with pytest.raises(TaoBrevError) as failed:
        remote.check_env_name(name)
    assert failed.value.code == "BAD_NAME" and failed.value.message == f"invalid environment variable name: {name!r}"


@pytest.mark.parametrize("value", ["NGC_KEY=nvapi-secret-value-123", "A=", "=Zq8secretvalue", "bad name=Zq8val",
                                   "TOKEN=Zq8a=Zq8b"])
def test_an_env_assignment_is_refused_without_its_value(value):
    with pytest.raises(TaoBrevError) as failed:
        remote.check_env_name(value)
    name = value.split("=", 1)[0]
    assert failed.value.code == "BAD_ARGUMENT"
    assert f"{name}=<value, not shown>" in failed.value.message and f"--env {name}." in failed.value.fix
    rest = value.split("=", 1)[1]
    assert not rest or rest not in failed.value.message + failed.value.fix


# -- paths -----------------------------------------------------------------------------
@pytest.mark.parametrize("path, quoted", [
    ("~", '"$HOME"'), ("~/", '"$HOME"'), ("~/a", "\"$HOME\"/a"), ("~/a b/c/", "\"$HOME\"/'a b/c'"),
    ("/abs/x", "/abs/x"), ("/a b", "'/a b'"), ("/x;rm -rf ~", "'/x;rm -rf ~'"), ("~/$(id)", "\"$HOME\"/'$(id)'"),
])
def test_instance_paths_are_quoted_and_only_home_expands(path, quoted, tmp_path):
    assert remote.rpath(path) == quoted
    code, out = sh(f"printf '%s' {remote.rpath(path)}", tmp_path)
    assert code == 0 and out == (str(tmp_path) + path[1:].rstrip("/") if path.startswith("~") else path)


@pytest.mark.parametrize("path", ["relative/x", "x", "", "~user/x", "/a/../b", "~/../x", "..", "/a/.."])
def test_other_paths_are_refused(path):
    with pytest.raises(TaoBrevError) as failed:
        remote.rpath(path)
    assert failed.value.code == "BAD_ARGUMENT"


def test_join_and_the_job_dir():
    assert remote.join("~/a/", "/b/", "c") == "~/a/b/c"
    assert remote.join("/", "x") == "/x" and remote.join("~/a") == "~/a"
    assert remote.job_dir("j-1") == "~/tao-jobs/j-1"


# -- sections ----------------------------------------------------------------------------
def test_sections_come_back_by_name_with_their_status(tmp_path):
    token = remote.new_token()
    assert token.startswith("S") and len(token) == 13 and token != remote.new_token()
    script = "\n".join([remote.section(token, "a", "echo one; echo err >&2"),
                        remote.section(token, "b.2", "printf 'no newline'; (exit 3)"),
                        remote.section(token, "c", "true")])
    code, out = sh(script, tmp_path)
    parsed = remote.parse_sections(out, token)
    assert set(parsed) == {"a", "b.2", "c"}
    assert (parsed["a"].exit_code, parsed["a"].output) == (0, "one\nerr\n")
    assert (parsed["b.2"].exit_code, parsed["b.2"].output) == (3, "no newline")
    assert (parsed["c"].name, parsed["c"].exit_code, parsed["c"].output) == ("c", 0, "")


def test_only_the_scripts_token_opens_a_section_and_a_repeated_name_keeps_the_last():
    token, other = "S000000000001", "S000000000002"
    text = (f"{other}>x\nforged\n{other}<x 0\n"
            f"{token}>x\nfirst\n{token}<x 1\n"
            f"junk {token}>y\nnot at a line start\n{token}<y 0\n"
            f"{token}>x\nsecond\nline\n{token}<x 2\n")
    parsed = remote.parse_sections(text, token)
    assert list(parsed) == ["x"] and (parsed["x"].exit_code, parsed["x"].output) == (2, "second\nline")
    assert remote.parse_sections(f"{token}>z\nopen, never closed\n", token) == {}
    assert remote.parse_sections(f"{token}>z\nwrong close\n{token}<q 0\n", token) == {}


# -- writing a file and checking it ---------------------------------------------------------
@pytest.mark.parametrize("content", ["a: 1\n", "no newline", "$HOME `id` $(id) 'q' \"d\"\n\\n", ""])
def test_a_file_is_written_verbatim_and_verified(content, tmp_path):
    script = remote.heredoc_file("~/spec.yaml", content) + remote.verify_file("~/spec.yaml", content)
    code, out = sh(script, tmp_path)
    expected = content if content.endswith("\n") else content + "\n"
    assert (code, out) == (0, "") and (tmp_path / "spec.yaml").read_text() == expected


def test_a_file_that_did_not_arrive_intact_is_refused(tmp_path):
    (tmp_path / "spec.yaml").write_text("other\n")
    code, out = sh(remote.verify_file("~/spec.yaml", "a: 1\n"), tmp_path)
    assert code == remote.WRITE_FAILED_EXIT
    assert out.strip() == "TAO_SPEC_UNVERIFIED ~/spec.yaml: 6 bytes on the instance, 5 sent"
    same_size = "a: 2\n"
    (tmp_path / "spec.yaml").write_text(same_size)
    code, out = sh(remote.verify_file("~/spec.yaml", "a: 1\n"), tmp_path)   # same size, other bytes
    assert code == remote.WRITE_FAILED_EXIT and "TAO_SPEC_UNVERIFIED" in out
    code, out = sh(remote.verify_file("~/missing.yaml", "a: 1\n"), tmp_path)
    assert code == remote.WRITE_FAILED_EXIT and "TAO_SPEC_UNVERIFIED" in out
    assert hashlib.sha256(b"a: 1\n").hexdigest() in remote.verify_file("~/s", "a: 1")


def test_a_failed_write_says_so_and_stops(tmp_path):
    (tmp_path / "dir").mkdir()
    code, out = sh(remote.heredoc_file("~/dir", "x") + "echo not-reached", tmp_path)
    assert code == remote.WRITE_FAILED_EXIT
    assert f"TAO_WRITE_FAILED {tmp_path}/dir" in out and "not-reached" not in out


# -- docker run --------------------------------------------------------------------------
def run_spec(**kw):
    args = dict(job_id="dino-train-abc123", image="nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt",
                network_arch="dino", action="train", results_dir="~/tao-results/dino-train-abc123")
    args.update(kw)
    return remote.RunSpec(**args)


def test_docker_run_names_labels_mounts_and_runs_the_action():
    words = shlex.split(run_spec(env_file="~/.tao-cred-x", mounts=(("~/data/coco", "/data/coco", True),
                                                                    ("/scratch", "/data/s", False)),
                                 overrides=("train.num_epochs=5", "a b")).docker_run())
    assert words[:4] == ["docker", "run", "-d", "--name"] and words[4] == "dino-train-abc123"
    assert words[5:9] == ["--label", "tao-job=dino-train-abc123", "--label", "tao-gpus=all"]
    assert words[9:13] == ["--gpus", "all", "--shm-size", "16g"]
    assert words[13:15] == ["--env-file", "$HOME/.tao-cred-x"]
    assert words[15:19] == ["-v", "$HOME/tao-jobs/dino-train-abc123/spec:/tao/job:ro",
                            "-v", "$HOME/tao-results/dino-train-abc123:/results"]
    assert words[19:23] == ["-v", "$HOME/data/coco:/data/coco:ro", "-v", "/scratch:/data/s"]
    assert words[23:] == ["nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt", "dino", "train", "-e", "/tao/job/spec.yaml",
                          "results_dir=/results", "train.num_epochs=5", "a b"]
    assert "--env-file" not in run_spec().docker_run()


def test_shell_args_are_appended_as_they_are_after_the_overrides():
    line = run_spec(overrides=("a=1",), shell_args=('"k=/resume/$v"',)).docker_run()
    assert line.endswith(" a=1 \"k=/resume/$v\"")
    code, out = sh(f'v=x.pth; set -- {line.split(" ", 1)[1]}; for w; do printf "%s\\n" "$w"; done', ".")
    assert code == 0 and out.splitlines()[-1] == "k=/resume/x.pth"
    assert run_spec().docker_run().endswith("results_dir=/results")


@pytest.mark.parametrize("gpus, flag", [("all", ["--gpus", "all"]), ("0", ["--gpus", '"device=0"']),
                                        ("0,1,3", ["--gpus", '"device=0,1,3"'])])
def test_gpus_flag(gpus, flag):
    assert [shlex.split(w)[0] for w in remote.gpus_flag(gpus)] == flag
    assert f"--label tao-gpus={gpus}" in run_spec(gpus=gpus).docker_run()


@pytest.mark.parametrize("gpus", ["", "none", "0,", ",0", "0;1", "all,0", "-1", "all\n", "0\n", None])
def test_bad_gpus_are_refused(gpus):
    with pytest.raises(TaoBrevError) as failed:
        remote.gpus_flag(gpus)
    assert failed.value.code == "BAD_ARGUMENT"


@pytest.mark.parametrize("field, value, code", [
    ("job_id", "x;y", "BAD_NAME"), ("network_arch", "a b", "BAD_NAME"), ("action", "$(id)", "BAD_NAME"),
    ("shm_size", "16 g", "BAD_ARGUMENT"), ("shm_size", "lots", "BAD_ARGUMENT"), ("shm_size", "", "BAD_ARGUMENT"),
    ("shm_size", "16g\n", "BAD_ARGUMENT"), ("job_id", "j1\n", "BAD_NAME"),
    ("gpus", "x", "BAD_ARGUMENT"),
])
def test_docker_run_refuses_what_is_not_plain(field, value, code):
    with pytest.raises(TaoBrevError) as failed:
        run_spec(**{field: value}).docker_run()
    assert failed.value.code == code
    what = {"job_id": "job id", "network_arch": "network arch", "action": "action"}.get(field)
    if what:
        assert failed.value.message.startswith(f"invalid {what}: {value!r}")
    elif field == "shm_size":
        assert failed.value.message == f"--shm-size must look like 16g or 512m (got {value!r})"


@pytest.mark.parametrize("shm", ["1", "512m", "16g", "2G", "64k", "100b", "3M", "1K", "8B"])
def test_shm_sizes(shm):
    assert f"--shm-size {shm}" in run_spec(shm_size=shm).docker_run()


def test_every_command_on_a_job_refuses_a_bad_id():
    for build in (remote.inspect_state, remote.remove_container, remote.discard_job_credentials,
                  remote.launch_lock, remote.abandon_launch, remote.reconcile_launch, remote.last_log_line,
                  lambda j: remote.logs_tail(j, 5), lambda j: remote.logs_if_exited(j, 5),
                  lambda j: remote.gpus_free(j, "all")):
        with pytest.raises(TaoBrevError) as failed:
            build("x;rm -rf ~")
        assert failed.value.code == "BAD_NAME"
        assert failed.value.message == "invalid job id: 'x;rm -rf ~' (allowed: letters, digits, '.', '_', '-')"


def test_the_job_commands():
    assert remote.inspect_state("j1") == "docker inspect --type container --format '{{json .State}}' j1"
    assert remote.logs_tail("j1", "7") == "docker logs --tail 7 j1"
    assert remote.remove_container("j1") == "docker rm -f j1"
    assert remote.last_log_line("j1") == "docker logs --timestamps --tail 1 j1"
    assert remote.discard_job_credentials("j1") == 'rm -f "$HOME"/.tao-cred-j1-*'
    assert remote.read_progress("~/r", 3, 99) == '__tb_progress "$HOME"/r 3 99'
    assert remote.read_all_jobs(2, 50) == "__tb_jobs 2 50"
    assert remote.read_all_jobs() == f"__tb_jobs 4 {4 * remote.MAX_STATUS_LINE}"
    assert remote.read_progress("~/r") == f'__tb_progress "$HOME"/r 12 {12 * remote.MAX_STATUS_LINE}'
    assert remote.instance_now() == "date +%s"


DOCKER_STUB = """docker() {{ case "$1 $2" in "ps --filter") printf '%s\\n' {live};; "inspect --type") {inspect};;
  *) echo "docker $*";; esac; }}
"""


@pytest.mark.parametrize("live, gpus, busy", [
    ("", "all", []),
    ("other=all", "0", ["other=all"]),
    ("other=", "0", ["other="]),                          # no label: counts as all
    ("other=1", "0", []),
    ("other=1,2", "2", ["other=1,2"]),
    ("other=12", "1", []),                                # 12 is not 1
    ("other=0 more=3", "all", ["other=0", "more=3"]),
    ("dino-train-abc123=all", "all", []),                 # the job itself
])
def test_the_gpu_guard(live, gpus, busy, tmp_path):
    stub = DOCKER_STUB.format(live=shlex.quote(live) if live else "''", inspect="true")
    if not live:
        stub = stub.replace("printf '%s\\n' ''", "true")
    script = stub + remote.gpus_free("dino-train-abc123", gpus) + "\necho free"
    code, out = sh(script, tmp_path)
    if busy:
        assert code == remote.GPUS_BUSY_EXIT
        assert [ln for ln in out.splitlines() if ln.startswith("TAO_GPUS_BUSY")] == [f"TAO_GPUS_BUSY {b}" for b in busy]
    else:
        assert (code, out.strip()) == (0, "free")
    assert (tmp_path / "tao-jobs").is_dir()


def test_reconciliation_settles_a_launch_either_way(tmp_path):
    running = DOCKER_STUB.format(live="''", inspect="echo '{\"Status\":\"running\"}'")
    code, out = sh(running + remote.reconcile_launch("j1"), tmp_path)
    assert (code, out.strip()) == (0, '{"Status":"running"}')
    assert not (tmp_path / "tao-jobs" / "j1" / remote.ABANDONED).exists()
    (tmp_path / ".tao-cred-j1-abc").write_text("secret")
    (tmp_path / ".tao-cred-j10-abc").write_text("another job's")
    gone = DOCKER_STUB.format(live="''", inspect="echo 'Error: No such container: j1' >&2; return 1")
    code, out = sh(gone + remote.reconcile_launch("j1"), tmp_path)
    assert (code, out.strip()) == (5, "TAO_NEVER_LAUNCHED")
    assert (tmp_path / "tao-jobs" / "j1" / remote.ABANDONED).exists()
    assert not (tmp_path / ".tao-cred-j1-abc").exists() and (tmp_path / ".tao-cred-j10-abc").exists()
    failing = DOCKER_STUB.format(live="''", inspect="echo 'Cannot connect to the Docker daemon' >&2; return 1")
    code, out = sh(failing + remote.reconcile_launch("j2"), tmp_path)
    assert code == 2 and "Cannot connect" in out and not (tmp_path / "tao-jobs" / "j2" / remote.ABANDONED).exists()


def test_an_abandoned_job_leaves_its_tombstone(tmp_path):
    code, _ = sh(remote.abandon_launch("j1"), tmp_path)
    assert code == 0 and (tmp_path / "tao-jobs" / "j1" / remote.ABANDONED).exists()


# -- the whole submit, run by a local sh (docker answered by a shell function) ---------------
def docker_fn(inspect="echo 'Error: No such object' >&2; return 1",
              image='[ "$3" = nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt ] || return 1', ps="",
              run="echo \"RUN $*\""):
    return ("docker() {\n  case \"$1\" in\n"
            f"    inspect) {inspect};;\n"
            f"    image) {image};;\n"
            f"    ps) printf '%s' {shlex.quote(ps)};;\n"
            f"    run) {run};;\n"
            "    *) echo \"unexpected docker $*\"; return 99;;\n  esac\n}\n")


def submit(tmp_path, run=None, checks="", **docker):
    run = run or run_spec(env_file="~/.tao-cred-dino-train-abc123-x1")
    (tmp_path / ".tao-cred-dino-train-abc123-x1").write_text("NGC_KEY=v")
    return sh(docker_fn(**docker) + remote.submit_script(run, "model: dino\n", checks), tmp_path)


def test_a_submit_writes_the_spec_and_launches_once(tmp_path):
    code, out = submit(tmp_path)
    assert code == 0, out
    run_line = [ln for ln in out.splitlines() if ln.startswith("RUN ")]
    assert run_line == ["RUN " + " ".join(shlex.split(run_spec(env_file="~/.tao-cred-dino-train-abc123-x1")
                                                     .docker_run().replace('"$HOME"', str(tmp_path)))[1:])]
    job = tmp_path / "tao-jobs" / "dino-train-abc123"
    assert (job / "spec" / "spec.yaml").read_text() == "model: dino\n"
    assert (tmp_path / "tao-results" / "dino-train-abc123").is_dir() and (job / ".launch.lock").exists()
    assert not (tmp_path / ".tao-cred-dino-train-abc123-x1").exists()   # the trap removed the credential file


def test_an_existing_container_is_not_launched_again(tmp_path):
    code, out = submit(tmp_path, inspect="echo '{\"Status\":\"running\"}'")
    assert code == 0 and out.splitlines() == ["TAO_ALREADY_SUBMITTED", '{"Status":"running"}']
    assert not (tmp_path / ".tao-cred-dino-train-abc123-x1").exists()


@pytest.mark.parametrize("image, code, marker", [("return 1", 4, "TAO_IMAGE_MISSING"),
                                                 ("return 127", 127, "TAO_DOCKER_MISSING docker image inspect")])
def test_a_missing_image_or_docker_stops_before_the_launch(tmp_path, image, code, marker):
    status, out = submit(tmp_path, image=image)
    assert status == code and out.strip() == marker
    assert not (tmp_path / ".tao-cred-dino-train-abc123-x1").exists()


def test_an_abandoned_launch_refuses(tmp_path):
    (tmp_path / "tao-jobs" / "dino-train-abc123").mkdir(parents=True)
    (tmp_path / "tao-jobs" / "dino-train-abc123" / remote.ABANDONED).write_text("")
    code, out = submit(tmp_path)
    assert (code, out.strip()) == (6, "TAO_LAUNCH_ABANDONED")


def test_a_failing_check_stops_everything_after_it(tmp_path):
    code, out = submit(tmp_path, checks="echo CHECK_FAILED; exit 8")
    assert (code, out.strip()) == (8, "CHECK_FAILED")
    assert not (tmp_path / "tao-jobs").exists() and not (tmp_path / ".tao-cred-dino-train-abc123-x1").exists()


def test_busy_gpus_refuse_unless_shared(tmp_path):
    code, out = submit(tmp_path, ps="other-job=all")
    assert (code, out.strip()) == (remote.GPUS_BUSY_EXIT, "TAO_GPUS_BUSY other-job=all")
    code, out = submit(tmp_path, run=run_spec(share_gpus=True), ps="other-job=all")
    assert code == 0 and out.startswith("RUN ")


def test_a_spec_that_did_not_arrive_is_not_launched(tmp_path):
    broken = remote.submit_script(run_spec(), "model: dino\n").replace("model: dino\n", "model: dxno\n", 1)
    code, out = sh(docker_fn() + broken, tmp_path)
    assert code == remote.WRITE_FAILED_EXIT and "TAO_SPEC_UNVERIFIED" in out and "RUN " not in out


# -- progress files and the job listing --------------------------------------------------------
def test_progress_prints_each_status_file_with_its_time_size_and_last_lines(tmp_path):
    token = "S0123456789ab"
    results = tmp_path / "tao-results" / "j1"
    (results / "train").mkdir(parents=True)
    (results / "train" / "status.json").write_text("".join(f'{{"epoch": {i}}}\n' for i in range(20)))
    (results / "status.json").write_text("x" * (remote.MAX_STATUS_LINE + 1) + "\n" + '{"last": 1}\n')
    (results / "eval").mkdir()
    script = remote.progress_functions(token) + "\n" + remote.read_progress("~/tao-results/j1", 3, 10_000_000)
    code, out = sh(script, tmp_path)
    lines = out.splitlines()
    assert code == 0
    size = (results / "train" / "status.json").stat().st_size
    mtime = int((results / "train" / "status.json").stat().st_mtime)
    assert lines[0] == f"{token}:F {mtime} {size} train/status.json"
    assert lines[1:4] == ['{"epoch": 17}', '{"epoch": 18}', '{"epoch": 19}']
    assert lines[4].startswith(f"{token}:F ") and lines[4].endswith(" status.json")
    assert lines[5:] == [f"{token}:LONG {remote.MAX_STATUS_LINE + 1}", '{"last": 1}']
    code, out = sh(remote.progress_functions(token) + "\n" + remote.read_progress("~/tao-results/j1", 3, 20), tmp_path)
    assert out.splitlines()[1:3] == [': 18}', '{"epoch": 19}']   # the last 20 bytes, then the last 3 lines


def test_the_job_listing_reads_every_labelled_container_once(tmp_path):
    token = "S0123456789ab"
    results = tmp_path / "r1"
    results.mkdir()
    (results / "status.json").write_text('{"epoch": 1}\n')
    rows = (f"{token}:J\\tj1\\t{{\\\"Status\\\":\\\"exited\\\",\\\"ExitCode\\\":1}}\\tid1\\t{results}\\n"
            f"{token}:J\\tj2\\t{{\\\"Status\\\":\\\"exited\\\",\\\"ExitCode\\\":0}}\\tid2\\t\\n"
            f"noise\\n")
    fn = ("docker() {\n  case \"$1 $2\" in\n"
          "    'ps -aq') echo id1; echo id2;;\n"
          f"    'inspect --type') printf \"{rows}\";;\n"
          "    'logs --tail') echo \"log of $4\";;\n"
          "  esac\n}\n")
    code, out = sh(fn + remote.progress_functions(token) + "\n" + remote.read_all_jobs(), tmp_path)
    assert code == 0
    assert out.splitlines() == [f'{token}:J\tj1\t{{"Status":"exited","ExitCode":1}}',
                                f"{token}:F " + out.splitlines()[1].split(" ", 1)[1],
                                '{"epoch": 1}', f"{token}:T", "log of id1",
                                f'{token}:J\tj2\t{{"Status":"exited","ExitCode":0}}']
    assert out.splitlines()[1].endswith(" status.json")
    code, out = sh("docker() { return 0; }\n" + remote.progress_functions(token) + "\n" + remote.read_all_jobs(),
                   tmp_path)
    assert (code, out) == (0, "")
    code, out = sh("docker() { return 3; }\n" + remote.progress_functions(token) + "\n" + remote.read_all_jobs(),
                   tmp_path)
    assert code == 3


def test_results_are_handed_to_the_user_only_when_they_exist(tmp_path):
    fn = 'docker() { echo "docker $*"; }\nid() { echo 1000; }\n'
    code, out = sh(fn + remote.own_results("img:1", "~/res"), tmp_path)
    assert (code, out) == (0, "")
    (tmp_path / "res").mkdir()
    code, out = sh(fn + remote.own_results("img:1", "~/res"), tmp_path)
    name = "tao-own-" + hashlib.sha256(b"~/res").hexdigest()[:12]
    assert out.strip() == (f"docker run --rm --name {name} --network none --entrypoint chown -v {tmp_path}/res:/results "
                           "img:1 -R 1000:1000 /results")


def test_a_helper_left_created_by_a_killed_run_is_removed_before_the_next(tmp_path):
    """A docker CLI killed between create and start leaves the --rm helper ``created`` (never removed by
    moby's AutoRemove): the next hand-over removes it by its name first, then runs under that name."""
    fn = 'docker() { echo "docker $*" >> "$HOME/calls"; }\nid() { echo 1000; }\n'
    (tmp_path / "res").mkdir()
    code, _ = sh(fn + remote.own_results("img:1", "~/res"), tmp_path)
    calls = (tmp_path / "calls").read_text().splitlines()
    name = "tao-own-" + hashlib.sha256(b"~/res").hexdigest()[:12]
    assert code == 0 and calls[0] == f"docker rm -f {name}" and calls[1].startswith(f"docker run --rm --name {name} ")
    assert name not in remote.own_results("img:1", "~/other")   # one name per results dir


@pytest.mark.parametrize("status, logs", [("exited", "log tail 7 j1"), ("running", "")])
def test_logs_are_read_only_for_an_exited_container(tmp_path, status, logs):
    fn = (f'docker() {{ case "$1" in inspect) [ "$5 $6" = "{{{{.State.Status}}}} j1" ] && echo {status};; '
          'logs) echo "log $2 $3 $4";; esac; }\n')
    code, out = sh(fn + remote.logs_if_exited("j1", 7), tmp_path)
    assert (code, out.strip()) == (0, logs.replace("log tail", "log --tail"))
    assert remote.list_job_containers() == "docker ps -a --filter label=tao-job --format '{{.Names}}\t{{.State}}'"


@pytest.mark.parametrize("content", ["None\nafter\n", "TAO_EOF_\n", "EOF\n"])
def test_a_line_of_the_content_never_ends_the_heredoc(content, tmp_path):
    code, out = sh(remote.heredoc_file("~/f", content) + remote.verify_file("~/f", content), tmp_path)
    assert (code, out) == (0, "") and (tmp_path / "f").read_text() == content


def test_the_job_listing_reads_states_with_blanks_and_says_when_docker_failed(tmp_path):
    token = "S0123456789ab"
    state = '{"Status":"exited","ExitCode":0,"Error":"no such file or directory"}'
    row = f"{token}:J\t j1\t{state}\tid1\t\n".replace("\t ", "\t")
    (tmp_path / "rows").write_text(row)
    fn = ("docker() {\n  case \"$1 $2\" in\n    'ps -aq') echo id1;;\n"
          f"    'inspect --type') cat {tmp_path}/rows; return 3;;\n  esac\n}}\n")
    code, out = sh(fn + remote.progress_functions(token) + "\n" + remote.read_all_jobs(), tmp_path)
    assert code == 3 and out.splitlines() == [f"{token}:J\tj1\t{state}"]


def test_the_job_listing_asks_docker_for_exactly_these_fields():
    script = remote.progress_functions("S0123456789ab")
    fmt = ('S0123456789ab:J\t{{index .Config.Labels "tao-job"}}\t{{json .State}}\t{{.Id}}\t'
           '{{range .Mounts}}{{if eq .Destination "/results"}}{{.Source}}{{end}}{{end}}')
    assert f"docker inspect --type container --format {shlex.quote(fmt)} $__tb_ids" in script


def test_path_answers_in_full_and_only_slashes_are_trimmed():
    assert remote.rpath("~/dirX") == '"$HOME"/dirX' and remote.rpath("~/d/X/") == '"$HOME"/d/X'
    for path, message in (("/a/../b", "instance path must not contain '..' (got '/a/../b')"),
                          ("rel", "instance path must be absolute or start with ~/ (got 'rel')")):
        with pytest.raises(TaoBrevError) as failed:
            remote.rpath(path)
        assert failed.value.message == message


def test_a_plan_shows_the_script_readably_and_loses_nothing_but_the_files_body():
    run = run_spec(mounts=(("~/data/coco", "/data/coco", True),))
    script = remote.submit_script(run, "a: 1\nb: 2\nc: 3\n")
    lines = remote.readable_lines(script)
    original = script.splitlines()
    start = next(i for i, ln in enumerate(original) if "<<'TAO_EOF_" in ln)
    delim = original[start].split("<<'")[1].split("'")[0]
    assert lines[start:start + 3] == [original[start], "    ... 3 line(s) of the file's content (as sent, byte for byte) ...",
                                      delim]
    assert "a: 1" not in lines and lines[:start] == original[:start]
    run_at = lines.index("docker run \\")
    broken = lines[run_at:]
    assert all(ln.endswith(" \\") for ln in broken[:-1]) and all(ln.startswith("    ") for ln in broken[1:])
    assert " ".join(ln.strip().rstrip("\\").strip() for ln in broken) == original[-1]
    assert broken[1:3] == ["    -d \\", "    --name dino-train-abc123 \\"]
    rest = [ln for ln in original[start + 5:-1]]
    assert lines[start + 3:run_at] == rest
    short = "docker run -d x"
    assert remote.readable_lines(short + "\necho hi") == [short, "echo hi"]
    assert remote.readable_lines("cat > f <<'TAO_EOF_0a'\nx\n") == ["cat > f <<'TAO_EOF_0a'",
                                                                    "    ... 1 line(s) of the file's content (as sent, "
                                                                    "byte for byte) ...", "TAO_EOF_0a"]


@pytest.mark.parametrize("char", ["é", "€", "😀"])
def test_status_and_failure_tails_cut_on_characters_at_every_offset(char, tmp_path):
    """The status file's last BYTES and a failed job's log tail (TAIL_BYTES) are byte cuts on the
    instance: at every offset through 2-, 3- and 4-byte characters the first kept line starts on a
    character (strict UTF-8 decoding, no U+FFFD) and is the end of the line it was cut from."""
    token = "S0123456789ab"
    results = tmp_path / "r1"
    results.mkdir()
    line = '{"message": "' + char * 9 + '"}'
    (results / "status.json").write_text(f'{{"epoch": 1}}\n{line}\n', encoding="utf-8")
    size = len(line.encode()) + 1
    for limit in range(2, size + 1):
        done = subprocess.run(["sh", "-c", remote.progress_functions(token) + "\n" + remote.read_progress(str(results), 2, limit)],
                              cwd=tmp_path, capture_output=True)
        kept = done.stdout.decode("utf-8").splitlines()[1:]   # strict: raises on a character cut in two
        assert len(kept) == 1 and line.endswith(kept[0]) and size - 1 - 3 <= len(kept[0].encode()) + (size - limit) <= size - 1, (limit, kept)
    log = tmp_path / "log"
    log.write_text(("Traceback " + char * 3 + "\n") * 4000, encoding="utf-8")
    fn = ("docker() {\n  case \"$1 $2\" in\n    'ps -aq') echo id1;;\n"
          f"    'inspect --type') printf '{token}:J\\tj1\\t{{\"Status\":\"exited\",\"ExitCode\":1}}\\tid1\\t\\n';;\n"
          f"    'logs --tail') cat {log};;\n  esac\n}}\n")
    for shift in range(4):
        with open(log, "ab") as f:
            f.write(b"x")   # move the cut by one byte
        done = subprocess.run(["sh", "-c", fn + remote.progress_functions(token) + "\n" + remote.read_all_jobs()],
                              cwd=tmp_path, capture_output=True)
        tail = done.stdout.decode("utf-8").split(f"{token}:T\n", 1)[1]
        assert "\ufffd" not in tail and log.read_text(encoding="utf-8").rstrip("\n").endswith(tail.rstrip("\n")), shift
        assert remote.TAIL_BYTES - 3 <= len(tail.encode()) <= remote.TAIL_BYTES + 1, shift


# -- the results archive and the GPU check, run by the POSIX sh ----------------------------------
def test_the_results_archive_is_the_dir_under_its_own_name_with_its_sha256(tmp_path):
    import hashlib
    import tarfile

    (tmp_path / "res" / "job" / "train").mkdir(parents=True)
    (tmp_path / "res" / "job" / "train" / "model.pth").write_bytes(b"\x00weights" * 100)
    (tmp_path / "res" / "job" / "log.txt").write_text("done\n")
    for results_dir in ("~/res/job", "~/res/job/", str(tmp_path / "res" / "job")):
        archive = "~/tao-jobs/j1/results.tar.gz"
        code, out = sh(remote.archive_results(results_dir, archive), tmp_path)
        path = tmp_path / "tao-jobs" / "j1" / "results.tar.gz"
        data = path.read_bytes()
        assert (code, out) == (0, f"TAO_ARCHIVE {hashlib.sha256(data).hexdigest()} {len(data)}\n"), results_dir
        with tarfile.open(path) as tar:
            assert sorted(tar.getnames()) == ["job", "job/log.txt", "job/train", "job/train/model.pth"]
        path.unlink()
    (tmp_path / "top").mkdir()
    assert sh(remote.archive_results("~/top", "~/a/r.tar.gz"), tmp_path)[0] == 0
    with tarfile.open(tmp_path / "a" / "r.tar.gz") as tar:
        assert tar.getnames() == ["top"]


def test_no_results_dir_is_said_and_a_failed_archive_prints_no_checksum(tmp_path):
    assert sh(remote.archive_results("~/res/none", "~/tao-jobs/j/r.tar.gz"), tmp_path) == (0, "TAO_NO_RESULTS\n")
    (tmp_path / "res" / "job").mkdir(parents=True)
    (tmp_path / "tao-jobs").write_text("a file where the directory should be")
    code, out = sh(remote.archive_results("~/res/job", "~/tao-jobs/j/r.tar.gz"), tmp_path)
    assert code != 0 and "TAO_ARCHIVE" not in out


def _fake_docker(tmp_path, listing, code=0):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "docker").write_text(f"#!/bin/sh\nprintf '%s' '{listing}'\nexit {code}\n")
    (bin_dir / "docker").chmod(0o755)
    return bin_dir


@pytest.mark.parametrize("gpus, listing, busy", [
    ("1", "job-a=0,1\n", ["job-a=0,1"]),
    ("2", "job-a=0,1\n", []),
    ("2,3", "job-a=0,1\njob-b=3\n", ["job-b=3"]),
    ("all", "job-a=5\n", ["job-a=5"]),
    ("0", "job-a=all\n", ["job-a=all"]),
    ("0", "job-a=\n", ["job-a="]),                      # no label: it holds every GPU
    ("0", "me-x-0a1b2c=0\n", []),                        # the job itself
    ("1", "", []),
])
def test_a_launch_sees_exactly_the_live_jobs_holding_its_gpus(tmp_path, gpus, listing, busy):
    bin_dir = _fake_docker(tmp_path, listing)
    done = subprocess.run(["sh", "-c", remote.gpus_free("me-x-0a1b2c", gpus)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env={"HOME": str(tmp_path), "PATH": f"{bin_dir}:/usr/bin:/bin",
                                                      "__tb_busy": "ghost=all"})   # the check starts from nothing
    assert done.stderr == ""
    assert done.stdout.split("\n")[:-1] == [f"TAO_GPUS_BUSY {b}" for b in busy]
    assert done.returncode == (remote.GPUS_BUSY_EXIT if busy else 0)
    assert (tmp_path / "tao-jobs" / ".gpus.lock").exists()


def test_a_failed_docker_ps_stops_the_launch(tmp_path):
    bin_dir = _fake_docker(tmp_path, "", code=1)
    done = subprocess.run(["sh", "-c", remote.gpus_free("me-x-0a1b2c", "0")], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env={"HOME": str(tmp_path), "PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert (done.returncode, done.stdout, done.stderr) == (2, "TAO_DOCKER_PS_FAILED\n", "")


@pytest.mark.parametrize("parts, joined", [
    (("~/a/", "/b/", "c/"), "~/a/b/c"), (("/abs/", "x"), "/abs/x"), (("~/a", "Xb"), "~/a/Xb"), (("~",), "~"),
])
def test_join_keeps_the_first_parts_root(parts, joined):
    assert remote.join(*parts) == joined


@pytest.mark.parametrize("gpus", [None, "", "0,", "x", "all,0"])
def test_a_bad_gpus_value_is_named(gpus):
    with pytest.raises(TaoBrevError) as failed:
        remote.gpus_flag(gpus)
    assert failed.value.code == "BAD_ARGUMENT" and repr(gpus) in failed.value.message


# -- --gpus all: the GPU count comes from the instance (tao_brev/tao_gpus.py) ------------------------
def _fake_nvidia_smi(tmp_path, lines: int) -> str:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / "nvidia-smi"
    tool.write_text("#!/bin/sh\n" + "".join(f"echo 'GPU {i}: NVIDIA H100 (UUID: GPU-{i})'\n" for i in range(lines)))
    tool.chmod(0o755)
    return f"{bin_dir}:/usr/bin:/bin"


@pytest.mark.parametrize("count,ids", [(1, "0"), (8, "0,1,2,3,4,5,6,7")])
def test_count_gpus_reads_the_instances_gpus(tmp_path, count, ids):
    script = remote.count_gpus() + '\necho "n=$__tb_ngpus ids=$__tb_gids"'
    done = subprocess.run(["sh", "-c", script], env={"PATH": _fake_nvidia_smi(tmp_path, count)},
                          capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == f"TAO_GPU_COUNT {count}\nn={count} ids={ids}"


@pytest.mark.parametrize("smi", ["none", "no lines"])
def test_count_gpus_without_a_gpu_stops_the_launch(tmp_path, smi):
    path = _fake_nvidia_smi(tmp_path, 0) if smi == "no lines" else f"{tmp_path}/empty:/usr/bin:/bin"
    done = subprocess.run(["sh", "-c", remote.count_gpus() + "\necho launched"], env={"PATH": path},
                          capture_output=True, text=True)
    assert done.returncode == remote.NO_GPUS_EXIT and done.stdout.strip() == "TAO_NO_GPUS"


def test_docker_run_passes_the_instance_count_only_for_all_gpus():
    base = dict(job_id="vc-train-1", image="img:1", network_arch="visual_changenet", action="train",
                results_dir="~/r", gpu_count_keys=("train.num_gpus", "train.gpu_ids"))
    words = shlex.split(remote.RunSpec(**base).docker_run().replace("$", "DOLLAR"))
    assert words[-2:] == ["train.num_gpus=DOLLAR__tb_ngpus", "train.gpu_ids=[DOLLAR__tb_gids]"]
    assert "__tb_ngpus" not in remote.RunSpec(**{**base, "gpus": "0,1"}).docker_run()
    script = remote.submit_script(remote.RunSpec(**base), "a: 1\n")
    assert script.index(remote.count_gpus()) < script.index("docker run")
    assert remote.count_gpus() not in remote.submit_script(remote.RunSpec(**{**base, "gpu_count_keys": ()}), "a: 1\n")
    with pytest.raises(TaoBrevError):
        remote.RunSpec(**{**base, "gpu_count_keys": ("train.num_gpus;rm",)}).docker_run()


def test_count_gpus_without_a_gpu_names_what_nvidia_smi_said(tmp_path):
    """A kernel without its driver: nvidia-smi's words reach stderr (submit names GPU_DRIVER_NOT_LOADED)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "nvidia-smi"
    tool.write_text("#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                    "driver.\"\necho second\necho third\nexit 9\n")
    tool.chmod(0o755)
    done = subprocess.run(["sh", "-c", remote.count_gpus() + "\necho launched"],
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin"}, capture_output=True, text=True)
    assert done.returncode == remote.NO_GPUS_EXIT and done.stdout == "TAO_NO_GPUS\n"
    assert done.stderr == ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
                           "second\n")
