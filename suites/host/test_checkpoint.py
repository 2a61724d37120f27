"""The checkpoint on disk: every shard, the right config, room to keep it [000][002]."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from golive.checklist import Cost, check
from golive.core.verdict import require
from golive.profile.origins import Field, sourced
from golive.profile.recipe import dram_node

if TYPE_CHECKING:
    from golive.profile.schema import Profile
    from golive.run.fixtures import RecordProvenance
    from golive.station.host import StationFacts

pytestmark = pytest.mark.host
SIZE_TOLERANCE = 0.05  # shards of another quantization differ by far more; one missing shard of 40 by 2.5 %


def _expected_shards(facts: StationFacts, profile: Profile) -> tuple[list[str], str]:
    count = profile.checkpoint.shard_count
    if count:
        names = [f"model-{i:05d}-of-{count:05d}.safetensors" for i in range(1, count + 1)]
        return names, f"the profile ({count} shards)"
    index = facts.checkpoint_json("model.safetensors.index.json")
    require(
        index is not None and isinstance(index.get("weight_map"), dict),
        found=f"{facts.checkpoint_dir}/model.safetensors.index.json is missing or has no weight_map",
        recipe="the checkpoint's index names every shard; the profile pins no shard count",
        fix=f"re-download the checkpoint (under `numactl --membind={dram_node(profile)}`) or set "
        f"checkpoint.shard_count in the profile",
    )
    assert index is not None  # require() ended the check otherwise
    return sorted(set(index["weight_map"].values())), "model.safetensors.index.json"


@check("host.checkpoint.shards_complete", Cost.READ)
def test_checkpoint_shards_complete(facts: StationFacts, profile: Profile, record_provenance: RecordProvenance) -> None:
    """Every shard the checkpoint names is present and non-empty, none is extra, and together they make the
    checkpoint's {checkpoint.size_gb} GB [002][000]."""
    expected, source = _expected_shards(facts, profile)
    present = {s.name: s.size for s in facts.shards}
    record_provenance(checkpoint_manifest_sha256=facts.shard_manifest_sha256)
    missing = [name for name in expected if name not in present]
    empty = [name for name in expected if present.get(name) == 0]
    extra = [name for name in present if name not in expected and re.match(r"model-\d+-of-\d+", name)]
    problems = []
    if missing:
        problems.append(f"{len(missing)} missing ({', '.join(missing[:5])}{' …' if len(missing) > 5 else ''})")
    if empty:
        problems.append(f"{len(empty)} empty ({', '.join(empty[:5])})")
    if extra:
        problems.append(f"{len(extra)} not in {source} ({', '.join(extra[:5])})")
    total_gb, want_gb = sum(present.values()) / 1e9, profile.checkpoint.size_gb
    if abs(total_gb - want_gb) > SIZE_TOLERANCE * want_gb:
        problems.append(
            f"{total_gb:.0f} GB of shards, the recipe's checkpoint is {want_gb:g} GB (±{SIZE_TOLERANCE:.0%})"
        )
    require(
        not problems,
        found=f"{facts.checkpoint_dir}: {len(present)} shards on disk, {len(expected)} expected by {source}: "
        + "; ".join(problems),
        recipe="the layout check passes (every shard named by the checkpoint, none extra) before launch: a bad "
        "shard on one rank looks like an NCCL timeout or a CUDA error [002]",
        fix=f"re-download the missing shards into {facts.checkpoint_dir} (`numactl --membind={dram_node(profile)} "
        f"huggingface-cli download {profile.checkpoint.repository}`), then compare file lists across stations",
    )


@check("host.checkpoint.config_matches_profile", Cost.READ)
def test_checkpoint_config_matches_profile(
    facts: StationFacts, profile: Profile, record_provenance: RecordProvenance
) -> None:
    """The checkpoint's config.json parses with the architecture and quantization fields the profile pins for
    {checkpoint.repository} [002][000]."""
    config = facts.checkpoint_json("config.json")
    record_provenance(
        checkpoint_config_sha256=facts.checkpoint_sha256("config.json"),
        checkpoint_index_sha256=facts.checkpoint_sha256("model.safetensors.index.json"),
    )
    require(
        config is not None,
        found=f"{facts.checkpoint_dir}/config.json does not exist",
        recipe="config.json parses with the expected architecture and quantization fields [002]",
        fix=f"re-download {profile.checkpoint.repository}",
    )
    assert config is not None  # require() ended the check otherwise
    quant = config.get("quantization_config") or {}
    hf_quant = facts.checkpoint_json("hf_quant_config.json") or {}
    quant_algo = quant.get("quant_algo") or (hf_quant.get("quantization") or {}).get("quant_algo")
    kv_algo = quant.get("kv_cache_quant_algo") or (hf_quant.get("quantization") or {}).get("kv_cache_quant_algo")
    c = profile.checkpoint
    checks = [
        ("architectures", c.architecture, (config.get("architectures") or [None])[0]),
        ("quant_algo", c.quant_algo, quant_algo),
        ("kv_cache_quant_algo", c.kv_cache_quant_algo, kv_algo),
    ]
    field_of: dict[str, Field[Profile]] = {
        "architectures": lambda p: p.checkpoint.architecture,
        "quant_algo": lambda p: p.checkpoint.quant_algo,
        "kv_cache_quant_algo": lambda p: p.checkpoint.kv_cache_quant_algo,
    }
    wrong = [f"{name} {got!r}, expected {want!r}" for name, want, got in checks if want is not None and got != want]
    require(
        not wrong,
        found=f"{facts.checkpoint_dir}/config.json: " + "; ".join(wrong),
        recipe=f"{c.repository}: " + sourced(profile, *[(field_of[n], f"{n} {w}") for n, w, _ in checks if w]),
        fix=f"this is not the recipe's checkpoint: download {c.repository}"
        + (f" at revision {c.revision}" if c.revision else "")
        + " and point the unit at it",
    )


@check("host.checkpoint.fits_on_disk", Cost.READ)
def test_checkpoint_disk_space(facts: StationFacts, profile: Profile) -> None:
    """The checkpoint fits: bytes already on disk plus free space cover the recipe's {checkpoint.disk_need_gb} GB
    [002][000]."""
    have = sum(s.size for s in facts.shards)
    free = facts.free_bytes(facts.checkpoint_dir)
    need = profile.checkpoint.disk_need_gb * 1e9
    require(
        have + free >= need,
        found=f"{facts.checkpoint_dir}: {have / 1e9:.0f} GB of shards + {free / 1e9:.0f} GB free "
        f"= {(have + free) / 1e9:.0f} GB",
        recipe=sourced(
            profile,
            (
                lambda p: p.checkpoint.disk_need_gb,
                f"at least {profile.checkpoint.disk_need_gb:g} GB for the checkpoint alone",
            ),
        ),
        fix="free space on that filesystem or move the checkpoint to a larger disk (copy under "
        f"`numactl --membind={dram_node(profile)}`, then drop caches)",
    )
