#!/usr/bin/env python3
"""Fails when a source file includes a header of a higher layer.

brigade's folders are layered (docs/architecture.md): a folder may include its own headers and
those of the layers below it, never those above. Folders on one line are peers: neither includes
the other unless the line says so.

Usage: check_layers.py SOURCE_DIR
"""
import os
import re
import sys

# Lowest first. A folder may include the folders of earlier layers (and itself).
LAYERS = [
    ["common"],
    ["gpu", "kvcache", "eplb", "transport"],
    ["model"],        # the engine keeps its KV in kvcache's block pool
    ["serve"],      # the HTTP edge and the inference_service interface it serves
    ["actors"],     # the roles and their protocols: no manifest, no node agent
    ["cluster"],    # the data plane, node agents
    ["config"],     # manifests: plain configuration, parsed for the composition layer
    ["deploy"],     # the composition layer: topology, supervisor, membership, the edge adapter
    ["chaos", "bench"],
    ["cli"],
]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')


def layer_of():
    out = {}
    for level, folders in enumerate(LAYERS):
        for f in folders:
            out[f] = level
    return out


def main():
    root = sys.argv[1]
    levels = layer_of()
    problems = []
    for folder, level in levels.items():
        base = os.path.join(root, folder)
        for dirpath, _, files in os.walk(base):
            for name in files:
                if not name.endswith((".hpp", ".cpp", ".cu", ".cuh", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = m.group(1)
                        if target not in levels or target == folder:
                            continue
                        if levels[target] >= level:
                            rel = os.path.relpath(path, root)
                            problems.append(f"{rel}:{number}: {folder}/ includes {target}/, "
                                            f"which is {'a peer' if levels[target] == level else 'above it'}")
    if problems:
        print("layering broken (scripts/check_layers.py lists the layers):")
        for p in problems:
            print("  " + p)
        return 1
    print(f"layers hold: no include reaches up ({len(levels)} folders checked)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
