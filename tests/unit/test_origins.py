"""Where each profile value came from (golive/profile/origins.py): the recipe a shipped profile transcribes, or the
site profile's file, line and key; and what a unit's settings do (golive/profile/recipe.py, which the unit checks
and capture share)."""

from pathlib import Path

import pytest

from golive.core.verdict import Finding, cite
from golive.profile.origins import field_path, origin, section, sourced
from golive.profile.recipe import restart_does, start_limit_does
from golive.profile.schema import Profile
from golive.profile.yamlfile import load_yaml
from golive.site.loader import PROFILES_DIR, load_profile

SHIPPED = PROFILES_DIR / "glm-5.3-flash-gb300.yaml"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_shipped_value_cites_its_lines_recipe_tags():
    profile = load_profile("glm-5.3-flash-gb300").profile
    assert origin(profile, lambda p: p.service.start_limit_burst) == "[000]"  # its own line: `… stays down [000]`
    assert origin(profile, lambda p: p.service.restart_sec_s) == "[000]"  # no comment: the `service:` line's [000]
    assert origin(profile, lambda p: p.numa.hbm_file_pages_ceiling_mib) == "[000][001]"
    # no tag on its line or its section: the file's own sources
    assert origin(profile, lambda p: p.gpu.idle_hbm_used_ceiling_mib) == "[000][001]"
    assert cite(origin(profile, lambda p: p.service.restart)) == "[single-station recipe]"
    assert origin(load_profile("glm-5.3-2x-station-tp2").profile, lambda p: p.cluster.mtu) == "[002]"


def test_a_site_value_names_its_file_line_and_key(tmp_path):
    site = write(
        tmp_path,
        "site.yaml",
        "extends: glm-5.3-flash-gb300\n# a comment line\nservice:\n"
        "  unit: glm53-flash.service\n  restart_sec_s: 30   # our crash logs [000]\n",
    )
    profile = load_profile(site).profile
    assert (
        origin(profile, lambda p: p.service.restart_sec_s) == f"[site profile {site.resolve()}:5 service.restart_sec_s]"
    )
    assert origin(profile, lambda p: p.service.unit) == f"[site profile {site.resolve()}:4 service.unit]"
    # inherited through extends: the recipe's, though the site file has a `service:` section of its own
    assert origin(profile, lambda p: p.service.start_limit_burst) == "[000]"
    assert origin(profile, lambda p: p.vllm.max_model_len) == "[000][001]"


def test_a_value_inherited_through_a_chain_of_site_files_names_the_file_that_set_it(tmp_path):
    base = write(tmp_path, "fleet.yaml", "extends: glm-5.3-flash-gb300\nservice:\n  restart_sec_s: 90\n")
    site = write(tmp_path, "site.yaml", f"extends: {base}\nvllm:\n  max_num_seqs: 64\n")
    profile = load_profile(site).profile
    assert (
        origin(profile, lambda p: p.service.restart_sec_s) == f"[site profile {base.resolve()}:3 service.restart_sec_s]"
    )
    assert origin(profile, lambda p: p.vllm.max_num_seqs) == f"[site profile {site.resolve()}:3 vllm.max_num_seqs]"
    assert origin(profile, lambda p: p.service.restart) == "[000]"


def test_a_site_section_that_replaces_a_list_is_the_sites(tmp_path):
    site = write(
        tmp_path, "site.yaml", "extends: glm-5.3-flash-gb300\nload:\n  concurrency: [1, 8]\n  gate_concurrency: 8\n"
    )
    profile = load_profile(site).profile
    assert origin(profile, lambda p: p.load.concurrency) == f"[site profile {site.resolve()}:3 load.concurrency]"


def test_a_value_no_file_sets_is_golives_default_and_a_profile_built_in_code_cites_its_sources(tmp_path):
    shipped = load_profile("glm-5.3-flash-gb300").profile
    assert (
        origin(shipped, lambda p: p.host.connect_timeout_s)
        == "[golive's default: host.connect_timeout_s is set in no profile file]"
    )
    in_code = Profile.model_validate(load_yaml(SHIPPED).data)
    assert in_code.origins is None and origin(in_code, lambda p: p.service.restart_sec_s) == "[000][001]"


def test_a_field_the_schema_does_not_have_is_an_error():
    profile = load_profile("glm-5.3-flash-gb300").profile
    with pytest.raises(KeyError, match="service.restart_secs"):
        origin(profile, lambda p: p.service.restart_secs)
    origin(
        profile, lambda p: p.cluster.env["NCCL_IB_HCA"]
    )  # inside a mapping value any key is a field (no section here)


def test_a_field_is_one_access_from_the_profile():
    """The lambda is read once, on a recorder: the path is what it reads, and anything but one access is refused."""
    assert field_path(lambda p: p.load.prefill.floors_tok_s) == ("load", "prefill", "floors_tok_s")
    assert field_path(lambda p: section(p.service).restart_sec_s) == ("service", "restart_sec_s")
    assert field_path(lambda p: p.cluster.env["NCCL_IB_HCA"]) == ("cluster", "env", "NCCL_IB_HCA")
    profile = load_profile("glm-5.3-flash-gb300").profile
    for wrong in (lambda p: p, lambda p: "service.restart_sec_s", lambda p: (p.service.restart, p.service.unit)):
        with pytest.raises(TypeError, match="one access from the profile"):
            origin(profile, wrong)


def test_sourced_cites_once_when_every_value_has_one_origin_else_each(tmp_path):
    parts = (
        (lambda p: p.service.restart, "Restart=on-failure"),
        (lambda p: p.service.restart_sec_s, "RestartSec=60 s"),
    )
    assert sourced(load_profile("glm-5.3-flash-gb300").profile, *parts) == "Restart=on-failure, RestartSec=60 s [000]"
    site = write(tmp_path, "site.yaml", "extends: glm-5.3-flash-gb300\nservice:\n  restart_sec_s: 60\n")
    mixed = sourced(load_profile(site).profile, *parts)
    assert mixed == (
        f"Restart=on-failure [000], RestartSec=60 s [site profile {site.resolve()}:3 service.restart_sec_s]"
    )
    # in a finding, the recipe tag is named and listed as a source; the site profile stays as written
    finding = Finding("x", mixed, "y")
    assert finding.recipe.startswith("Restart=on-failure [single-station recipe], RestartSec=60 s [site profile ")
    assert finding.sources == ["single-station recipe"]


def test_line_comments_are_kept_and_a_hash_inside_a_value_is_not_one(tmp_path):
    located = load_yaml(
        write(
            tmp_path,
            "p.yaml",
            'a:   # section [000]\n  b: 1  # own [001]\n  c: "x # y"\n  d: it\'s  # plain [002]\n  e: {f: 1}  # flow\n',
        )
    )
    assert located.comments == {
        ("a",): "section [000]",
        ("a", "b"): "own [001]",
        ("a", "d"): "plain [002]",
        ("a", "e"): "flow",
    }


@pytest.mark.parametrize(
    "restart, seconds, says",
    [
        ("no", 60, "Restart=no: systemd never restarts it, so after a crash the station stays down"),
        ("always", 60, "Restart=always: systemd restarts it however it ends, a clean exit included"),
        ("on-abnormal", 60, "not after an exit code other than 0, so a vLLM that exits with an error stays down"),
        (
            "on-failure",
            0,
            "RestartSec=0: systemd restarts it at once after a crash, no delay between attempts (a crash "
            "loop with no pause)",
        ),
        (
            "on-failure",
            0.1,
            "RestartSec=0.1: systemd restarts it 0.1 s after a crash (a crash loop with next to no pause)",
        ),
    ],
)
def test_a_restart_setting_that_switches_a_safety_off_says_so(restart, seconds, says):
    assert says in "; ".join(restart_does(restart, seconds))


def test_the_recipes_restart_settings_say_nothing():
    assert restart_does("on-failure", 60) == [] and restart_does("on-failure", 10) == []
    assert restart_does("no", 0) == [restart_does("no", 60)[0]]  # never restarted: the delay does not matter
    assert restart_does("always", 60, wanted="always") == []  # what a site profile wants is not a finding


@pytest.mark.parametrize(
    "burst, interval, says",
    [
        (3, 0, "StartLimitIntervalSec=0 switches the start limit off (systemd.unit(5): 0 disables rate limiting)"),
        (
            0,
            3600,
            "StartLimitBurst=0 switches the start limit off (systemd applies a start limit only with an interval "
            "and a burst above 0)",
        ),
        (3, float("inf"), "StartLimitIntervalSec=infinity counts every start the unit ever makes: after 3 starts"),
        (
            5,
            10,
            "the cap never triggers: with RestartSec=60 s, 5 restarts take at least 300 s, longer than "
            "StartLimitIntervalSec=10 s",
        ),
    ],
)
def test_a_start_limit_that_never_stops_a_crash_loop_says_so(burst, interval, says):
    [said] = start_limit_does(burst, interval, 60)
    assert says in said


def test_a_start_limit_that_caps_a_crash_loop_says_nothing():
    assert start_limit_does(3, 3600, 60) == [] and start_limit_does(5, 3600, 60) == []
    assert start_limit_does(5, 10, 0.1) == []  # systemd's defaults with its default delay: the cap triggers
