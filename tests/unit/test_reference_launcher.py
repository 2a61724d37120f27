"""The reference station's start-up failures end in what to do."""

from golive_testbed.reference import launcher


def test_torchvision_operator_error_ends_in_the_one_line_fix(tmp_path):
    log = tmp_path / "vllm.log"
    log.write_text(
        "INFO loading model\n"
        "RuntimeError: operator torchvision::nms does not exist\n"
        "ERROR Engine core initialization failed\n"
    )
    station = launcher.ReferenceStation(port=1, log_path=log, model_dir=tmp_path)
    message = str(station._error("vLLM exited with code 1 after 9 s"))
    assert "RuntimeError: operator torchvision::nms does not exist" in message
    assert message.splitlines()[-1] == "pip uninstall -y torchvision torchaudio torchcodec"


def test_extra_flags_and_env_go_over_the_variant(tmp_path):
    station = launcher.ReferenceStation(
        port=1,
        model_dir=tmp_path,
        variant="max-model-len-differs",
        flags={"--max-model-len": "1048576", "--hf-overrides": '{"a": 1}'},
        env={"VLLM_CPU_KVCACHE_SPACE": "3"},
    )
    command = station.command()
    assert command.count("--max-model-len") == 1 and command[command.index("--max-model-len") + 1] == "1048576"
    assert command[command.index("--hf-overrides") + 1] == '{"a": 1}'
    assert station.environment()["VLLM_CPU_KVCACHE_SPACE"] == "3"
