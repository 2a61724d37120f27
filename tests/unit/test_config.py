"""Profiles and inventories: extends, overrides, and one-line errors with file:line."""

from pathlib import Path

import pytest

from golive.site.loader import ConfigError, load_inventory, load_profile, shipped_profiles

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def error_of(fn, *args) -> str:
    with pytest.raises(ConfigError) as info:
        fn(*args)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def test_shipped_profiles_carry_the_recipes():
    assert {"glm-5.3-flash-gb300", "glm-5.3-2x-station-tp2"} <= set(shipped_profiles())
    flash = load_profile("glm-5.3-flash-gb300").profile
    vllm = flash.vllm
    assert (vllm.max_model_len, vllm.max_num_seqs, vllm.gpu_memory_utilization) == (1048576, 256, 0.94)
    assert (flash.vllm.tool_call_parser, flash.vllm.reasoning_parser, flash.vllm.port) == ("glm47", "glm45", 8888)
    assert flash.service is not None
    assert (flash.service.start_limit_burst, flash.service.restart_sec_s) == (3, 60)
    tp2 = load_profile("glm-5.3-2x-station-tp2").profile
    assert (tp2.vllm.tensor_parallel_size, tp2.checkpoint.shard_count, tp2.vllm.max_model_len) == (2, 50, 98304)
    assert tp2.checkpoint.architecture == "GlmMoeDsaForCausalLM" and tp2.service is None


def test_site_profile_extends_and_overrides(tmp_path):
    site = write(tmp_path, "site.yaml", "extends: glm-5.3-flash-gb300\nvllm:\n  max_num_seqs: 64\n")
    loaded = load_profile(site)
    assert loaded.profile.vllm.max_num_seqs == 64 and loaded.profile.vllm.max_model_len == 1048576
    assert [p.name for p in loaded.files] == ["glm-5.3-flash-gb300.yaml", "site.yaml"]


def test_extends_chain_of_files(tmp_path):
    write(tmp_path, "a.yaml", "extends: glm-5.3-flash-gb300\nvllm:\n  port: 9000\n")
    b = write(tmp_path, "b.yaml", "extends: a.yaml\nvllm:\n  max_num_seqs: 8\n")
    vllm = load_profile(b).profile.vllm
    assert (vllm.port, vllm.max_num_seqs) == (9000, 8)


def test_typo_names_line_and_closest_key(tmp_path):
    site = write(tmp_path, "site.yaml", "extends: glm-5.3-flash-gb300\nvllm:\n  max_num_seq: 64\n")
    assert error_of(load_profile, site) == f"{site}:3: unknown key 'vllm.max_num_seq'; did you mean 'max_num_seqs'?"


def test_wrong_type_names_expected_type(tmp_path):
    site = write(tmp_path, "site.yaml", "extends: glm-5.3-flash-gb300\nvllm:\n\n  max_model_len: lots\n")
    assert error_of(load_profile, site) == f"{site}:4: 'vllm.max_model_len': expected integer (got 'lots')"


def test_error_in_base_points_into_the_site_file_when_overridden(tmp_path):
    base = write(tmp_path, "base.yaml", "extends: glm-5.3-flash-gb300\n")
    site = write(tmp_path, "site.yaml", f"extends: {base}\ngpu:\n  per_station: two\n")
    assert error_of(load_profile, site).startswith(f"{site}:3: 'gpu.per_station': expected integer")


def test_yaml_syntax_error(tmp_path):
    bad = write(tmp_path, "bad.yaml", "profile: x\nstations:\n  - {name: a\n")
    assert error_of(load_inventory, bad).startswith(f"{bad}:4: YAML syntax error")


def test_missing_file(tmp_path):
    assert error_of(load_inventory, tmp_path / "nope.yaml") == f"{tmp_path / 'nope.yaml'}: file not found"


def test_unknown_profile_name_in_inventory(tmp_path):
    inv = write(tmp_path, "inv.yaml", "stations:\n  - {name: a}\nprofile: glm-5.3-flash\n")
    assert error_of(load_inventory, inv) == (
        f"{inv}:3: unknown profile 'glm-5.3-flash'; did you mean 'glm-5.3-flash-gb300'?"
    )


def test_inventory_station_typo_and_bad_enum(tmp_path):
    inv = write(tmp_path, "inv.yaml", "profile: glm-5.3-flash-gb300\nstations:\n  - name: a\n    hots: local://\n")
    assert error_of(load_inventory, inv) == f"{inv}:4: unknown key 'stations.0.hots'; did you mean 'host'?"
    inv2 = write(tmp_path, "inv2.yaml", "profile: glm-5.3-flash-gb300\nstations:\n  - name: a\n    phase: live\n")
    assert error_of(load_inventory, inv2).startswith(f"{inv2}:4: 'stations.0.phase': input should be 'serving' or")


def test_duplicate_station_and_duplicate_key(tmp_path):
    inv = write(tmp_path, "inv.yaml", "profile: glm-5.3-flash-gb300\nstations:\n  - {name: a}\n  - {name: a}\n")
    assert error_of(load_inventory, inv) == f"{inv}:4: station name 'a' is used twice"
    dup = write(tmp_path, "dup.yaml", "profile: x\nprofile: y\nstations: []\n")
    assert error_of(load_inventory, dup) == f"{dup}:2: duplicate key 'profile'"


def test_extends_loop(tmp_path):
    a = write(tmp_path, "a.yaml", "extends: b.yaml\n")
    write(tmp_path, "b.yaml", "extends: a.yaml\n")
    assert "loops back" in error_of(load_profile, a)


def test_bad_digest_pattern(tmp_path):
    site = write(tmp_path, "s.yaml", "extends: glm-5.3-flash-gb300\nimage:\n  digest: nightly\n")
    assert error_of(load_profile, site).startswith(f"{site}:3: 'image.digest': string should match pattern")


def test_chroot_spec_relative_to_inventory(tmp_path):
    inv = write(
        tmp_path,
        "inv.yaml",
        "profile: glm-5.3-flash-gb300\nstations:\n"
        "  - {name: a, host: 'chroot://trees/a'}\n  - {name: b, host: 'ssh://b'}\n",
    )
    loaded = load_inventory(inv)
    a, b = loaded.inventory.stations
    assert loaded.host_spec(a) == f"chroot://{tmp_path}/trees/a" and loaded.host_spec(b) == "ssh://b"
