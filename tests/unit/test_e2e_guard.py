"""CI cannot pass on skipped layers: the preflight names what is missing in one line, and GOLIVE_REQUIRE_E2E=1 turns an
end-to-end skip into a failure (tests/e2e.py, .ci/run)."""

import os

import e2e
import pytest


def test_a_required_layer_fails_instead_of_skipping(monkeypatch):
    monkeypatch.setattr(e2e, "REQUIRE_E2E", True)
    with pytest.raises(pytest.fail.Exception, match="GOLIVE_REQUIRE_E2E=1 and station trees need root"):
        e2e.skip_e2e("station trees need root")
    monkeypatch.setattr(e2e, "REQUIRE_E2E", False)
    with pytest.raises(pytest.skip.Exception, match="station trees need root"):
        e2e.skip_e2e("station trees need root")


def test_preflight_without_root_is_one_line_and_exit_1(monkeypatch, capsys):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert e2e.main() == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ci: cannot run the root-only end-to-end tests"), err
    assert "chroot, which needs root" in err and "network-namespace test hosts need root" in err, err


def test_preflight_passes_silently_where_the_layers_can_run(capsys):
    if os.geteuid() != 0:
        e2e.skip_e2e("the passing direction needs root, as CI has")
    assert e2e.main() == 0 and capsys.readouterr().err == ""
