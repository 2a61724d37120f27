"""Generated prestart scripts for the bash oracle, written from bash(1): `cd` (absolute, relative, in a subshell),
`source`/`.` nested and relative (to the current directory, found in $PATH), scripts run as their own process,
functions (called or not, with `return`), `trap … EXIT`, `set -e`/`set -euo pipefail` and a command that always
fails, `if`/`elif`/`else`, `case`, `&&`/`||`, loops, `exit` (maybe), `exec`, background jobs, here-strings, `sudo`.

The steps that matter are marked `@@KIND ` (sync, drop, logs, rm): golive reads the files without the marks; bash
runs them with each mark turned into a recorder call (bash_oracle), so that bash says which of them ran, in which
order, from which file and line. Whatever the station decides is `$X` (0 or 1), and `docker container inspect`
answers by it: both worlds are run. Paths are under `{D}`, the case's own folder.

    cases = generate(count=500, seed=3)
"""

from __future__ import annotations

import random
from dataclasses import dataclass

PRESTART = "{D}/usr/local/sbin/p.sh"
LIB_DIR = "{D}/usr/local/lib/g"
DC = "/proc/sys/vm/drop_caches"
KINDS = ("sync", "drop", "logs", "rm")


@dataclass(frozen=True)
class ScriptCase:
    """A prestart and the files it reaches; `start`: where systemd starts it (WorkingDirectory=, or `/`)."""

    files: tuple[tuple[str, str], ...]
    start: str = "/"

    def text(self) -> str:
        out = [f"--- starts in {self.start}"]
        for path, text in self.files:
            out.append(f"--- {path}\n{text}")
        return "\n".join(out)

    def parts(self) -> list[tuple[int, str]]:
        """The lines reduction may remove: every line but a `#!` one (without it the file is no script)."""
        return [
            (i, line)
            for i, (_, text) in enumerate(self.files)
            for n, line in enumerate(text.split("\n"))
            if not (n == 0 and line.startswith("#!"))
        ]

    def rebuilt(self, parts: list[tuple[int, str]]) -> ScriptCase:
        shebangs = {i: text.split("\n", 1)[0] for i, (_, text) in enumerate(self.files) if text.startswith("#!")}
        texts = [
            "\n".join([*([shebangs[i]] if i in shebangs else []), *(line for j, line in parts if j == i)])
            for i in range(len(self.files))
        ]
        return ScriptCase(tuple((path, texts[i]) for i, (path, _) in enumerate(self.files)), self.start)


class _Gen:
    def __init__(self, rng: random.Random):
        self.r = rng
        self.functions: list[str] = []
        self.libs: dict[str, list[str]] = {}

    def pick(self, *options: str) -> str:
        return self.r.choice(options)

    def chance(self, p: float) -> bool:
        return self.r.random() < p

    def step(self) -> str:
        kind = self.r.randrange(10)
        if kind < 2:
            return self.pick("@@sync sync", "@@sync sudo sync", "@@sync /bin/sync")
        if kind < 4:
            return self.pick(
                f"@@drop echo 1 > {DC}",
                f"@@drop echo 3 > {DC}",
                f"echo 3 | @@drop tee {DC} > /dev/null",
                f"@@drop sudo tee {DC} <<< 3 > /dev/null",
                f"@@drop tee {DC} <<< 1 > /dev/null",
                "@@drop sysctl -q vm.drop_caches=3",
                f'@@drop printf "1\\n" > {DC}',
                f"@@drop echo 2 > {DC}",
            )
        if kind == 4:
            return self.pick("@@logs docker logs glm53 > {D}/logs/x.log 2>&1", "@@logs docker container logs glm53")
        if kind == 5:
            return self.pick("@@rm docker rm -f glm53", "@@rm docker container rm glm53", "@@rm sudo docker rm glm53")
        return self.pick("echo hi", "true", ":", "mkdir -p {D}/logs", "y=1", "false || true", "ls / > /dev/null")

    def condition(self) -> str:
        return self.pick(
            '[ "$X" = 1 ]',
            '[ "$X" != 1 ]',
            "true",
            "false",
            "[ 1 = 0 ]",
            "[ a = a ]",
            "docker container inspect glm53 > /dev/null 2>&1",
            "test -f {D}/flag$X",
            "! false",
        )

    def block(self, depth: int, lines: int) -> list[str]:
        out: list[str] = []
        for _ in range(lines):
            out += self.statement(depth)
        return out

    def statement(self, depth: int) -> list[str]:
        kind = self.r.randrange(24 if depth < 2 else 8)
        if kind < 6:
            return [self.step()]
        if kind == 6:
            return [f"{self.condition()} && {self.step()}"]
        if kind == 7:
            return [f"{self.condition()} || {self.step()}"]
        if kind == 8:
            body = self.block(depth + 1, self.r.randrange(1, 3))
            other = self.block(depth + 1, 1) if self.chance(0.4) else []
            return [f"if {self.condition()}; then", *body, *(["else", *other] if other else []), "fi"]
        if kind == 9:
            return ['case "$X" in', f"  1) {self.step()} ;;", f"  *) {self.step()} ;;", "esac"]
        if kind == 10:
            return [f"for n in {self.pick('a b', 'a', '')}; do", *self.block(depth + 1, 1), "done"]
        if kind == 11:
            return ["while false; do", *self.block(depth + 1, 1), "done"]
        if kind == 12:
            name = f"f{len(self.functions)}"
            self.functions.append(name)
            body = self.block(depth + 1, self.r.randrange(1, 3))
            if self.chance(0.2):
                body.insert(self.r.randrange(len(body) + 1), self.pick("return 0", '[ "$X" = 1 ] && return 0'))
            return [f"{name}() {{", *body, "}"]
        if kind == 13 and self.functions:
            return [self.r.choice(self.functions)]
        if kind == 14:
            return (
                [self.pick('[ "$X" = 1 ] && exit 0', "exit 0", "if false; then exit 0; fi", "exit 1")]
                if self.chance(0.3)
                else [self.step()]
            )
        if kind == 15:
            lib = self.lib(depth)
            return [self.pick(f". {lib}", f"source {lib}", f'[ "$X" = 1 ] && . {lib}')]
        if kind == 16:
            where = self.pick(LIB_DIR, "{D}/work", "..", "g", "{D}/usr/local/lib")
            return [f"cd {where}", f". {self.pick('./', '')}{self.lib(depth, relative=True)}"]
        if kind == 17:
            return [f"( cd {LIB_DIR}; {self.step()} )"]
        if kind == 18:
            child = self.lib(depth, run=True)
            return [self.pick(f"bash {child}", f"{child}", f"sudo bash {child}", f'[ "$X" = 1 ] || bash {child}')]
        if kind == 19:
            steps = "; ".join(self.step() for _ in range(self.r.randrange(1, 3)))
            return [self.pick(f"trap '{steps}' EXIT", f"trap '{steps}' INT")]
        if kind == 20:
            return [f"{self.step()} &"] if self.chance(0.3) else [self.step()]
        if kind == 21:
            return ["set -e", "false"] if self.chance(0.15) else ["set +e"]
        if kind == 22:
            return [self.pick("set -o pipefail", "set -u", "y=$(echo x)")]
        return [self.step()]

    def lib(self, depth: int, relative: bool = False, run: bool = False) -> str:
        """A file the script sources or runs: one of a few, written once; some never written (missing)."""
        name = self.pick("lib.sh", "drop.sh", "steps.sh") if not run else self.pick("child.sh", "run.sh")
        folder = self.pick(LIB_DIR, "{D}/work") if not relative else ""
        path = f"{folder}/{name}" if folder else name
        for home in [LIB_DIR, "{D}/work"] if relative else [folder]:
            full = f"{home}/{name}"
            if full not in self.libs and self.chance(0.9):
                self.libs[full] = []  # placeholder first: a file that sources itself stays a cycle, not a loop
                header = ["#!/bin/bash"] if run else []
                self.libs[full] = [*header, *(self.block(depth + 1, self.r.randrange(1, 4)) if depth < 2 else [])]
        return path


def generate(count: int, seed: int) -> list[ScriptCase]:
    rng = random.Random(seed)
    return [_one(rng) for _ in range(count)]


def _one(rng: random.Random) -> ScriptCase:
    gen = _Gen(rng)
    header = ["#!/bin/bash" + gen.pick("", "", " -e")]
    if gen.chance(0.3):
        header.append(gen.pick("set -euo pipefail", "set -e"))
    body = gen.block(0, rng.randrange(3, 9))
    files = {PRESTART: "\n".join(header + body) + "\n"}
    for path, lines in gen.libs.items():
        files[path] = "\n".join(lines) + "\n"
    start = gen.pick("/", "{D}/work", "{D}/work", LIB_DIR)
    return ScriptCase(tuple(files.items()), start)
