"""Generated units for the systemd oracle: a unit file and its drop-ins, the env files they read, the folders that
exist, written from systemd.syntax(7), systemd.unit(5), systemd.service(5) and systemd.exec(5): `\\` continuations
with comment and empty lines inside, quoting and C escapes, `;` between commands and `\\;`, the `-@:+!` prefixes,
specifiers, `$VAR`/`${VAR}`/`$$`, Environment= and EnvironmentFile= (`-`, missing files, quoting, `export`),
several ExecStartPre/ExecStart/ExecStartPost lines and empty assignments that reset them, drop-ins masked and ordered
across /etc, /run and /usr/lib, WorkingDirectory= (`-`, `~`, missing, relative), values systemd refuses, lines it
ignores.

Every program the units run is the recorder (ORACLE_PROGRAM, under several spellings), so what systemd runs can be
read back: its arguments, its working directory and its environment.

    cases = generate(count=200, seed=7, tag="a")      # [UnitCase, …], each its own unit name
"""

from __future__ import annotations

import random
from dataclasses import dataclass

RECORDER = "/usr/local/lib/golive-oracle/rec"
# the spellings of the recorder a unit may use: absolute, a bare name systemd finds in its search path, a folder
# with a blank in its name (quoted), a doubled slash
PROGRAMS = (
    RECORDER,
    RECORDER,
    RECORDER,
    "golive-rec",
    '"/usr/local/lib/golive oracle/rec"',
    "/usr/local/lib//golive-oracle/rec",
)
UNIT_DIRS = ("/etc/systemd/system", "/run/systemd/system", "/usr/lib/systemd/system")
ENV_NAMES = ("A", "B", "C", "MAX_NUM_SEQS", "VLLM_ARGS", "x_1", "_U", "LEN")
BAD_NAMES = ("1A", "A-B", "export A", "A B")


@dataclass(frozen=True)
class UnitCase:
    """One unit: its files (fragment first), the env files that exist, the folders that exist."""

    name: str
    files: tuple[tuple[str, str], ...]
    env_files: tuple[tuple[str, str], ...] = ()
    folders: tuple[str, ...] = ()

    @property
    def fragment(self) -> str:
        return self.files[0][0]

    def text(self) -> str:
        """The case as a reader sees it, for a failing test's message."""
        out = []
        for path, text in [*self.files, *self.env_files]:
            out.append(f"--- {path}\n{text}")
        if self.folders:
            out.append(f"--- folders that exist: {', '.join(self.folders)}")
        return "\n".join(out)

    def parts(self) -> list[tuple[int, str]]:
        """The lines of every file, each with its file's index (files, then env files): what reduction removes."""
        everything = [*self.files, *self.env_files]
        return [(i, line) for i, (_, text) in enumerate(everything) for line in text.split("\n")]

    def rebuilt(self, parts: list[tuple[int, str]]) -> UnitCase:
        everything = [*self.files, *self.env_files]
        texts = ["\n".join(line for j, line in parts if j == i) for i in range(len(everything))]
        files = tuple((path, texts[i]) for i, (path, _) in enumerate(self.files))
        env = tuple((path, texts[len(self.files) + i]) for i, (path, _) in enumerate(self.env_files))
        return UnitCase(self.name, files, env, self.folders)


class _Gen:
    def __init__(self, rng: random.Random, name: str):
        self.r, self.name = rng, name
        self.prefix = name.split("-", 1)[0]

    def pick(self, *options: str) -> str:
        return self.r.choice(options)

    def chance(self, p: float) -> bool:
        return self.r.random() < p

    # --- words -------------------------------------------------------------------------------------------------

    def plain(self) -> str:
        return self.pick("a", "x", "--max-num-seqs", "256", "--flag=v", "1m", "/srv/models", "k=v", "-e", "é")

    def word(self) -> str:
        kind = self.r.randrange(22)
        name = self.r.choice(ENV_NAMES)
        if kind < 6:
            return self.plain()
        if kind == 6:
            return f'"{self.plain()} {self.plain()}"'
        if kind == 7:
            return f"'{self.plain()}  {self.plain()}'"
        if kind == 8:
            return self.pick('"a\\tb"', "a\\x41", "'c\\nd'", "\\s", '"q\\"q"', "\\\\", "x\\d+", "'\\w'", '"\\101"')
        if kind == 9:
            return f"${name}"
        if kind == 10:
            return f"${{{name}}}"
        if kind == 11:
            return self.pick(f"pre${{{name}}}", f"${{{name}}}post", f"a${name}", f"${{{name}:-d}}", "$$HOME", "$$")
        if kind == 12:
            return f'"${{{name}}} x"'
        if kind == 13:
            return self.pick("%n", "%N", "%p", "%i", "%j", "%f", "%t", "%u", "%H", "%m", "%%", "100%%", "%S/x", "%y")
        if kind == 14:
            return self.pick(";", "\\;", "';'", '";"', "a;", ";b")
        if kind == 15:
            return self.pick("=", "--x=", "''", '""', "-", "--")
        if kind == 16:
            return self.pick("%Z", "'unbalanced", '"open', "a\\") if self.chance(0.15) else self.plain()
        return self.plain()

    def command(self) -> list[str]:
        prefixes = "".join(self.r.sample("-@:+!", self.r.randrange(3))) if self.chance(0.4) else ""
        if self.chance(0.04):
            prefixes += self.pick("-", "!", "++")
        program = self.r.choice(PROGRAMS)
        words = [prefixes + program]
        if "@" in prefixes:
            words.append(self.pick("argv0", "my-name", '"a b"', "%n"))
        return words + [self.word() for _ in range(self.r.randrange(6))]

    def exec_value(self) -> list[str]:
        commands = [self.command() for _ in range(1 if self.chance(0.8) else 2)]
        if len(commands) == 2:
            return [*commands[0], self.pick(";", ";", "; "), *commands[1]]
        return commands[0]

    # --- lines -------------------------------------------------------------------------------------------------

    def wrapped(self, key: str, words: list[str]) -> list[str]:
        """`Key=value`, maybe over several lines: `\\` continuations between words (inside a quoted argument too,
        never inside the program's word), comment and empty lines inside."""
        if len(words) < 2 or not self.chance(0.35):
            return [f"{key}={' '.join(words)}"]
        lines: list[str] = []
        current = f"{key}={words[0]}"
        for n, word in enumerate(words[1:], 1):
            inside = " " in word and word[:1] in "\"'" and n > 1 and self.chance(0.3)
            if inside:  # break the quoted word at its blank: the continuation's blanks are the word's
                head, tail = word.split(" ", 1)
                lines.append(current + " " + head + self.pick(" \\", "\\"))
                if self.chance(0.3):
                    lines.append(self.pick("# a comment inside", "#--max-num-seqs 1 \\"))
                current = self.pick("", "  ") + tail
            elif self.chance(0.45):
                lines.append(current + self.pick(" \\", "\\", " \\", "  \\"))
                if self.chance(0.25):
                    lines.append(self.pick("# a comment inside", "  ; also a comment", "#--max-num-seqs 1 \\"))
                if self.chance(0.04):
                    lines.append("")  # an empty line ends the continuation
                current = self.pick("", "  ", "\t") + word
            else:
                current += " " + word
        lines.append(current + (self.pick(" \\ ", "\\\\", " ") if self.chance(0.05) else ""))
        return lines

    def env_assignment(self) -> str:
        name = self.r.choice(ENV_NAMES) if self.chance(0.92) else self.r.choice(BAD_NAMES)
        value = self.pick("1", "256", "a b", "--tool-call-parser glm47", "'q x' y", "%n", "x=y", "", "$A", "é")
        style = self.r.randrange(5)
        if style == 0:
            return f"{name}={value}" if " " not in value else f'"{name}={value}"'
        if style == 1:
            return f'{name}="{value}"'
        if style == 2:
            return f'"{name}={value}"'
        if style == 3:
            return f"{name}=" + value.replace(" ", "\\x20")
        return f"'{name}={value}'"

    def env_file_text(self) -> str:
        lines = []
        for _ in range(self.r.randrange(1, 6)):
            name = self.r.choice(ENV_NAMES)
            kind = self.r.randrange(12)
            value = self.pick("1", "256", "a b", "--tool-call-parser glm47", "x=y", "", "é")
            if kind == 0:
                lines.append(f'{name}="{value}"')
            elif kind == 1:
                lines.append(f"{name}='{value} $X'")
            elif kind == 2:
                lines.append(f"export {name}={value}")
            elif kind == 3:
                lines.append(self.pick("# comment", "; comment", "", "no equals here"))
            elif kind == 4:
                lines.append(f"{name}=a\\\nb")
            elif kind == 5:
                lines.append(f"  {name} =  {value}  ")
            elif kind == 6:
                lines.append(f'{name}="x \\"y\\" \\$z \\n"')
            elif kind == 7:
                lines.append(f'{name}="{value}" # not a comment')
            elif kind == 8:
                lines.append(f"{name}={value}\r")
            else:
                lines.append(f"{name}={value}")
        return "\n".join(lines) + ("\n" if self.chance(0.8) else "")

    def scalar(self, key: str) -> str:
        good = {
            "Restart": ("no", "on-failure", "always", "on-abnormal", "on-success"),
            "RestartSec": ("60", "1min", "1min 30s", "100ms", "1h30m", ".5s", "0"),
            "StartLimitBurst": ("3", "5", "010", "0x10", "+2", "0"),
            "StartLimitIntervalSec": ("1h", "3600", "10s", "infinity", "0", "2 min"),
            "Type": ("oneshot",) * 6 + ("simple", "exec"),
        }[key]
        if self.chance(0.12):
            return self.pick("", "bogus", "5x", "-1", "1mins")
        return self.r.choice(good)

    def fragment_lines(self, env_paths: list[str], folders: list[str]) -> list[str]:
        unit_lines = ["[Unit]", f"Description=golive oracle {self.name}"]
        if self.chance(0.4):
            unit_lines.append(f"StartLimitBurst={self.scalar('StartLimitBurst')}")
        if self.chance(0.3):
            unit_lines.append(f"StartLimitIntervalSec={self.scalar('StartLimitIntervalSec')}")
        service = ["[Service]", f"Type={self.scalar('Type')}" if self.chance(0.95) else "Type=oneshot"]
        service += self.body(env_paths, folders, fragment=True)
        lines = [*unit_lines, "", *service]
        if self.chance(0.2):
            lines += ["", "[Install]", "WantedBy=multi-user.target"]
        if self.chance(0.1):
            lines.insert(0, self.pick("X=1", "# leading comment", "stray line"))
        if self.chance(0.06):
            lines += ["[Servce]", f"ExecStart={' '.join(self.command())}"]
        if self.chance(0.05):
            lines += ["[X-Golive]", "Anything=goes"]
        return lines

    def body(self, env_paths: list[str], folders: list[str], fragment: bool) -> list[str]:
        lines: list[str] = []
        keys = ["Environment", "EnvironmentFile", "ExecStartPre", "ExecStart", "ExecStartPost", "Restart"]
        keys += ["RestartSec", "WorkingDirectory", "junk"]
        count = self.r.randrange(4, 10) if fragment else self.r.randrange(1, 5)
        chosen = [self.r.choice(keys) for _ in range(count)]
        if fragment and "ExecStart" not in chosen and self.chance(0.95):
            chosen.append("ExecStart")
        for key in chosen:
            if key == "Environment":
                value = [self.env_assignment() for _ in range(self.r.randrange(1, 4))]
                lines += self.wrapped("Environment", value) if self.chance(0.9) else ["Environment="]
            elif key == "EnvironmentFile":
                path = self.r.choice(env_paths)
                lines.append(f"EnvironmentFile={'-' if self.chance(0.6) else ''}{path}")
            elif key.startswith("Exec"):
                lines += self.wrapped(key, self.exec_value()) if self.chance(0.93) else [f"{key}="]
            elif key in ("Restart", "RestartSec"):
                lines.append(f"{key}={self.scalar(key)}")
            elif key == "WorkingDirectory":
                lines.append("WorkingDirectory=" + self.working_directory(folders))
            else:
                lines.append(self.pick("# comment", "; comment", "noequals", "  ", "UnknownKey=1"))
        return lines

    def working_directory(self, folders: list[str]) -> str:
        choice = self.r.randrange(10)
        if choice < 4:
            return self.r.choice(folders)
        if choice == 4:
            return "-" + self.r.choice(folders)
        if choice == 5:
            return self.pick("~", "-~", "/tmp", "%t")
        if choice == 6:
            return self.pick("relative", "/srv/../tmp", "-relative", "")
        return f"-/srv/golive-oracle/{self.name}/missing" if self.chance(0.5) else "/tmp"


def generate(count: int, seed: int, tag: str) -> list[UnitCase]:
    """`count` units named `g<tag><i>-svc.service`: their own dash prefix, so a prefix drop-in touches only them."""
    rng = random.Random(seed)
    return [_one(rng, f"g{tag}{i}-svc.service") for i in range(count)]


def _one(rng: random.Random, name: str) -> UnitCase:
    gen = _Gen(rng, name)
    base = f"/srv/golive-oracle/{name}"
    folders = [f"{base}/work", f"{base}/gone"]
    existing = [folders[0]]
    env_paths = [f"{base}/a.env", f"{base}/b.env", f"{base}/missing.env", f"{base}/*.env"]
    env_files = [(p, gen.env_file_text()) for p in env_paths[:2] if gen.chance(0.85)]
    fragment = (gen.pick(*UNIT_DIRS[:1] * 6, *UNIT_DIRS[1:]) + f"/{name}", gen.fragment_lines(env_paths, folders))
    dropins = []
    for _ in range(rng.choice((0, 0, 1, 1, 2, 3))):
        folder = rng.choice(UNIT_DIRS) + "/" + (f"{name}.d" if gen.chance(0.75) else f"{gen.prefix}-.service.d")
        conf = rng.choice(("10-a.conf", "50-b.conf", "override.conf", "x.txt" if gen.chance(0.1) else "20-c.conf"))
        lines = ["[Service]", *gen.body(env_paths, folders, fragment=False)]
        if gen.chance(0.3):
            lines = ["[Unit]", f"StartLimitBurst={gen.scalar('StartLimitBurst')}", *lines]
        dropins.append((f"{folder}/{conf}", lines))
    files: dict[str, str] = {}
    for path, lines in [fragment, *dropins]:
        text = "\n".join(lines) + "\n"
        files[path] = text.replace("\n", "\r\n") if gen.chance(0.03) else text
    return UnitCase(name, tuple(files.items()), tuple(env_files), tuple(existing))
