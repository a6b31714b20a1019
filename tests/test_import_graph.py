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
