"""Write the torch_npu API manifests the NPU tests check ascendbench against, from torch_npu's own
wheels.

For each version: ``pip download --no-deps`` the wheel (into ``--wheels``, default
``/tmp/npu-wheels``; never into the repository), then read it without installing or importing it:

* its Python sources by AST: per public module the names it defines or imports (functions with their
  signatures, classes with their methods and class attributes), the star imports resolved through
  the target's ``__all__``, and every environment variable read with a literal name
  (``os.environ[...]``, ``os.environ.get``, ``os.getenv``);
* the attributes torch_npu's own Python code reads on objects of its C extension
  (``ProfilerActivity.NPU``): what AST can see of names that only exist in ``torch_npu._C``;
* the profiler's output layout: the ``ASCEND_PROFILER_OUTPUT`` directory name, the ``*_ascend_pt``
  directory format, and the column names of ``operator_details.csv``, ``kernel_details.csv`` and
  ``op_statistic.csv``;
* message templates in its shared objects (the CPU-fallback CAUTION, the NPU out-of-memory text,
  whether the C++ ``c10::OutOfMemoryError`` is thrown at all), the device-property field names bound
  there, the environment variables its C++ code names and the ``npu_*`` operators it registers
  (``torch_npu.npu_*``).

``tests/devices/npu_manifest/torch_npu-<version>.json`` is written for each (``make npu-manifest``).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any, Iterable

DEFAULT_VERSIONS = ("2.1.0.post17", "2.5.1", "2.9.0", "2.14.0")
OUT_DIR = Path(__file__).resolve().parents[1] / "tests" / "devices" / "npu_manifest"
# The runtime API surface a benchmark touches: the package itself, torch.npu (torch_npu.npu) and the
# profiler; their private modules and the analysis internals are left out (the profiler layout is
# read from them below).
SURFACE_PACKAGES = ("torch_npu.npu", "torch_npu.profiler")
SURFACE_MODULES = ("torch_npu", "torch_npu.utils")
SKIPPED_PACKAGES = ("torch_npu.profiler.analysis",)
MESSAGES = {
    "fallback_prefix": b"CAUTION: The operator '",
    "fallback_unsupported": b"' is not currently supported on the NPU backend",
    "fallback_will_fall_back": b"will fall back to run on the CPU",
    "fallback_named_op": b"is currently not supported on the NPU backend. "
    b"Now this operator will fallback to run on the CPU",
    "oom_tried_to_allocate": b"NPU out of memory. Tried to allocate ",
    "oom_workspace_allocator": b"NPU out of memory. NPUWorkspaceAllocator tried to allocate ",
    "oom_reserved_suffix": b" reserved in total by PyTorch)",
    "c10_OutOfMemoryError": b"N3c1016OutOfMemoryErrorE",
}
# Upper-case strings of libtorch_npu.so that look like the environment variables its C++ code reads.
ENV_LIKE = (
    r"^(PYTORCH_NPU|ASCEND_|TASK_QUEUE|INF_NAN|HCCL_|ACL_|NPU_|CPU_AFFINITY|MULTI_STREAM|TORCH_NPU|"
    r"P2P_)"
)
# Operator schemas registered by libtorch_npu.so ("npu_fusion_attention(Tensor query, ..."):
# the ``torch_npu.npu_*`` functions torch_npu binds at import from its C++ ops, which no Python
# source defines.
OP_SCHEMA = (
    rb"\0(npu_[a-z0-9_]+)(?:\.[A-Za-z_]+)?\("
    rb"(?:Tensor|int|float|bool|\*|Scalar|SymInt|str|ScalarType|Device)"
)
DEVICE_PROPERTY_FIELDS = (
    "name",
    "total_memory",
    "major",
    "minor",
    "cube_core_num",
    "vector_core_num",
    "L2_cache_size",
)
# (class, attribute) constants of the profiler's analysis code that name its output files and
# columns.
PROFILER_CONSTANTS = {
    "operator_details.csv": ("OperatorViewParser", "OPERATOR_HEADERS"),
    "kernel_details.csv": ("CsvHeaders", "OP_SUMMARY_KERNEL_BASE_HEADERS"),
    "op_statistic.csv": ("OpStatisticBean", "HEADERS"),
    "output_dir": ("Constant", "OUTPUT_DIR"),
}
ENV_CALLS = {
    ("os", "getenv"),
    ("environ", "get"),
    ("os.environ", "get"),
    ("environ", "setdefault"),
    ("os.environ", "setdefault"),
    ("environ", "pop"),
    ("os.environ", "pop"),
}


def download(version: str, wheels: Path) -> Path:
    """The wheel of ``torch_npu==version`` in ``wheels`` (downloaded if missing): Linux x86_64, else
    aarch64."""
    wheels.mkdir(parents=True, exist_ok=True)
    for found in sorted(wheels.glob(f"torch_npu-{version}-*.whl")):
        return found
    for arch in ("x86_64", "aarch64"):
        for py in ("3.10", "3.11"):
            platforms = [
                f"--platform=manylinux{tag}_{arch}" for tag in ("2014", "_2_17", "_2_28", "_2_34")
            ]
            command = [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                f"--python-version={py}",
                *platforms,
                "-d",
                str(wheels),
                f"torch-npu=={version}",
            ]
            if subprocess.run(command, capture_output=True, text=True).returncode == 0:
                return sorted(wheels.glob(f"torch_npu-{version}-*.whl"))[0]
    raise SystemExit(
        f"pip download found no Linux cp310/cp311 wheel of torch-npu=={version}; "
        "`pip index versions torch-npu` lists the versions the index has."
    )


def module_name(path: str) -> str:
    """``torch_npu/npu/__init__.py`` -> ``torch_npu.npu``."""
    parts = path[:-3].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """``(a, b=1, *, c=None)`` of a function definition (annotations left out)."""
    args = node.args
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
        if arg is not None:
            arg.annotation = None
    return f"({ast.unparse(args)})"


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None


def class_entry(node: ast.ClassDef) -> dict[str, Any]:
    """Public methods (with signatures), public class attributes and base classes of a class."""
    methods, attrs = {}, {}
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if not item.name.startswith("_") or item.name in (
                "__enter__",
                "__exit__",
                "__init__",
                "__call__",
            ):
                methods[item.name] = signature(item)
        for target in _assigned(item):
            attrs[target] = None
    for sub in ast.walk(node):  # instance attributes: self.X = ... in any method
        if (
            isinstance(sub, ast.Attribute)
            and isinstance(sub.ctx, ast.Store)
            and ast.unparse(sub.value) == "self"
        ):
            attrs.setdefault(sub.attr, None)
    for (
        method
    ) in node.body:  # attributes served by __getattr__/__setattr__: the names they compare against
        if isinstance(method, ast.FunctionDef) and method.name in ("__getattr__", "__setattr__"):
            param = method.args.args[1].arg if len(method.args.args) > 1 else None
            for sub in ast.walk(method):
                if (
                    isinstance(sub, ast.Compare)
                    and isinstance(sub.comparators[0], ast.Constant)
                    and isinstance(sub.left, ast.Name)
                    and sub.left.id == param
                ):
                    attrs.setdefault(str(sub.comparators[0].value), None)
    attrs = {k: v for k, v in attrs.items() if not k.startswith("_")}
    return {
        "kind": "class",
        "bases": [ast.unparse(b) for b in node.bases],
        "methods": methods,
        "attributes": sorted(attrs),
    }


def _assigned(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def _resolve_from(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    """The absolute module of ``from X import ...`` in ``module``."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def module_entry(name: str, tree: ast.Module, is_package: bool) -> dict[str, Any]:
    """What a module binds at top level (including in ``if``/``try`` blocks): name -> what it is."""
    names: dict[str, Any] = {}
    stars, all_names = [], None
    for node in _top_level(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = {"kind": "function", "signature": signature(node)}
        elif isinstance(node, ast.ClassDef):
            names[node.name] = class_entry(node)
        elif isinstance(node, ast.ImportFrom):
            source = _resolve_from(name, node, is_package)
            for alias in node.names:
                if alias.name == "*":
                    stars.append(source)
                else:
                    names[alias.asname or alias.name] = {
                        "kind": "import",
                        "from": f"{source}.{alias.name}",
                    }
        elif isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                names[bound] = {"kind": "import", "from": alias.name if alias.asname else bound}
        for target in _assigned(node):
            if target == "__all__":
                all_names = _literal(node.value)
            elif isinstance(node.value, ast.Call):  # matmul = npu_config._allowHF32Matmul()
                names.setdefault(target, {"kind": "value", "call": ast.unparse(node.value.func)})
            else:
                names.setdefault(target, {"kind": "value"})
    return {
        "names": names,
        "star_imports": stars,
        "all": all_names if isinstance(all_names, list) else None,
    }


def _top_level(body: Iterable[ast.stmt]) -> Iterable[ast.stmt]:
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _top_level([*node.body, *node.orelse])
        elif isinstance(node, ast.Try):
            yield from _top_level(
                [
                    *node.body,
                    *node.orelse,
                    *node.finalbody,
                    *[s for h in node.handlers for s in h.body],
                ]
            )


def env_vars(tree: ast.Module) -> set[str]:
    """Literal names read from the environment: ``os.environ["X"]``, ``os.environ.get("X")``,
    ``os.getenv("X")``."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            owner = ast.unparse(node.func.value)
            if (owner, node.func.attr) in ENV_CALLS and isinstance(node.args[0], ast.Constant):
                found.add(node.args[0].value)
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) in (
            "os.environ",
            "environ",
        ):
            if isinstance(node.slice, ast.Constant):
                found.add(node.slice.value)
        elif (
            isinstance(node, ast.Compare)
            and isinstance(node.left, ast.Constant)
            and any(ast.unparse(c) in ("os.environ", "environ") for c in node.comparators)
        ):
            found.add(node.left.value)
    return {v for v in found if isinstance(v, str)}


def extension_attributes(module: str, tree: ast.Module, is_package: bool) -> dict[str, set[str]]:
    """``{name imported from torch_npu._C...: attributes torch_npu's own code reads on it}``."""
    imported = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _resolve_from(module, node, is_package)
            if source.startswith("torch_npu._C"):
                imported.update(
                    {a.asname or a.name: f"{source}.{a.name}" for a in node.names if a.name != "*"}
                )
    used: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in imported
        ):
            used.setdefault(imported[node.value.id], set()).add(node.attr)
    return used


def profiler_layout(trees: dict[str, tuple[str, ast.Module]]) -> dict[str, Any]:
    """Output directory, ``*_ascend_pt`` format and CSV columns, each with the wheel file it was
    read from."""
    layout: dict[str, Any] = {}
    for key, (cls, attr) in PROFILER_CONSTANTS.items():
        for path, tree in trees.values():
            value = _class_constant(tree, cls, attr)
            if value is not None and path.startswith("torch_npu/profiler/"):
                layout[key] = {"value": value, "source": f"{path} {cls}.{attr}"}
                break
    for path, tree in trees.values():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value.endswith("_ascend_pt")
                and path.startswith("torch_npu/profiler/")  # not 2.14.0's _inductor glob
            ):
                layout["run_dir_format"] = {"value": node.value, "source": path}
    return layout


def _class_constant(tree: ast.Module, cls: str, attr: str) -> Any:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if attr in _assigned(item):
                    return (
                        _literal(item.value)
                        if not isinstance(item.value, ast.List)
                        else _list(item, node)
                    )
    return None


def _list(item: ast.Assign | ast.AnnAssign, cls: ast.ClassDef) -> list[Any] | None:
    """A list literal whose elements may name constants of the same class (``TASK_START_TIME``)."""
    local = {t: _literal(i.value) for i in cls.body for t in _assigned(i)}
    values = [local.get(e.id) if isinstance(e, ast.Name) else _literal(e) for e in item.value.elts]
    return values if all(isinstance(v, str) for v in values) else None


def so_facts(wheel: zipfile.ZipFile) -> dict[str, Any]:
    """Which message templates and device-property names the wheel's shared objects hold, and
    where."""
    messages: dict[str, Any] = {key: {"present": False} for key in MESSAGES}
    so_envs: list[str] = []
    ops: list[str] = []
    fields: set[str] = set()
    for info in wheel.infolist():
        if not info.filename.endswith(".so") or "/dynamo/" in info.filename:
            continue
        data = wheel.read(info)
        for key, template in MESSAGES.items():
            at = data.find(template)
            if at >= 0 and not messages[key]["present"]:
                start, end = data.rfind(b"\0", 0, at) + 1, data.find(b"\0", at)
                messages[key] = {
                    "present": True,
                    "so": info.filename,
                    "string": data[start:end][:300].decode("utf-8", "replace"),
                }
        fields.update(
            f for f in DEVICE_PROPERTY_FIELDS if re.search(rb"\0" + f.encode() + rb"\0", data)
        )
        if info.filename.endswith("libtorch_npu.so"):
            envs = {m.decode() for m in re.findall(rb"\0([A-Z][A-Z0-9_]{3,60})\0", data)}
            so_envs = sorted(e for e in envs if re.search(ENV_LIKE, e))
            ops = sorted({m.decode() for m in re.findall(OP_SCHEMA, data)})
    return {
        "messages": messages,
        "device_property_fields": sorted(fields),
        "so_env_vars": so_envs,
        "ops": ops,
    }


def public(module: str) -> bool:
    """A module of the public API surface (no ``_`` component, in the surface packages, not
    skipped)."""
    if any(p.startswith("_") for p in module.split(".")) or module.startswith(SKIPPED_PACKAGES):
        return False
    return module in SURFACE_MODULES or module.startswith(tuple(f"{p}" for p in SURFACE_PACKAGES))


def resolve_exports(modules: dict[str, dict[str, Any]]) -> None:
    """Add the names of star imports (the target's ``__all__``, else its public names) to each
    module, in place."""

    def exported(target: str, seen: frozenset[str]) -> dict[str, Any]:
        entry = modules.get(target)
        if entry is None or target in seen:
            return {}
        names = dict(entry["names"])
        for star in entry["star_imports"]:
            names.update(exported(star, seen | {target}))
        keep = (
            entry["all"]
            if entry["all"] is not None
            else [n for n in names if not n.startswith("_")]
        )
        return {n: names.get(n, {"kind": "value"}) for n in keep}

    for name, entry in modules.items():
        for star in entry["star_imports"]:
            for key, value in exported(star, frozenset({name})).items():
                entry["names"].setdefault(key, {**value, "via": f"from {star} import *"})


def _instance_of(modules: dict[str, dict[str, Any]], module: str, call: str) -> dict[str, Any]:
    """For ``x = Cls()`` / ``x = mod.Cls()``: the methods and attributes of ``Cls`` (the object
    ``x`` is)."""
    owner, _, cls = call.rpartition(".")
    if owner:
        target = modules.get(module, {}).get("names", {}).get(owner, {}).get("from", "")
        module = target if target in modules else f"{module}.{owner}"
    entry = modules.get(module, {}).get("names", {}).get(cls)
    if not entry or entry.get("kind") != "class":
        return {}
    return {"instance": {"methods": sorted(entry["methods"]), "attributes": entry["attributes"]}}


def _class(
    modules: dict[str, dict[str, Any]], module: str, name: str
) -> tuple[str, dict[str, Any] | None]:
    """(module, entry) of the class ``name`` as seen from ``module`` (defined there or imported into
    it)."""
    entry = modules.get(module, {}).get("names", {}).get(name, {})
    for _ in range(4):  # re-exports: follow the imports to the definition
        if entry.get("kind") != "import":
            break
        module, _, name = entry["from"].rpartition(".")
        entry = modules.get(module, {}).get("names", {}).get(name, {})
    return module, entry if entry.get("kind") == "class" else None


def _inherited(
    modules: dict[str, dict[str, Any]], module: str, cls: dict[str, Any]
) -> dict[str, list[str]]:
    """``{base: its public methods and attributes}`` for the bases torch_npu defines
    (``_KinetoProfile``)."""
    found = {}
    for base in cls["bases"]:
        owner, entry = _class(modules, module, base)
        if entry is not None and entry is not cls:
            found[base] = sorted(
                {
                    *entry["methods"],
                    *entry["attributes"],
                    *[m for ms in _inherited(modules, owner, entry).values() for m in ms],
                }
            )
    return found


def build(wheel_path: Path) -> dict[str, Any]:
    """The manifest of one wheel."""
    version = wheel_path.name.split("-")[1]
    wheel = zipfile.ZipFile(wheel_path)
    trees, envs, ext = {}, set(), {}
    for info in wheel.infolist():
        if info.filename.startswith("torch_npu/") and info.filename.endswith(".py"):
            try:
                tree = ast.parse(wheel.read(info), info.filename)
            except SyntaxError:
                continue
            name = module_name(info.filename)
            trees[name] = (info.filename, tree)
            envs |= env_vars(tree)
            for key, attrs in extension_attributes(
                name, tree, info.filename.endswith("__init__.py")
            ).items():
                ext.setdefault(key, set()).update(attrs)
    modules = {
        name: module_entry(name, tree, path.endswith("__init__.py"))
        for name, (path, tree) in trees.items()
    }
    resolve_exports(modules)
    for name, entry in modules.items():
        for value in entry["names"].values():
            if value.get("call"):
                value.update(_instance_of(modules, name, value["call"]))
            if value.get("kind") == "class":
                value["inherited"] = _inherited(modules, name, value)
    surface = {
        name: {
            "file": trees[name][0],
            "all": entry["all"],
            "names": {k: v for k, v in sorted(entry["names"].items()) if not k.startswith("_")},
        }
        for name, entry in sorted(modules.items())
        if public(name)
    }
    return {
        "torch_npu": version,
        "wheel": wheel_path.name,
        "sha256": hashlib.sha256(wheel_path.read_bytes()).hexdigest(),
        "generated_by": "scripts/npu_manifest.py",
        "modules": surface,
        "extension_attributes": {k: sorted(v) for k, v in sorted(ext.items())},
        "env_vars": sorted(envs),
        "profiler": profiler_layout(trees),
        **so_facts(wheel),
    }


def main(argv: list[str] | None = None) -> int:
    """Download each version's wheel and write its manifest; prints one line per version."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="*", default=list(DEFAULT_VERSIONS))
    parser.add_argument(
        "--wheels", type=Path, default=Path("/tmp/npu-wheels"), help="download directory"
    )
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for version in args.versions:
        manifest = build(download(version, args.wheels))
        path = args.out / f"torch_npu-{manifest['torch_npu']}.json"
        path.write_text(json.dumps(manifest, indent=0, sort_keys=True, ensure_ascii=False) + "\n")
        print(
            f"{path}: {len(manifest['modules'])} modules, {len(manifest['env_vars'])} env vars, "
            f"{path.stat().st_size // 1024} KiB"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
