"""Command lines documented in README.md and docs/*.md, collected so that a test can run each one.

A command is a line of a fenced code block (joined over trailing backslashes), or an inline code
span in prose, that starts with ``python -m ascendbench``, ``ascendbench`` or ``make`` (after
optional ``$ `` and ``VAR=value`` prefixes). Shell variables assigned in the same block
(``S="..."``) are expanded; placeholders such as ``<dir>`` become a fixed path and ``...`` is
dropped, so what remains is exactly the keys, options and values a user would type.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLACEHOLDER = "/placeholder/path"
_FENCE = re.compile(r"^\s*```")
_INLINE = re.compile(r"`((?:python -m ascendbench|ascendbench |make )[^`]*)`")
_ASSIGN = re.compile(r"^([A-Z_][A-Z0-9_]*)=(.*)$")
_STARTS = ("python -m ascendbench", "ascendbench ", "make ")


@dataclass
class DocCommand:
    """One documented command: where it is written and its words after the program."""

    where: str
    text: str
    program: str  # "ascendbench", "python -m <module>" or "make"
    module: str = ""
    words: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.where}: {self.text}"


# Pages whose commands need the files the page itself writes first: a test of their own follows them
# literally.
FOLLOWED_LITERALLY = {"extending.md": "tests/test_extending.py"}


def doc_files() -> list[Path]:
    """README.md and every page under docs/ but those followed literally by a test of their own."""
    return [ROOT / "README.md",
            *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name not in FOLLOWED_LITERALLY)]


def _code_lines(text: str) -> list[tuple[int, str, bool]]:
    """(line number, line, inside a fenced block) with backslash continuations joined."""
    lines, inside, pending, start = [], False, "", 0
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            inside = not inside
            continue
        if inside and line.rstrip().endswith("\\"):
            start = start or number
            pending += line.rstrip()[:-1] + " "
            continue
        lines.append((start or number, pending + line, inside))
        pending, start = "", 0
    return lines


def _clean(text: str, variables: dict[str, str]) -> str:
    for name, value in variables.items():
        text = text.replace(f"${name}", value).replace("${" + name + "}", value)
    text = text.replace("$HOME", "/home/user")
    text = re.sub(r"<[^<>]*>", PLACEHOLDER, text)
    return text


def _parse(where: str, text: str) -> DocCommand | None:
    words = [w for w in shlex.split(text, comments=True) if w != "..."]
    env = {}
    while words and words[0] == "$":
        words = words[1:]
    while words and _ASSIGN.match(words[0]) and not words[0].startswith(("model", "device")):
        key, value = _ASSIGN.match(words[0]).groups()
        env[key], words = value, words[1:]
    if words[:2] == ["python", "-m"] and len(words) > 2:
        module = words[2]
        program = "ascendbench" if module == "ascendbench" else "python -m"
        return DocCommand(where, text.strip(), program, module, words[3:], env)
    if words[:1] == ["ascendbench"]:
        return DocCommand(where, text.strip(), "ascendbench", "ascendbench", words[1:], env)
    if words[:1] == ["make"]:
        return DocCommand(where, text.strip(), "make", "", words[1:], env)
    return None


def collect(paths: list[Path] | None = None) -> list[DocCommand]:
    """Every documented command of ``paths`` (default: README.md and docs/*.md)."""
    found = []
    for path in paths or doc_files():
        variables: dict[str, str] = {}
        for number, line, inside in _code_lines(path.read_text()):
            where = f"{path.relative_to(ROOT)}:{number}"
            candidates = [line.strip()] if inside else _INLINE.findall(line)
            for candidate in candidates:
                candidate = candidate.lstrip("$ ").strip()
                assign = _ASSIGN.match(candidate)
                if inside and assign and len(shlex.split(candidate, comments=True)) == 1:
                    value = _clean(assign.group(2), variables)
                    variables[assign.group(1)] = " ".join(shlex.split(value))
                    continue
                if not any(_clean(candidate,
                                  variables).split("#")[0].find(s) >= 0 for s in _STARTS):
                    continue
                command = _parse(where, _clean(candidate, variables))
                if command is not None:
                    found.append(command)
    return found
