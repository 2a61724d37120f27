"""Station trees: directories laid out like a station's filesystem, for golive's host checks to run against.

A tree is reached through testinfra's chroot backend (`chroot <tree> /bin/sh -c CMD`), so besides the station's
files it needs a shell and shell tools (busybox-static, linked in by applet name) and, for the commands a tree
cannot really run (systemctl, docker, nvidia-smi), stub scripts that print recorded outputs; those live in the
committed trees themselves (see fixtures/stations/README.md).

Sources, under fixtures/stations/:
  gb300-healthy/            a base tree, committed literally (any top-level directory except variants/ is a base)
  variants/<name>/          variant.yaml (base, phase, breaks, why, delete, modes) + only the files that differ

Built trees go to fixtures/stations/.built/<name>/ (git-ignored). Building copies the base chain, applies each
overlay (deletions first, then files), installs busybox, and creates the checkpoint shards listed in every
shards.manifest as sparse files (the real sizes, no data: 191 GB of weights that take no disk). A tree whose
sources did not change since its last build is left alone.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]  # the checkout: testbed/golive_testbed/targets.py
DEFAULT_SRC = REPO / "fixtures" / "stations"
DEFAULT_DEST = DEFAULT_SRC / ".built"
BUSYBOX = Path("/bin/busybox")
VARIANTS_DIR = "variants"
PHASES = ("serving", "pre-start")
HASH_FILE = ".golive-source-hash"  # in each built tree; its presence also marks a directory this module may replace
MANIFEST = "shards.manifest"
# Bump when the build itself changes, so that trees built by an older builder are rebuilt.
BUILDER_VERSION = "2"

# What the host checks and testinfra's modules call inside a tree. Only applets the installed busybox has are linked.
APPLETS = [
    "sh",
    "ash",
    "cat",
    "ls",
    "stat",
    "grep",
    "egrep",
    "fgrep",
    "sed",
    "awk",
    "test",
    "[",
    "[[",
    "find",
    "head",
    "tail",
    "wc",
    "df",
    "du",
    "sha256sum",
    "md5sum",
    "readlink",
    "realpath",
    "date",
    "mkdir",
    "echo",
    "printf",
    "env",
    "sort",
    "uniq",
    "cut",
    "tr",
    "true",
    "false",
    "timeout",
    "xargs",
    "basename",
    "dirname",
    "uname",
    "id",
    "which",
    "expr",
    "seq",
    "tee",
    "sleep",
    "touch",
    "rm",
    "cp",
    "mv",
    "ln",
    "chmod",
    "od",
    "hexdump",
    "xxd",
    "diff",
    "cmp",
    "tac",
    "nproc",
    "hostname",
    "whoami",
    "mktemp",
    "sync",
]


class TargetsError(Exception):
    """A station tree cannot be built; str() says what to fix."""


@dataclass(frozen=True)
class Variant:
    name: str
    base: str
    phase: str
    breaks: str | None  # the one host test expected to fail; None for a healthy variant
    why: str
    delete: tuple[str, ...] = ()
    modes: tuple[tuple[str, int], ...] = ()  # (path, permission bits) set after the overlay: a mode-only change
    # (path, seconds since the epoch) set as the file's modification time after the overlay: when a log was written
    mtimes: tuple[tuple[str, float], ...] = ()


# --- sources ---------------------------------------------------------------------------------------------------------


def base_trees(src: Path = DEFAULT_SRC) -> list[str]:
    """Names of the committed base trees: every top-level directory except variants/ and hidden ones."""
    return sorted(p.name for p in src.iterdir() if p.is_dir() and p.name != VARIANTS_DIR and not p.name.startswith("."))


def load_variants(src: Path = DEFAULT_SRC) -> list[Variant]:
    """Every variant under src/variants, validated; sorted by name."""
    vdir = src / VARIANTS_DIR
    if not vdir.is_dir():
        return []
    variants = [_load_variant(d) for d in sorted(vdir.iterdir()) if d.is_dir()]
    names = set(base_trees(src)) | {v.name for v in variants}
    for v in variants:
        if v.base not in names:
            raise TargetsError(
                f"{vdir / v.name / 'variant.yaml'}: base '{v.base}' is neither a base tree nor a variant"
            )
        if v.name in base_trees(src):
            raise TargetsError(f"{vdir / v.name}: a variant may not have the name of a base tree")
    by_name = {v.name: v for v in variants}
    for v in variants:  # a chain of bases must end at a base tree
        seen = [v.name]
        while seen[-1] in by_name:
            nxt = by_name[seen[-1]].base
            if nxt in seen:
                raise TargetsError(f"variant bases form a cycle: {' -> '.join(seen + [nxt])}")
            seen.append(nxt)
    return variants


def _load_variant(d: Path) -> Variant:
    f = d / "variant.yaml"
    try:
        data = yaml.safe_load(f.read_text())
    except FileNotFoundError:
        raise TargetsError(f"{d}: no variant.yaml") from None
    except yaml.YAMLError as exc:
        raise TargetsError(f"{f}: YAML error: {exc}") from None
    if not isinstance(data, dict):
        raise TargetsError(f"{f}: must be a mapping")
    unknown = set(data) - {"base", "phase", "breaks", "why", "delete", "modes", "mtimes"}
    if unknown:
        raise TargetsError(f"{f}: unknown key(s): {', '.join(sorted(unknown))}")
    for key in ("base", "phase", "why"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise TargetsError(f"{f}: '{key}' must be a non-empty string")
    if data["phase"] not in PHASES:
        raise TargetsError(f"{f}: phase must be one of {', '.join(PHASES)}, not '{data['phase']}'")
    breaks = data.get("breaks")
    if breaks is not None and not (isinstance(breaks, str) and breaks.startswith("test_")):
        raise TargetsError(f"{f}: 'breaks' must be a test name (test_...) or null")
    delete = data.get("delete") or []
    if not isinstance(delete, list) or not all(isinstance(p, str) for p in delete):
        raise TargetsError(f"{f}: 'delete' must be a list of paths")
    for p in delete:
        if p.startswith("/") or ".." in Path(p).parts or not p.strip():
            raise TargetsError(f"{f}: delete path '{p}' must be relative to the tree, without '..'")
    modes = data.get("modes") or {}
    if not isinstance(modes, dict):
        raise TargetsError(f"{f}: 'modes' must map paths to octal modes in quotes, e.g. {{usr/bin/x: \"0644\"}}")
    for p, mode in modes.items():
        if not isinstance(p, str) or p.startswith("/") or ".." in Path(p).parts or not p.strip():
            raise TargetsError(f"{f}: modes path '{p}' must be relative to the tree, without '..'")
        if not (isinstance(mode, str) and re.fullmatch(r"0?[0-7]{3}", mode)):
            raise TargetsError(f"{f}: mode of '{p}' must be an octal string in quotes such as \"0644\", not {mode!r}")
    mtimes = data.get("mtimes") or {}
    if not isinstance(mtimes, dict) or not all(isinstance(p, str) for p in mtimes):
        raise TargetsError(f"{f}: 'mtimes' must map paths to times such as \"2026-11-29T13:02:00Z\"")
    written: list[tuple[str, float]] = []
    for p, when in sorted(mtimes.items()):
        if p.startswith("/") or ".." in Path(p).parts:
            raise TargetsError(f"{f}: mtimes path '{p}' must be relative to the tree, without '..'")
        try:
            written.append((p, datetime.fromisoformat(str(when).replace("Z", "+00:00")).timestamp()))
        except ValueError:
            raise TargetsError(f"{f}: mtime of '{p}' is not an ISO 8601 time: {when!r}") from None
    return Variant(
        d.name,
        data["base"],
        data["phase"],
        breaks,
        " ".join(data["why"].split()),
        tuple(delete),
        tuple((p, int(m, 8)) for p, m in sorted(modes.items())),
        tuple(written),
    )


def _chain(name: str, src: Path, variants: dict[str, Variant]) -> list[tuple[Path, Variant | None]]:
    """Layers to stack for a tree, base tree first: [(dir, None), (variant dir, variant), ...]."""
    layers: list[tuple[Path, Variant | None]] = []
    while name in variants:
        layers.append((src / VARIANTS_DIR / name, variants[name]))
        name = variants[name].base
    layers.append((src / name, None))
    return layers[::-1]


# --- hashing ---------------------------------------------------------------------------------------------------------


def _hash_dir(h: hashlib._Hash, root: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                h.update(f"L {rel} {os.readlink(p)}\n".encode())
            elif stat.S_ISDIR(st.st_mode):
                h.update(f"D {rel}\n".encode())
            else:
                h.update(f"F {rel} {st.st_mode & 0o777:o} {st.st_size}\n".encode())
                h.update(p.read_bytes())


def _source_hash(layers: list[tuple[Path, Variant | None]], busybox_digest: str) -> str:
    h = hashlib.sha256(f"builder {BUILDER_VERSION}\nbusybox {busybox_digest}\n".encode())
    for d, _ in layers:
        h.update(f"layer {d.name}\n".encode())
        _hash_dir(h, d)
    return h.hexdigest()


# --- building --------------------------------------------------------------------------------------------------------


def build_station_trees(src: Path = DEFAULT_SRC, dest: Path = DEFAULT_DEST, busybox: Path = BUSYBOX) -> dict[str, Path]:
    """Build every station tree (each base tree and each variant) under dest; return {tree name: path}.

    Trees whose sources (and busybox) are unchanged since their last build are not touched. Safe to call from
    several processes at once (pytest-xdist workers): they take turns on a lock file in dest.
    """
    src, dest = Path(src).resolve(), Path(dest).resolve()
    if not busybox.is_file():
        raise TargetsError("busybox-static is not installed: apt-get install busybox-static")
    if not src.is_dir():
        raise TargetsError(f"{src}: no such directory of station sources")
    busybox_digest = hashlib.sha256(busybox.read_bytes()).hexdigest()
    applets = _busybox_applets(busybox)
    variants = {v.name: v for v in load_variants(src)}
    names = base_trees(src) + sorted(variants)

    dest.mkdir(parents=True, exist_ok=True)
    with open(dest / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        built = {}
        for name in names:
            layers = _chain(name, src, variants)
            digest = _source_hash(layers, busybox_digest)
            tree = dest / name
            if (tree / HASH_FILE).is_file() and (tree / HASH_FILE).read_text().strip() == digest:
                built[name] = tree
                continue
            tmp = dest / f".building-{name}-{os.getpid()}"
            _remove(tmp)
            try:
                _build(tmp, layers, busybox, applets)
                (tmp / HASH_FILE).write_text(digest + "\n")
                _remove(tree)
                tmp.rename(tree)
            finally:
                _remove(tmp)
            built[name] = tree
        # Trees of variants that no longer exist would otherwise linger and be mistaken for current ones.
        for stale in dest.iterdir():
            if stale.name not in built and (stale / HASH_FILE).is_file():
                _remove(stale)
    return built


def _build(tree: Path, layers: list[tuple[Path, Variant | None]], busybox: Path, applets: list[str]) -> None:
    tree.mkdir(parents=True)
    for layer_dir, variant in layers:
        if variant is not None:
            for rel in variant.delete:
                target = tree / rel
                if not (target.exists() or target.is_symlink()):
                    raise TargetsError(f"variant {variant.name}: delete: {rel} is not in its base")
                _remove(target)
        _overlay(layer_dir, tree, skip={"variant.yaml"} if variant is not None else set())
        if variant is not None:
            for rel, mode in variant.modes:
                target = tree / rel
                if not target.is_file() or target.is_symlink():
                    raise TargetsError(f"variant {variant.name}: modes: {rel} is not a file of the tree")
                os.chmod(target, mode)
            for rel, when in variant.mtimes:
                target = tree / rel
                if not target.is_file():
                    raise TargetsError(f"variant {variant.name}: mtimes: {rel} is not a file of the tree")
                os.utime(target, (when, when))
    _install_busybox(tree, busybox, applets)
    _device_files(tree)
    for manifest in sorted(tree.rglob(MANIFEST)):
        _sparse_shards(manifest)


def _overlay(src: Path, dest: Path, skip: set[str]) -> None:
    """Copy src over dest: files and symlinks replace what is there, directories merge."""
    for dirpath, dirnames, filenames in os.walk(src):
        rel = Path(dirpath).relative_to(src)
        for name in dirnames + filenames:
            if rel == Path(".") and name in skip:
                continue
            s, d = Path(dirpath) / name, dest / rel / name
            if s.is_symlink():
                _remove(d)
                d.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(os.readlink(s), d)
            elif s.is_dir():
                if d.is_symlink() or (d.exists() and not d.is_dir()):
                    _remove(d)
                d.mkdir(parents=True, exist_ok=True)
            else:
                if d.is_symlink() or d.is_dir():
                    _remove(d)
                d.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(s, d, follow_symlinks=False)
        # os.walk does not descend into symlinked directories, which is what we want: they were copied as links.


def _busybox_applets(busybox: Path) -> list[str]:
    try:
        out = subprocess.run([str(busybox), "--list"], capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError) as exc:
        raise TargetsError(f"{busybox} does not run ({exc}): reinstall busybox-static") from None
    return [a for a in APPLETS if a in out]


def _install_busybox(tree: Path, busybox: Path, applets: list[str]) -> None:
    bindir = tree / "bin"
    bindir.mkdir(exist_ok=True)
    shutil.copyfile(busybox, bindir / "busybox")
    os.chmod(bindir / "busybox", 0o755)
    for applet in applets:
        link = bindir / applet
        if not (link.exists() or link.is_symlink()):  # a tree may bring its own tool of that name
            os.symlink("busybox", link)


def _device_files(tree: Path) -> None:
    """/dev/null and /tmp, so that `cmd 2>/dev/null` inside the tree discards instead of creating a file."""
    (tree / "tmp").mkdir(exist_ok=True)
    os.chmod(tree / "tmp", 0o1777)
    dev = tree / "dev"
    dev.mkdir(exist_ok=True)
    try:
        os.mknod(dev / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        os.chmod(dev / "null", 0o666)  # mknod's mode is filtered by the umask
    except FileExistsError:
        pass
    except PermissionError:
        pass  # not root: the chroot backend needs root anyway, and file-level reads do not need /dev/null


def _sparse_shards(manifest: Path) -> None:
    """Create every shard a manifest lists as a sparse file of its size (truncate: size without data blocks)."""
    for n, line in enumerate(manifest.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2 or "/" in parts[0] or not parts[1].isdigit():
            raise TargetsError(f"{manifest}:{n}: expected 'FILENAME SIZE_IN_BYTES', got: {line}")
        with open(manifest.parent / parts[0], "wb") as f:
            f.truncate(int(parts[1]))


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file() or (path.exists() and not path.is_dir()):
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


if __name__ == "__main__":
    for tree_name, tree_path in build_station_trees().items():
        print(f"{tree_name}\t{tree_path}")
