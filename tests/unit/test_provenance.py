"""Station provenance recorded for results.json: served flags travel, secrets do not."""


def test_provenance_never_carries_secret_flag_values():
    from golive.core.secrets import redacted_flags

    served = {"api-key": "sk-live-123", "hf-token": "hf_abc", "tool-call-parser": "glm47", "port": "8888"}
    assert redacted_flags(served) == {
        "api-key": "[REDACTED]",
        "hf-token": "[REDACTED]",
        "tool-call-parser": "glm47",
        "port": "8888",
    }
