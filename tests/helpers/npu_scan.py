"""Every torch_npu name a source tree touches, found by AST, and checked against the torch_npu
manifests.

What counts as torch_npu: the module ``torch_npu`` and its submodules (``import``, ``from ...
    import``,
``importlib.import_module("torch_npu...")``), ``torch.npu`` (torch_npu.npu), and a device runtime: a
name or attribute called ``runtime`` (``devices/runtime.py`` returns ``torch.npu`` as it on an NPU,
so what is read from it must exist there; Hydra's ``hydra.runtime`` is not one). Objects made from
them are followed: ``with torch_npu.profiler.profile(...) as prof`` makes ``prof.<name>`` a method
of that class; ``runtime.get_device_properties(i).<field>`` a bound device property.

A use is *guarded* (a version guard) when it is ``getattr(x, "name", default)`` / ``hasattr(x,
"name")``, or sits in a ``try`` whose handler catches AttributeError, ImportError or Exception. An
unguarded name must exist in every manifest version; a guarded one in at least one.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

RUNTIME_MODULE = "torch_npu.npu"
GUARD_EXCEPTIONS = {"AttributeError", "ImportError", "ModuleNotFoundError", "Exception",
                    "BaseException"}


@dataclass(frozen=True)
class Use:
    """One name read from torch_npu: where (``file:line``), what (``owner`` kind and key,
    ``name``)."""

    where: str
    # "module:<dotted>" | "attr:<module>.<name>" | "instance:<module>.<callable>" |
    # "device_properties"
    owner: str
    name: str
    guarded: bool

    def label(self) -> str:
        """``torch_npu.npu.synchronize`` / ``torch_npu.profiler.profile().key_averages``."""
        kind, _, key = self.owner.partition(":")
        if kind == "instance":
            return f"{key}().{self.name}"
        return f"{key or kind}.{self.name}"


def _module_of(node: ast.AST, env: dict[str, str]) -> str | None:
    """The torch_npu module an expression denotes, if any."""
    if isinstance(node, ast.Name):
        if node.id == "runtime":
            return RUNTIME_MODULE
        value = env.get(node.id)
        return value[len("module:"):] if value and value.startswith("module:") else None
    if isinstance(node, ast.Attribute):
        # not hydra.runtime
        if node.attr == "runtime" and "hydra" not in ast.unparse(node.value).lower():
            return RUNTIME_MODULE
        if node.attr == "npu" and isinstance(node.value, ast.Name) and node.value.id == "torch":
            return RUNTIME_MODULE
    if isinstance(node, ast.Call) and ast.unparse(node.func) in ("importlib.import_module",
                                                                 "import_module"):
        first = node.args[0] if node.args else None
        if isinstance(first, ast.Constant) and str(first.value).startswith("torch_npu"):
            return str(node.args[0].value)
    return None


class _Scanner(ast.NodeVisitor):
    def __init__(self, where: str) -> None:
        self.where, self.env, self.uses, self.guard_depth = where, {}, [], 0

    def _use(self, node: ast.AST, owner: str, name: str, guarded: bool = False) -> None:
        self.uses.append(Use(f"{self.where}:{node.lineno}", owner, name,
                             guarded or self.guard_depth > 0))

    def _owner(self, node: ast.AST) -> str | None:
        """What kind of torch_npu object ``node`` is (see :class:`Use.owner`)."""
        module = _module_of(node, self.env)
        if module:
            return f"module:{module}"
        if isinstance(node, ast.Name):
            found = self.env.get(node.id)
            return None if str(found or "").startswith("module:") else found
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            base = self._dotted(node.func.value)
            if base and node.func.attr == "get_device_properties":
                return "device_properties"
            if base:
                return f"instance:{base}.{node.func.attr}"
        if isinstance(node, ast.Attribute):
            base = self._dotted(node.value)
            if base:  # a submodule, an object (matmul), ProfilerActivity...
                return f"attr:{base}.{node.attr}"
        return None

    def _dotted(self, node: ast.AST) -> str | None:
        """``torch_npu.profiler`` for a module or a module's attribute (what may be a submodule)."""
        owner = self._owner(node)
        kind, _, key = (owner or "").partition(":")
        return key if kind in ("module", "attr") else None

    # -- bindings ----------------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:  # noqa: N802 - ast.NodeVisitor
        for alias in node.names:
            if alias.name.split(".")[0] == "torch_npu":
                module = alias.name if alias.asname else "torch_npu"
                self.env[alias.asname or "torch_npu"] = f"module:{module}"

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:  # noqa: N802
        if (node.module or "").split(".")[0] == "torch_npu":
            for alias in node.names:
                self._use(node, f"module:{node.module}", alias.name)

    def visit_Assign(self, node: ast.Assign) -> None:  # noqa: N802
        self.generic_visit(node)
        owner = self._owner(node.value)
        for target in node.targets:
            if owner and isinstance(target, ast.Name):
                self.env[target.id] = owner

    def visit_With(self, node: ast.With) -> None:  # noqa: N802
        for item in node.items:
            self.visit(item.context_expr)
            owner = self._owner(item.context_expr)
            if owner and isinstance(item.optional_vars, ast.Name):
                self.env[item.optional_vars.id] = owner
        for statement in node.body:
            self.visit(statement)

    def visit_Try(self, node: ast.Try) -> None:  # noqa: N802
        caught = {ast.unparse(h.type) if h.type else "BaseException" for h in node.handlers}
        caught = {c for names in caught for c in names.strip("()").replace(" ", "").split(",")}
        guarded = bool(caught & GUARD_EXCEPTIONS)
        self.guard_depth += guarded
        for statement in node.body:
            self.visit(statement)
        self.guard_depth -= guarded
        for part in [*node.handlers, *node.orelse, *node.finalbody]:
            self.visit(part)

    # -- uses --------------------------------------------------------------------------------------
    def visit_Attribute(self, node: ast.Attribute) -> None:  # noqa: N802
        owner = self._owner(node.value)
        if owner and isinstance(node.ctx, (ast.Load, ast.Store)):
            self._use(node, owner, node.attr)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:  # noqa: N802
        func = ast.unparse(node.func)
        if (func in ("getattr", "hasattr") and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)):
            owner = self._owner(node.args[0])
            if owner:
                self._use(node, owner, str(node.args[1].value),
                          guarded=func == "hasattr" or len(node.args) == 3)
        self.generic_visit(node)


def scan_source(source: str, where: str) -> list[Use]:
    """The torch_npu uses of one module's source."""
    scanner = _Scanner(where)
    scanner.visit(ast.parse(source, where))
    return scanner.uses


def scan_tree(root: Path) -> list[Use]:
    """The torch_npu uses of every ``*.py`` under ``root`` (``where`` relative to its parent)."""
    uses = []
    for path in sorted(Path(root).rglob("*.py")):
        uses += scan_source(path.read_text(), str(path.relative_to(Path(root).parent)))
    return uses


def _names(manifest: dict[str, Any], module: str) -> dict[str, Any] | None:
    entry = manifest["modules"].get(module)
    return None if entry is None else entry["names"]


def _class_members(manifest: dict[str, Any], qualname: str) -> set[str] | None:
    """Methods and attributes (inherited included) of ``module.Class``, following re-exports."""
    module, _, cls = qualname.rpartition(".")
    for _ in range(4):
        entry = (_names(manifest, module) or {}).get(cls)
        if entry is None:
            return None
        if entry.get("kind") != "import":
            break
        module, _, cls = entry["from"].rpartition(".")
    if entry.get("kind") != "class":
        return None  # what a function returns: not in the manifest
    inherited = {m for members in entry.get("inherited", {}).values() for m in members}
    return {*entry["methods"], *entry["attributes"], *inherited}


def _module_has(manifest: dict[str, Any], module: str, name: str) -> bool:
    """A name of a module, a submodule, or (``torch_npu.npu_*``) an operator libtorch_npu.so
    registers."""
    if module == "torch_npu" and name in manifest.get("ops", ()):
        return True
    names = _names(manifest, module)
    return names is not None and (name in names or f"{module}.{name}" in manifest["modules"])


def _attr_has(manifest: dict[str, Any], key: str, name: str) -> bool | None:
    """``module.attr.name``: attr a submodule, an object with an instance entry, or a C-extension
    import."""
    if key in manifest["modules"]:
        return _module_has(manifest, key, name)
    module, _, attr = key.rpartition(".")
    names = _names(manifest, module)
    if names is None:
        return None  # deeper than the manifest goes
    entry = names.get(attr)
    if entry is None:
        return False  # the attribute itself is missing: reported on its own use too
    origin = entry.get("from", "")
    if origin.startswith("torch_npu._C"):
        return name in manifest["extension_attributes"].get(origin, [])
    if "instance" in entry:
        return name in {*entry["instance"]["methods"], *entry["instance"]["attributes"]}
    return None


def exists(manifest: dict[str, Any], use: Use) -> bool | None:
    """Whether the torch_npu of ``manifest`` has what ``use`` reads (``None``: the manifest cannot
    say, e.g. an attribute of what a function returns)."""
    kind, _, key = use.owner.partition(":")
    if kind == "module":
        return _module_has(manifest, key, use.name)
    if kind == "attr":
        return _attr_has(manifest, key, use.name)
    if kind == "instance":
        members = _class_members(manifest, key)
        return None if members is None else use.name in members
    if kind == "device_properties":
        return use.name in manifest["device_property_fields"]
    return None


def unverifiable(uses: list[Use], manifests: dict[str, dict[str, Any]]) -> list[str]:
    """Uses no manifest can decide (kept visible: the test prints them)."""
    return [f"{u.where}: {u.label()}" for u in uses
            if all(exists(m, u) is None for m in manifests.values())]


def nonconforming(uses: list[Use], manifests: dict[str, dict[str, Any]]) -> Iterator[str]:
    """One line per use that a version lacks (unguarded) or that no version has (guarded)."""
    for use in uses:
        missing = [v for v, m in manifests.items() if exists(m, use) is False]
        if missing and (not use.guarded or len(missing) == len(manifests)):
            yield f"{use.where}: {use.label()} is not in torch_npu {', '.join(missing)}" + (
                " (guarded, but no version has it)" if use.guarded else "")


# What marks a string constant as (a piece of) a torch_npu message the code matches against. "NPU"
# in capitals, as torch_npu writes it: ascendbench's own texts about `_native_npu` are no torch_npu
# message.
MESSAGE_MARKER = re.compile(r"NPU.{0,40}(?i:out of "
                            r"memory|backend)|NPUWorkspaceAllocator|(?i:fall\s?back to run)")


def message_constants(root: Path) -> list[tuple[str, str]]:
    """(``file:line``, text) of every string constant under ``root`` naming a torch_npu message
    (docstrings
    left out: they show messages, they do not match them)."""
    found = []
    for path in sorted(Path(root).rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        owners = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, owners) and n.body and isinstance(n.body[0], ast.Expr)
                      and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and id(node) not in docstrings and MESSAGE_MARKER.search(node.value)):
                found.append((f"{path.relative_to(Path(root).parent)}:{node.lineno}", node.value))
    return found


def unknown_messages(constants: list[tuple[str, str]],
                     manifests: dict[str, dict[str, Any]]) -> Iterator[str]:
    """One line per message constant that is not part of a message text of every version's shared
    objects."""
    for where, text in constants:
        lacking = [v for v, m in manifests.items()
                   if not any(text in e.get("string", "") for e in m["messages"].values())]
        if lacking:
            yield f"{where}: {text!r} is in no message of torch_npu {', '.join(lacking)}"
