"""docker run lines, docker inspect (Engine API shape), vLLM serve args."""

import argparse
import json
from pathlib import Path

import pytest

from golive.facts import FactError
from golive.facts.docker import ImageRef, parse_container_inspect, parse_image_inspect, parse_run
from golive.facts.vllm import (
    APPEND_FLAGS,
    BOOLEAN_FLAGS,
    STORE_TRUE_FLAGS,
    RejectedValue,
    describe_tokens,
    flag_uses,
    parse_max_model_len,
    parse_serve_args,
    refused_args,
    rejected_args,
    repeated_flags,
    served_host,
    speculative_tokens,
)

RUN = [
    "/usr/bin/docker",
    "run",
    "--name",
    "glm53-flash",
    "--gpus",
    "all",
    "--ipc=host",
    "-it",
    "--rm",
    "-v",
    "/srv/models:/models:ro",
    "--cpuset-mems",
    "0",
    "vllm/vllm-openai@sha256:" + "a" * 64,
    "--model",
    "/models/x",
    "--enable-prefix-caching",
]


def test_run_splits_options_image_args():
    run = parse_run(RUN)
    assert run.image.repository == "vllm/vllm-openai" and run.image.digest == "sha256:" + "a" * 64
    assert run.values("--cpuset-mems") == ["0"] and run.values("--ipc") == ["host"]
    assert ("-i", None) in run.options and ("--rm", None) in run.options
    assert run.args == ["--model", "/models/x", "--enable-prefix-caching"]


@pytest.mark.parametrize(
    "options, removes",
    [
        (["--rm"], True),
        (["--rm=true"], True),
        (["--rm=1"], True),
        (["--rm=false"], False),  # Go's strconv.ParseBool: a boolean flag switched off
        (["--rm", "--rm=false"], False),  # the last one given wins
        ([], False),
    ],
)
def test_run_removes_on_exit_as_docker_reads_rm(options, removes):
    assert parse_run(["docker", "run", *options, "--name", "x", "img"]).removes_on_exit is removes


def test_run_without_image():
    with pytest.raises(FactError, match="no image"):
        parse_run(["docker", "run", "--name", "x"])


@pytest.mark.parametrize(
    "ref,repo,tag,digest",
    [
        ("vllm/vllm-openai:nightly-aarch64", "vllm/vllm-openai", "nightly-aarch64", None),
        ("registry:5000/vllm/vllm-openai", "registry:5000/vllm/vllm-openai", None, None),
        ("vllm/vllm-openai:v0.30.0@sha256:ab", "vllm/vllm-openai", "v0.30.0", "sha256:ab"),
    ],
)
def test_image_refs(ref, repo, tag, digest):
    parsed = ImageRef.parse(ref)
    assert (parsed.repository, parsed.tag, parsed.digest) == (repo, tag, digest)


INSPECT = [
    {
        "Id": "b054f115" + "0" * 56,
        "Name": "/glm53-flash",
        "Image": "sha256:" + "c" * 64,
        "Path": "vllm",
        "Args": ["serve", "--port", "8888"],
        "Config": {"Image": "vllm/vllm-openai@sha256:" + "a" * 64, "Cmd": ["--port", "8888"]},
        "State": {"Status": "running", "Running": True, "Pid": 41873},
        "HostConfig": {"RestartPolicy": {"Name": "no", "MaximumRetryCount": 0}, "CpusetMems": ""},
    }
]


def test_container_inspect():
    c = parse_container_inspect(json.dumps(INSPECT))
    assert (c.name, c.running, c.pid, c.restart_policy) == ("glm53-flash", True, 41873, "no")
    assert c.auto_remove is False
    removing = json.loads(json.dumps(INSPECT))
    removing[0]["HostConfig"]["AutoRemove"] = True
    assert parse_container_inspect(json.dumps(removing)).auto_remove is True
    assert c.command == ["vllm", "serve", "--port", "8888"] and c.args == ["--port", "8888"]


# docker inspect of a serving container: (Path, Args, Config.Cmd) → vLLM's own arguments, as its parser gets them.
# Path is the entrypoint's first word; Args the rest of the entrypoint, then what followed the image.
FLAGS = ["--port", "8888", "--max-model-len", "1m"]
CONTAINER_COMMANDS = [
    ("vllm", ["serve", "/m", *FLAGS], ["/m", *FLAGS], ["/m", *FLAGS]),  # ENTRYPOINT ["vllm", "serve"]
    ("vllm", ["serve", *FLAGS], ["serve", *FLAGS], FLAGS),  # ENTRYPOINT ["vllm"], `serve` after the image
    (
        "python3",
        ["-m", "vllm.entrypoints.openai.api_server", "--model", "/m", *FLAGS],
        ["--model", "/m", *FLAGS],
        ["--model", "/m", *FLAGS],
    ),
    (
        "/usr/bin/python3",
        ["-u", "-X", "faulthandler", "-m", "vllm.entrypoints.openai.api_server", *FLAGS],
        FLAGS,
        FLAGS,
    ),
    ("python3", ["-mvllm.entrypoints.openai.api_server", *FLAGS], FLAGS, FLAGS),
    ("python3", ["-m", "vllm.entrypoints.cli.main", "serve", "/m", *FLAGS], ["/m", *FLAGS], ["/m", *FLAGS]),
    ("numactl", ["--membind=0", "/usr/local/bin/vllm", "serve", "/m", *FLAGS], None, ["/m", *FLAGS]),
    ("/usr/bin/tini", ["--", "python3", "-m", "vllm.entrypoints.openai.api_server", *FLAGS], None, FLAGS),
    ("/opt/serve.sh", FLAGS, FLAGS, FLAGS),  # no vLLM entry named: what followed the image
    ("/opt/serve.sh", ["--quiet", *FLAGS], FLAGS, FLAGS),  # the entrypoint's own words are not vLLM's
]


@pytest.mark.parametrize(
    "path, args, cmd, served", CONTAINER_COMMANDS, ids=[" ".join([p, *a[:3]]) for p, a, _, _ in CONTAINER_COMMANDS]
)
def test_container_inspect_finds_vllms_arguments_after_its_entry(path, args, cmd, served):
    inspect = [{**INSPECT[0], "Path": path, "Args": args, "Config": {**INSPECT[0]["Config"], "Cmd": cmd}}]
    container = parse_container_inspect(json.dumps(inspect))
    assert container.command == [path, *args]
    assert container.args == served
    flags = parse_serve_args(container.args)
    assert flags["port"] == "8888" and flags["max-model-len"] == "1m" and not rejected_args(container.args), flags
    assert flags.get("model") in (None, "/m")


RECORDED = Path(__file__).resolve().parents[2] / "fixtures/recorded/real-station"


def test_recorded_real_containers_serve_the_same_flags_whatever_their_entrypoint():
    """Real Docker 20.10 output (fixtures/recorded/real-station): one image with ENTRYPOINT ["vllm", "serve"], one
    with [python, "-m", "vllm.entrypoints.openai.api_server"] (an earlier build: another port, no
    --tensor-parallel-size)."""
    serve = parse_container_inspect((RECORDED / "docker-inspect-glm53-flash.json").read_text())
    python_m = parse_container_inspect((RECORDED / "docker-inspect-glm53-flash-python-m-entrypoint.json").read_text())
    assert python_m.command[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    flags, served = parse_serve_args(python_m.args), parse_serve_args(serve.args)
    assert {k for k in flags.keys() | served.keys() if flags.get(k) != served.get(k)} == {
        "port",
        "tensor-parallel-size",
    }
    assert flags["model"] == "/models/golive-reference" and flags["max-num-seqs"] == "16", flags
    assert rejected_args(python_m.args) == [] and rejected_args(serve.args) == []


@pytest.mark.parametrize(
    "path, args, cmd, served",
    CONTAINER_COMMANDS[:8],
    ids=[" ".join([p, *a[:3]]) for p, a, _, _ in CONTAINER_COMMANDS[:8]],
)
def test_vllms_own_parser_reads_the_same_arguments(vllm_parser, path, args, cmd, served):
    """Where vLLM 0.32 is installed: its make_arg_parser, given the words after the entry, serves what golive reads."""
    inspect = [{**INSPECT[0], "Path": path, "Args": args, "Config": {**INSPECT[0]["Config"], "Cmd": cmd}}]
    namespace = vllm_parser.parse_args(parse_container_inspect(json.dumps(inspect)).args)
    assert (namespace.port, namespace.max_model_len) == (8888, 1_000_000)
    assert (namespace.model_tag or namespace.model) in ("/m", "Qwen/Qwen3-0.6B")  # no model given: vLLM's default


def test_inspect_not_json():
    with pytest.raises(FactError, match="did not print JSON"):
        parse_container_inspect("Error: No such object: glm53-flash")


def test_image_inspect_digests():
    image = parse_image_inspect(
        json.dumps([{"Id": "sha256:c", "RepoDigests": ["vllm/vllm-openai@sha256:aa"], "Architecture": "arm64"}])
    )
    assert image.digests() == {"sha256:aa"} and image.architecture == "arm64"


def test_serve_args():
    flags = parse_serve_args(
        [
            "serve",
            "/models/x",
            "--max_model_len=1M",
            "--enable-chunked-prefill",
            "--no-enable-prefix-caching",
            "--tool-call-parser",
            "glm47",
        ]
    )
    assert flags == {
        "model": "/models/x",
        "max-model-len": "1M",
        "enable-chunked-prefill": True,
        "enable-prefix-caching": False,
        "tool-call-parser": "glm47",
    }


# vLLM 0.32.0 tests/engine/test_arg_utils.py::test_human_readable_model_len, case for case
VLLM_MAX_MODEL_LEN = [
    ("1024", 1024),
    ("1m", 1_000_000),
    ("10k", 10_000),
    ("2g", 2_000_000_000),
    ("2t", 2_000_000_000_000),
    ("3K", 2**10 * 3),
    ("10M", 2**20 * 10),
    ("4G", 2**30 * 4),
    ("4T", 2**40 * 4),
    ("10.2k", 10200),
    ("10.2123451234567k", 10212),
    ("10.2123451234567m", 10212345),
    ("10.2123451234567g", 10212345123),
    ("10.2123451234567t", 10212345123456),
    ("-1", -1),
    ("auto", -1),
    ("AUTO", -1),
    # and the recipe's spellings
    ("1048576", 1048576),
    ("1M", 1048576),
    (" 1M ", 1048576),
    ("1_048_576", 1048576),
]
VLLM_REJECTS = ["1a", "pwd", "10.24", "1.23M", "1.22T", "1.5M", "", "1 M", "1Mi", "0x100000"]


@pytest.mark.parametrize("text, value", VLLM_MAX_MODEL_LEN)
def test_max_model_len_reads_as_vllm_reads_it(text, value):
    assert parse_max_model_len(text) == value


@pytest.mark.parametrize("text", VLLM_REJECTS)
def test_max_model_len_vllm_refuses_is_refused(text):
    with pytest.raises(RejectedValue):
        parse_max_model_len(text)


def test_the_table_is_vllms_own_parser():
    """Where vLLM 0.32 is installed (the reference station's environment), its own function agrees on every row."""
    argparse_utils = pytest.importorskip("vllm.utils.argparse_utils")
    for text, value in VLLM_MAX_MODEL_LEN:
        assert argparse_utils.human_readable_int_or_auto(text) == value, text
    for text in VLLM_REJECTS:
        with pytest.raises((ValueError, argparse.ArgumentTypeError)):  # its refusal, or int()'s
            argparse_utils.human_readable_int_or_auto(text)


def test_findings_show_the_parsed_value():
    assert describe_tokens("1m", 1_000_000) == "1m = 1,000,000 tokens"
    assert describe_tokens("1048576", 1048576) == "1,048,576 tokens"
    assert "fits the context to the GPU memory" in describe_tokens("auto", -1)


SERVED = [  # (argv after the image, flags as vLLM reads them, what vLLM refuses)
    (["--max-model-len", "1m"], {"max-model-len": "1m"}, []),
    (["--max_model_len=1M"], {"max-model-len": "1M"}, []),
    (["--max-model-len", "8k", "--max-model-len", "1M"], {"max-model-len": "1M"}, []),  # last wins
    (["--max-model-len", "-1"], {"max-model-len": "-1"}, []),
    (["--enable-prefix-caching", "--no-enable-prefix-caching"], {"enable-prefix-caching": False}, []),
    (["--no-enable-chunked-prefill", "--enable-chunked-prefill"], {"enable-chunked-prefill": True}, []),
    (
        ["--enable-auto-tool-choice", "--tool-call-parser", "glm47"],
        {"enable-auto-tool-choice": True, "tool-call-parser": "glm47"},
        [],
    ),
    (["--served-model-name", "a", "b", "--port", "8888"], {"served-model-name": "a b", "port": "8888"}, []),
    (
        ["--max-model-len", "1.5M"],
        {"max-model-len": "1.5M"},
        [
            "--max-model-len 1.5M: Decimals are not allowed with binary suffixes like M. "
            "Did you mean to use 1.5m instead?"
        ],
    ),
    (
        ["--enable-prefix-caching=true"],
        {"enable-prefix-caching": True},
        ["--enable-prefix-caching=true: a switch takes no value"],
    ),
    (
        ["/m", "--enable-prefix-caching", "true"],
        {"model": "/m", "enable-prefix-caching": True},
        ["`true`: no flag takes this word"],
    ),
    (["--max-num-seqs", "256.0"], {"max-num-seqs": "256.0"}, ["--max-num-seqs 256.0: not an integer"]),
    (["--gpu-memory-utilization", "94%"], {"gpu-memory-utilization": "94%"}, ["not a number"]),
    # the words after the image with `docker run --entrypoint python3 IMAGE …` (or no ENTRYPOINT in the image)
    (["-m", "vllm.entrypoints.openai.api_server", "--max-model-len", "1m"], {"max-model-len": "1m"}, []),
    (["python3", "-m", "vllm.entrypoints.openai.api_server", "/m"], {"model": "/m"}, []),
    (
        ["python3", "-m", "vllm.entrypoints.cli.main", "serve", "/m", "--port", "8888"],
        {"model": "/m", "port": "8888"},
        [],
    ),
    (["/usr/local/bin/vllm", "serve", "/m"], {"model": "/m"}, []),
    (
        ["python3", "-m", "vllm.entrypoints.openai.api_server", "/m", "/n"],
        {"model": "/m"},
        ["`/n`: no flag takes this word"],
    ),
]


@pytest.mark.parametrize("argv, flags, refused", SERVED, ids=[" ".join(a) for a, _, _ in SERVED])
def test_served_flags_read_as_vllm_reads_them(argv, flags, refused):
    assert parse_serve_args(argv) == flags
    problems = rejected_args(argv)
    assert len(problems) == len(refused), problems
    for problem, fragment in zip(problems, refused, strict=True):
        assert fragment in problem, problem


def test_boolean_flags_are_vllms():
    """The switch table is vLLM 0.32's own parser's, where that parser is installed."""
    pytest.importorskip("vllm.entrypoints.launchers.cli_args")
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser())
    kinds = {a.option_strings[0][2:]: type(a).__name__ for a in parser._actions if a.option_strings}
    assert {n for n, k in kinds.items() if k == "BooleanOptionalAction"} == BOOLEAN_FLAGS
    assert {n for n, k in kinds.items() if k == "_StoreTrueAction"} == STORE_TRUE_FLAGS


@pytest.mark.parametrize("restart", [["--restart", "no"], ["--restart=no"]])
def test_restart_no_is_an_option_not_the_image(restart):
    run = parse_run(["docker", "run", "--name", "v", *restart, "vllm/vllm-openai@sha256:" + "a" * 64, "--port", "1"])
    assert run.values("--restart") == ["no"] and run.image.digest == "sha256:" + "a" * 64


def test_speculative_tokens_from_the_served_flags():
    mtp = parse_serve_args(["--speculative-config", '{"method": "mtp", "num_speculative_tokens": 4}'])
    assert speculative_tokens(mtp) == 4
    assert speculative_tokens(parse_serve_args(['--speculative_config={"num_speculative_tokens": 2}'])) == 2
    assert speculative_tokens(parse_serve_args(["--num-speculative-tokens", "3"])) == 3
    assert speculative_tokens(parse_serve_args(["--model", "/m"])) == 0
    with pytest.raises(FactError, match="--speculative-config is not JSON"):
        speculative_tokens(parse_serve_args(["--speculative-config", "{method: mtp"]))


def test_served_host_defaults_to_every_interface():
    assert served_host(parse_serve_args(["--host", "127.0.0.1"])) == "127.0.0.1"
    assert served_host(parse_serve_args(["--port", "8000"])) == "0.0.0.0"


REPEATED = [  # (served args, the flags given more than once with their values in order, what vLLM serves)
    (
        ["--max-model-len", "1m", "--max-model-len", "1048576"],
        {"max-model-len": ["1m", "1048576"]},
        {"max-model-len": "1048576"},
    ),
    (
        ["--max-model-len=1048576", "--max_model_len", "1m"],
        {"max-model-len": ["1048576", "1m"]},
        {"max-model-len": "1m"},
    ),  # one flag however it is spelled
    (
        ["--enable-prefix-caching", "--no-enable-prefix-caching"],
        {"enable-prefix-caching": [True, False]},
        {"enable-prefix-caching": False},
    ),
    (
        ["--served-model-name", "a", "b", "--served-model-name", "c"],
        {"served-model-name": ["a b", "c"]},
        {"served-model-name": "c"},
    ),
    (["--middleware", "m1", "--middleware", "m2"], {}, {}),  # an append flag keeps both: not a repeat
    (["serve", "/m", "--port", "8888"], {}, {"model": "/m", "port": "8888"}),
]


@pytest.mark.parametrize("args, repeats, served", REPEATED, ids=[" ".join(a) for a, _, _ in REPEATED])
def test_a_flag_given_twice_is_found_and_the_last_wins(args, repeats, served):
    found = repeated_flags(args)
    assert {name: [u.value for u in uses] for name, uses in found.items()} == repeats
    flags = parse_serve_args(args)
    assert {k: flags[k] for k in served} == served
    for uses in found.values():  # the words of each occurrence are the arguments that hold it
        for use in uses:
            assert all(0 <= i < len(args) for i in use.words)


def test_flag_uses_point_at_their_words():
    args = ["serve", "/m", "--max-model-len", "1m", "--port=8888", "--enable-prefix-caching"]
    uses = flag_uses(args)
    assert uses["model"][0].words == (1,) and uses["max-model-len"][0].words == (3,)
    assert uses["port"][0].words == (4,) and uses["enable-prefix-caching"][0].words == (5,)
    [refusal] = refused_args(["--max-model-len", "1.5M"])
    assert refusal.flag == "max-model-len" and refusal.words == (1,)
    python_m = flag_uses(["python3", "-m", "vllm.entrypoints.openai.api_server", "--port", "8888"])
    assert python_m["port"][0].at == 3 and python_m["port"][0].words == (4,)  # words of the whole line


@pytest.fixture(scope="module")
def vllm_parser():
    pytest.importorskip("vllm.entrypoints.launchers.cli_args")
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return make_arg_parser(FlexibleArgumentParser())


def test_the_last_of_a_repeated_flag_wins_in_vllms_parser(vllm_parser):
    """Where vLLM 0.32 is installed: its parser serves what parse_serve_args says for every repeat above, and its one
    append flag is APPEND_FLAGS."""
    for args, _, served in REPEATED:
        namespace = vllm_parser.parse_args([a for a in args if a not in ("serve", "/m")])
        for flag, value in served.items():
            if flag == "model":
                continue
            got = getattr(namespace, flag.replace("-", "_"))
            want = {"1m": 1_000_000, "1048576": 1048576, "8888": 8888, "c": ["c"]}.get(value, value)
            assert got == want, (args, flag)
    kinds = {a.option_strings[0][2:]: type(a).__name__ for a in vllm_parser._actions if a.option_strings}
    assert {n for n, k in kinds.items() if k == "_AppendAction"} == APPEND_FLAGS


# --- vLLM 0.32's --config FILE (FlexibleArgumentParser._pull_args_from_config, load_config_file) -----------------


def test_a_config_file_gives_flags_the_command_line_overrides():
    """command line over file over defaults: the file's flags go first (after a model given first), so a flag on the
    command line wins; each word from the file knows its line."""
    from golive.facts.vllm import ConfigWord, config_file, with_config

    args = ["--model", "/m", "--config", "/etc/v.yaml", "--max-num-seqs", "8"]
    text = "max-num-seqs: 4\nmax_model_len: 1m\nenable-prefix-caching: false\nserved-model-name: [a, b]\n"
    assert config_file(args) == "/etc/v.yaml"
    read = with_config(args, text, "/etc/v.yaml")
    flags = parse_serve_args(read)
    assert flags["max-num-seqs"] == "8" and flags["max-model-len"] == "1m" and flags["enable-prefix-caching"] is False
    [word] = [w for w in read if w == "1m"]
    assert isinstance(word, ConfigWord) and word.where == "/etc/v.yaml:2"
    assert config_file(["--config=/etc/v.yaml"]) is None  # vLLM reads the file only after the word `--config`


def test_a_config_file_vllm_refuses():
    from golive.facts.vllm import RejectedValue, with_config

    with pytest.raises(RejectedValue, match="only a .yaml/.yml file"):
        with_config(["--config", "/etc/v.json"], "{}", "/etc/v.json")
    with pytest.raises(RejectedValue, match="holds no YAML mapping"):
        with_config(["--config", "/etc/v.yaml"], "- a\n", "/etc/v.yaml")


def test_vllm_reads_short_aliases_prefixes_and_refuses_unknown_options():
    """vLLM 0.32's own option table: `-tp 2` is --tensor-parallel-size, a unique prefix is its option (argparse
    allow_abbrev), an option it has not is refused, and every occurrence of a value is converted."""
    flags = parse_serve_args(["-tp", "2", "--max-num-seq", "4", "-O3"])
    assert flags == {"tensor-parallel-size": "2", "max-num-seqs": "4", "optimization-level": "3"}
    assert any("no such option" in r for r in rejected_args(["--max-num-sequences", "4"]))
    assert any("not an integer" in r for r in rejected_args(["--max-num-seqs", "1.5", "--max-num-seqs", "4"]))
