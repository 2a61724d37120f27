"""docker run lines, docker inspect (Engine API shape), vLLM serve args."""
import json

import pytest

from golive.facts import FactError
from golive.facts.docker import ImageRef, parse_container_inspect, parse_image_inspect, parse_run
from golive.facts.vllm import parse_human_int, parse_serve_args, served_host, speculative_tokens

RUN = ["/usr/bin/docker", "run", "--name", "glm53-flash", "--gpus", "all", "--ipc=host", "-it", "--rm",
       "-v", "/srv/models:/models:ro", "--cpuset-mems", "0", "vllm/vllm-openai@sha256:" + "a" * 64,
       "--model", "/models/x", "--enable-prefix-caching"]


def test_run_splits_options_image_args():
    run = parse_run(RUN)
    assert run.image.repository == "vllm/vllm-openai" and run.image.digest == "sha256:" + "a" * 64
    assert run.values("--cpuset-mems") == ["0"] and run.values("--ipc") == ["host"]
    assert ("-i", None) in run.options and ("--rm", None) in run.options
    assert run.args == ["--model", "/models/x", "--enable-prefix-caching"]


def test_run_without_image():
    with pytest.raises(FactError, match="no image"):
        parse_run(["docker", "run", "--name", "x"])


@pytest.mark.parametrize("ref,repo,tag,digest", [
    ("vllm/vllm-openai:nightly-aarch64", "vllm/vllm-openai", "nightly-aarch64", None),
    ("registry:5000/vllm/vllm-openai", "registry:5000/vllm/vllm-openai", None, None),
    ("vllm/vllm-openai:v0.30.0@sha256:ab", "vllm/vllm-openai", "v0.30.0", "sha256:ab")])
def test_image_refs(ref, repo, tag, digest):
    parsed = ImageRef.parse(ref)
    assert (parsed.repository, parsed.tag, parsed.digest) == (repo, tag, digest)


INSPECT = [{"Id": "b054f115" + "0" * 56, "Name": "/glm53-flash", "Image": "sha256:" + "c" * 64,
            "Path": "vllm", "Args": ["serve", "--port", "8888"],
            "Config": {"Image": "vllm/vllm-openai@sha256:" + "a" * 64, "Cmd": ["--port", "8888"]},
            "State": {"Status": "running", "Running": True, "Pid": 41873},
            "HostConfig": {"RestartPolicy": {"Name": "no", "MaximumRetryCount": 0}, "CpusetMems": ""}}]


def test_container_inspect():
    c = parse_container_inspect(json.dumps(INSPECT))
    assert (c.name, c.running, c.pid, c.restart_policy, c.args[0]) == ("glm53-flash", True, 41873, "no", "serve")


def test_inspect_not_json():
    with pytest.raises(FactError, match="did not print JSON"):
        parse_container_inspect("Error: No such object: glm53-flash")


def test_image_inspect_digests():
    image = parse_image_inspect(json.dumps([{"Id": "sha256:c", "RepoDigests": ["vllm/vllm-openai@sha256:aa"],
                                              "Architecture": "arm64"}]))
    assert image.digests() == {"sha256:aa"} and image.architecture == "arm64"


def test_serve_args():
    flags = parse_serve_args(["serve", "/models/x", "--max_model_len=1M", "--enable-chunked-prefill",
                              "--no-enable-prefix-caching", "--tool-call-parser", "glm47"])
    assert flags == {"model": "/models/x", "max-model-len": "1M", "enable-chunked-prefill": True,
                     "enable-prefix-caching": False, "tool-call-parser": "glm47"}


@pytest.mark.parametrize("text,value", [("1048576", 1048576), ("1M", 1048576), ("1m", 1000000), ("128k", 128000)])
def test_human_ints(text, value):
    assert parse_human_int(text) == value


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
