"""The package's import graph has no circle, counting the imports inside functions too
(an import moved into a function to break a circle still ties the two modules): each
family's command module sits below the command line, the lifecycle below the jobs."""
from __future__ import annotations

import ast
import os

import networkx as nx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: the folders installed as ``continual_synth.<name>`` (setup.py's package_dir)
FOLDERS = {"continual_synth": "continual_synth", "mechanisms": "continual_synth.mechanisms",
           "transforms": "continual_synth.transforms", "pipelines": "continual_synth.pipelines",
           "runners": "continual_synth.runners"}


def modules():
    found = {}
    for folder, package in FOLDERS.items():
        for where, subfolders, names in os.walk(os.path.join(ROOT, folder)):
            subfolders[:] = [s for s in subfolders if s != "__pycache__"]
            parts = os.path.relpath(where, os.path.join(ROOT, folder)).split(os.sep)
            prefix = ".".join([package] + [p for p in parts if p != "."])
            for name in sorted(names):
                if name.endswith(".py"):
                    module = prefix if name == "__init__.py" else f"{prefix}.{name[:-3]}"
                    found[module] = os.path.join(where, name)
    return found


def import_graph():
    found = modules()
    graph = nx.DiGraph()
    for module, path in found.items():
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            graph.add_edges_from((module, target) for target in targets
                                 if target in found and target != module)
    return graph


def test_the_import_graph_has_no_circle():
    graph = import_graph()
    assert graph.number_of_nodes() > 50   # the walk found the package
    circles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert circles == []


def test_a_planted_circle_is_found():
    graph = import_graph()
    graph.add_edge("continual_synth.pipelines.commands.options", "continual_synth.pipelines.commands.cli")
    assert any(len(c) > 1 for c in nx.strongly_connected_components(graph))


def declared_names(path):
    """``(names in the module's __all__ or None, names the module defines, names it
    defines or imports)``."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    declared, defined, imported = None, set(), set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imported.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    defined.add(target.id)
                    if target.id == "__all__" and isinstance(node.value, ast.List):
                        declared = [ast.literal_eval(e) for e in node.value.elts]
                    elif target.id == "__all__":  # computed: a package's re-exports
                        declared = []
    return declared, defined, defined | imported


def test_every_module_declares_what_it_exports():
    """Each module with public definitions says which are its interface (``__all__``), and
    every name there exists; a package's ``__init__`` may re-export without one."""
    missing, unknown = [], []
    for module, path in modules().items():
        declared, defined, bound = declared_names(path)
        if declared is None:
            if any(not name.startswith("_") for name in defined) \
                    and not path.endswith("__init__.py"):
                missing.append(module)
            continue
        unknown += [f"{module}.{name}" for name in declared if name not in bound]
    assert missing == [] and unknown == []


def test_an_unknown_export_is_found(tmp_path):
    path = tmp_path / "module.py"
    path.write_text('__all__ = ["defined", "not_defined"]\n\ndef defined():\n    pass\n')
    declared, _, bound = declared_names(str(path))
    assert [name for name in declared if name not in bound] == ["not_defined"]
