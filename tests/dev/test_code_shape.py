"""The house rules a reviewer checks, checked here: modules under 400 lines, functions of at most 6
parameters, no call with more than 5 positional arguments (build objects with keywords)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "ascendbench"
MAX_LINES, MAX_PARAMS, MAX_POSITIONAL = 400, 6, 5


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def long_modules() -> list[str]:
    return [f"{p.relative_to(PACKAGE.parent)}: {n} lines" for p in modules()
            if (n := len(p.read_text().splitlines())) > MAX_LINES]


def wide_functions(tree: ast.AST, where: str) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs
                     if a.arg not in ("self", "cls")]
            if len(names) > MAX_PARAMS:
                found.append(f"{where}:{node.lineno} {node.name}() takes {len(names)} parameters")
    return found


def long_calls(tree: ast.AST, where: str) -> list[str]:
    return [f"{where}:{node.lineno} a call with {count} positional arguments"
            for node in ast.walk(tree) if isinstance(node, ast.Call)
            and (count := sum(not isinstance(a, ast.Starred) for a in node.args)) > MAX_POSITIONAL]


def shape_problems() -> list[str]:
    problems = long_modules()
    for path in modules():
        where = str(path.relative_to(PACKAGE.parent))
        tree = ast.parse(path.read_text(), where)
        problems += wide_functions(tree, where) + long_calls(tree, where)
    return problems


def test_the_package_keeps_the_house_rules():
    assert shape_problems() == []


def test_each_rule_can_fail():
    tree = ast.parse("def f(a, b, c, d, e, f, g):\n    return g\n\nf(1, 2, 3, 4, 5, 6, 7)\n")
    assert wide_functions(tree, "x.py") == ["x.py:1 f() takes 7 parameters"]
    assert long_calls(tree, "x.py") == ["x.py:4 a call with 7 positional arguments"]
